#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod args;
mod code;
mod config;
mod config_error;
mod continuable;
mod cut;
mod lifecycle;
mod max_depth;
mod plugin;
mod render;
mod tool;
pub mod wording;

pub use code::ErrorCode;
pub use config::{ConfigError, SubagentToolConfig};
pub use dsh_subagent::RELEASE_GRACE;
pub use max_depth::MaxDepth;
pub use plugin::SubagentToolPlugin;
pub use wording::Wording;

// What mounting `subagent` needs, so a harness depends on this crate alone:
// the service providers register in, the registry the tool lands in, and the
// provider seam (`provider::SubagentProvider` and its types) for a provider
// of the harness's own.
pub use dsh_subagent::{ProviderRegistration, SubagentService};
pub use dsh_subagent_api as provider;
pub use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult, ToolSpec};
