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
