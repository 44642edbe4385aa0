//! The calling agent of a tool call, as tests name it.

use dsh_tools::{AgentRef, CancellationToken, ToolExecution};

/// The context of a call made by the top-level agent `agent`, with a fresh
/// token that never fires.
pub fn exec(agent: &str) -> ToolExecution {
    exec_with(agent, CancellationToken::new())
}

/// The context of a call made by the top-level agent `agent`, cancelled by
/// `cancel`.
pub fn exec_with(agent: &str, cancel: CancellationToken) -> ToolExecution {
    ToolExecution::new(cancel).with_agent(AgentRef::new(agent))
}
