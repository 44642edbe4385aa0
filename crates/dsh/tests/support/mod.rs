pub(crate) mod http;
pub(crate) mod model;
pub(crate) mod otlp;
pub(crate) mod tree;
