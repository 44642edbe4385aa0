#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod code;
mod server;
pub mod wording;

pub use client::error::{HandshakeStep, McpReleaseError, McpStartError, StartFailure};
pub use client::mount::McpMount;
pub use client::options::ClientOptions;
pub use client::spec::{McpEndpoint, McpServerSpec, NAME_SEPARATOR, RemoteServer, SpecError, TOOL_PREFIX};
pub use code::ErrorCode;
pub use dsh_process::{Environment, Ladder, Launch, Program};
pub use server::call_progress::CallProgress;
pub use server::http::options::{HttpServeOptions, MCP_PATH, SessionAgents};
pub use server::tool_server::{CallEnd, MIN_TOKEN_BYTES, McpServeError, McpToolServer};

/// A cause from a library below this crate (the MCP SDK, the HTTP server),
/// kept whole for [`std::error::Error::source`] without naming its type in
/// this crate's API.
pub type BoxedCause = Box<dyn std::error::Error + Send + Sync + 'static>;
