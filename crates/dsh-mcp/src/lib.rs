#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod process;
mod server;
mod spec;
pub mod wording;

pub use client::{
    ClientOptions, MCP_CALL_CANCELLED, MCP_CALL_FAILED, MCP_SERVER_GONE, MCP_TOOL_ERROR, McpMount, McpStartError,
};
pub use server::{CallEnd, McpServeError, McpToolServer};
pub use spec::{McpServerSpec, NAME_SEPARATOR, SpecError, TOOL_PREFIX};
