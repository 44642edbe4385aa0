pub(crate) mod otlp;
