#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod assembly;
mod builder;
mod check;
mod code;
mod error;
mod harness;
mod wording;

pub use assembly::Background;
pub use builder::HarnessBuilder;
pub use code::{BuildCode, BuildErrorCode};
pub use error::BuildError;
pub use harness::{Harness, Notices};

// What assembling and driving a harness needs, so a harness depends on this
// crate alone: the tool configuration, the handles a built harness holds,
// the registry's call types, and the provider seam (`provider::…`) for a
// provider of the harness's own.
pub use dsh_subagent::{
    ControlError, DelegationTree, Fate, Limits, RecoveredChild, RecoveryReport, SubagentControl, SubagentService,
};
pub use dsh_subagent_api as provider;
pub use dsh_tasks::TaskRegistry;
pub use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
pub use dsh_tools::{AgentId, AgentRef, CancellationToken, ResultLimit, Tool, ToolExecution, ToolRegistry, ToolResult};

/// The workspace README's Rust examples run as doc tests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadmeDoctests;
