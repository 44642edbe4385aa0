#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod call_progress;
mod client;
mod code;
mod http;
mod options;
mod process;
mod screen;
mod server;
mod spec;
mod stdio;
pub mod wording;

pub use call_progress::CallProgress;
pub use client::{McpMount, McpReleaseError, McpStartError};
pub use code::ErrorCode;
pub use http::server::{HttpServeOptions, MCP_PATH, SessionAgents};
pub use options::ClientOptions;
pub use server::{CallEnd, MIN_TOKEN_BYTES, McpServeError, McpToolServer};
pub use spec::{McpEndpoint, McpServerSpec, NAME_SEPARATOR, RemoteServer, SpecError, TOOL_PREFIX};
