//! `dsh mcp`: serving the parent's tools over MCP, and mounting MCP servers.

use std::fmt::Display;

/// The label of the agent `dsh mcp` serves, in its transcript.
pub(crate) const MCP_LABEL: &str = "dsh mcp";

/// A configured fork tool that `dsh mcp` does not serve, on stderr.
pub(crate) fn fork_not_served(tool: &str) -> String {
    format!(
        "dsh mcp: not serving {tool}: a fork child inherits the calling agent's conversation, which lives in the MCP host"
    )
}

/// Why `dsh mcp` kills the background tasks still running when its client leaves.
pub(crate) const MCP_SESSION_CLOSED: &str = "the MCP session closed";

/// The stderr line of `dsh mcp` for a call its client cancelled (the client
/// never receives this result).
pub(crate) fn mcp_call_cancelled(tool: &str, result: &str) -> String {
    format!("dsh mcp: the client cancelled a call to {tool}; it ended with: {result}")
}

/// `dsh mcp` ended on a transport or protocol error.
pub(crate) fn mcp_failed(error: &dyn Display) -> String {
    format!("dsh mcp: {error}")
}

/// Log line: a mounted MCP server did not shut down cleanly.
pub(crate) fn log_mcp_release_failed(error: &dyn Display) -> String {
    format!("releasing the MCP server failed: {error}")
}

/// A `--listen` value that is no address.
pub(crate) fn bad_listen_address(text: &str) -> String {
    format!("expected PORT, localhost:PORT or ADDR:PORT, got \"{text}\"")
}

/// The token variable of `--bearer-token-env` is not set.
pub(crate) fn mcp_token_variable_unset(variable: &str) -> String {
    format!("dsh mcp: the environment variable {variable} (the bearer token of --bearer-token-env) is not set or empty")
}

/// `--listen` could not take its address.
pub(crate) fn mcp_cannot_listen(address: &dyn Display, error: &dyn Display) -> String {
    format!("dsh mcp: cannot listen on {address}: {error}")
}

/// The stderr line of `dsh mcp --listen` once it serves.
pub(crate) fn mcp_listening(address: &dyn Display, path: &str) -> String {
    format!("dsh mcp: serving MCP at http://{address}{path}")
}

/// Progress of an MCP call: a child it started has started.
pub(crate) fn mcp_child_started(label: &str, provider: &str, id: &str) -> String {
    format!("subagent \"{label}\" started ({provider}, {id})")
}

/// Progress of an MCP call: its child finished a model call.
pub(crate) fn mcp_child_model_call(
    label: &str,
    steps: u32,
    usage: Option<dsh_llm::Usage>,
    cost: dsh_agent::Priced,
) -> String {
    format!(
        "subagent \"{label}\" working · {}",
        super::model_calls(steps, usage, cost)
    )
}

/// Progress of an MCP call: its child is calling a tool.
pub(crate) fn mcp_child_tool(label: &str, tool: &str) -> String {
    format!("subagent \"{label}\" calls {tool}")
}

/// Progress of an MCP call: its child settled ([`super::child_summary`]).
pub(crate) fn mcp_child_settled(label: &str, summary: &str) -> String {
    format!("subagent \"{label}\" {summary}")
}

/// Progress of an MCP call: its child waits for a slot of its delegation
/// tree, behind `ahead` other calls.
pub(crate) fn mcp_child_queued(label: &str, ahead: usize) -> String {
    format!("subagent \"{label}\" {}", super::queued(ahead))
}

/// Progress of an MCP call: its queued child was cancelled before it started.
pub(crate) fn mcp_child_withdrawn(label: &str) -> String {
    format!("subagent \"{label}\" {}", super::WITHDRAWN)
}
