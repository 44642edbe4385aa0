//! `dsh acp`: the ACP agent's errors to its client.

use std::fmt::Display;

/// The label of the agent each `dsh acp` session runs, in its transcript.
pub(crate) const ACP_LABEL: &str = "dsh acp";

/// A prompt turn whose agent run ended in an error.
pub(crate) fn agent_run_failed(message: &str) -> String {
    format!("the dsh agent run failed: {message}")
}

/// `session/prompt` while the session's previous prompt is still running.
pub(crate) const PROMPT_ALREADY_RUNNING: &str = "a prompt is already running in this session";

/// `session/new` or `session/load` while the shared runtime failed to build
/// (`dsh acp` is ending; the reason goes to stderr).
pub(crate) const ACP_SETUP_FAILED: &str = "the dsh agent could not be set up; its log says why";

/// Why a session's background children were killed: its client closed the
/// connection (their task records and `task_output` say so).
pub(crate) const ACP_CONNECTION_CLOSED: &str = "the ACP connection closed";

/// A request for a session this agent does not hold.
pub(crate) fn unknown_session(id: &dyn Display) -> String {
    format!("unknown session {id}")
}

/// `session/load` of a session whose transcript is there but cannot be
/// continued; the reason goes to stderr, not to the client.
pub(crate) fn session_not_loaded(id: &dyn Display) -> String {
    format!("session {id} cannot be loaded; the agent's log says why")
}

/// `dsh acp` ended because its connection to the client failed.
pub(crate) fn acp_connection_failed(error: &dyn Display) -> String {
    format!("dsh acp: the connection failed: {error}")
}

/// A client-supplied MCP server of a transport `dsh acp` does not take.
pub(crate) fn acp_mcp_transport_unsupported(name: &str, transport: &str) -> String {
    format!(
        "MCP server \"{name}\" is reached over {transport}, which dsh acp does not take: it takes stdio and Streamable HTTP MCP servers (as its mcpCapabilities say)"
    )
}

/// A client-supplied MCP server of a transport this schema does not name.
pub(crate) const ACP_MCP_TRANSPORT_UNKNOWN: &str =
    "an MCP server of a transport dsh acp does not take: it takes stdio and Streamable HTTP MCP servers";

/// A client-supplied MCP server that cannot be mounted as given.
pub(crate) fn acp_mcp_bad_server(name: &str, error: &dyn Display) -> String {
    format!("MCP server \"{name}\" cannot be mounted: {error}")
}

/// A client-supplied stdio MCP server whose command is not UTF-8.
pub(crate) fn acp_mcp_command_not_utf8(name: &str) -> String {
    format!("MCP server \"{name}\": its command is not valid UTF-8")
}

/// A session whose MCP servers would run in a `cwd` that is not a directory.
pub(crate) fn acp_mcp_cwd_not_a_directory(cwd: &std::path::Path) -> String {
    format!(
        "the session's cwd {} is not a directory, and its MCP servers run there",
        cwd.display()
    )
}
