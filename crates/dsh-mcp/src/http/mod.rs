//! MCP over Streamable HTTP: the client's HTTP requests ([`client`]) and
//! the server ([`server`], behind [`front`]), both on rmcp's transports.

pub(crate) mod client;
pub(crate) mod front;
mod guard;
mod reply;
pub(crate) mod server;
mod sessions;

#[cfg(test)]
mod tests;
