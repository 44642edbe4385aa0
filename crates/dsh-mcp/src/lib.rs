#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod call_progress;
mod client;
mod client_error;
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
pub use client::McpMount;
pub use client_error::{HandshakeStep, McpReleaseError, McpStartError, StartFailure};
pub use code::ErrorCode;
pub use http::server::{HttpServeOptions, MCP_PATH, SessionAgents};
pub use options::ClientOptions;
pub use server::{CallEnd, MIN_TOKEN_BYTES, McpServeError, McpToolServer};
pub use spec::{McpEndpoint, McpServerSpec, NAME_SEPARATOR, RemoteServer, SpecError, TOOL_PREFIX};

/// A cause from a library below this crate (the MCP SDK, the HTTP server),
/// kept whole for [`std::error::Error::source`] without naming its type in
/// this crate's API.
pub type BoxedCause = Box<dyn std::error::Error + Send + Sync + 'static>;
