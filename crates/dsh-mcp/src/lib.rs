#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod client;
mod code;
mod process;
mod server;
mod spec;
pub mod wording;

pub use client::{ClientOptions, McpMount, McpReleaseError, McpStartError};
pub use code::ErrorCode;
pub use server::{CallEnd, McpServeError, McpToolServer};
pub use spec::{McpServerSpec, NAME_SEPARATOR, SpecError, TOOL_PREFIX};
