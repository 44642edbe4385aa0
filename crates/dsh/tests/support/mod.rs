pub(crate) mod otlp;
pub(crate) mod model;
pub(crate) mod tree;
