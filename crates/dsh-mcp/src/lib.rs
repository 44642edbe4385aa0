#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod code;
mod http;
mod process;
mod progress;
mod screen;
mod server;
mod spec;
mod stdio;
pub mod wording;

pub use client::{ClientOptions, McpMount, McpReleaseError, McpStartError};
pub use code::ErrorCode;
pub use http::server::{HttpServeOptions, MCP_PATH, MIN_TOKEN_BYTES, SessionAgents};
pub use progress::CallProgress;
pub use server::{CallEnd, McpServeError, McpToolServer};
pub use spec::{McpEndpoint, McpServerSpec, NAME_SEPARATOR, RemoteServer, SpecError, TOOL_PREFIX};
