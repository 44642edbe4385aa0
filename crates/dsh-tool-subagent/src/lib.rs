//! The model-facing `subagent` tool.
//!
//! The model hands one self-contained task to a child agent and gets back only
//! the child's final answer. One instance binds one provider to one tool
//! name; load several instances (`subagent` over spawn, `subagent_fork` over
//! fork, `subagent_acp` over ACP) to offer several transports. The model sees
//! exactly `{description, prompt}` and never a provider, model, persona,
//! filter or depth parameter: those are configuration.
//!
//! - [`SubagentToolConfig`]: provider, `toolName`, `agentOptions`, `persona`,
//!   `toolFilter`, `maxDepth`; checked when loaded ([`ConfigError`]).
//! - [`SubagentToolPlugin`]: reserves the name, follows the provider in and
//!   out of the [`SubagentService`](dsh_subagent::SubagentService), words the
//!   description for a fresh or an inherited context ([`Wording`]).
//! - Each call: start the child with the call's cancellation token, wait for
//!   its result, release it exactly once, and render: the final text on
//!   success, `Error: …` otherwise (see [`wording`]).
//! - Background (`enableRunInBackground`, default off): one-shot tasks
//!   ([`SubagentToolPlugin::apply_with_tasks`], `started background subagent
//!   task <id>`), or, when the provider can continue its children and the
//!   plugin has the control service ([`SubagentToolPlugin::apply_with_control`]),
//!   durable children (`started subagent <id> as task <taskId>`) that
//!   `send_message` continues.
//!
//! # Example
//!
//! ```
//! use dsh_subagent::SubagentService;
//! use dsh_subagent_testing::ScriptedProvider;
//! use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
//! use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let service = SubagentService::new();
//! let tools = ToolRegistry::new();
//! let _provider = service
//!     .register_provider(ScriptedProvider::builder("spawn").reply("child says hi").build())
//!     .unwrap();
//! let _plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
//!
//! let exec = ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("parent-1"));
//! let args = json!({"description": "greet", "prompt": "Say hi."});
//! let result = tools.call("subagent", args, exec).await;
//! assert_eq!(result.text, "child says hi");
//! assert!(!result.is_error);
//! # });
//! ```

#![forbid(unsafe_code)]

mod args;
mod code;
mod config;
mod continuable;
mod lifecycle;
mod plugin;
mod render;
mod tool;
pub mod wording;

pub use args::parameters;
pub use code::ErrorCode;
pub use config::{ConfigError, MaxDepth, SubagentToolConfig};
pub use lifecycle::RELEASE_GRACE;
pub use plugin::SubagentToolPlugin;
pub use wording::Wording;

// What mounting `subagent` needs, so a harness depends on this crate alone:
// the service providers register in, the registry the tool lands in, and the
// provider seam (`provider::SubagentProvider` and its types) for a provider
// of the harness's own.
pub use dsh_subagent::{ProviderRegistration, SubagentService};
pub use dsh_subagent_api as provider;
pub use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult, ToolSpec};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadmeDoctests;
