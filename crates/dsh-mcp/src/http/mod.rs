//! MCP over Streamable HTTP: the client's HTTP requests ([`client`]) and
//! the server ([`server`]), both on rmcp's transports.

pub(crate) mod client;
pub(crate) mod server;

#[cfg(test)]
mod tests;
