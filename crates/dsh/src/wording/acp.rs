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

/// Why a session's background children were killed: its client closed
/// the session (`session/close`).
pub(crate) const ACP_SESSION_CLOSED: &str = "the ACP session was closed";

/// A request for a session this agent does not hold.
pub(crate) fn unknown_session(id: &dyn Display) -> String {
    format!("unknown session {id}")
}

/// `session/load` of a session whose transcript is there but cannot be
/// continued; the reason goes to stderr, not to the client.
pub(crate) fn session_not_loaded(id: &dyn Display) -> String {
    format!("session {id} cannot be loaded; the agent's log says why")
}

/// `session/load` of a session another process runs now (another `dsh
/// acp`, a `dsh run --resume`); the lock file's path goes to stderr.
pub(crate) fn session_busy(id: &dyn Display) -> String {
    format!("session {id} is open in another dsh process; close it there first")
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

/// A session whose MCP servers would run in a `cwd` that is not a directory.
pub(crate) fn acp_mcp_cwd_not_a_directory(cwd: &std::path::Path) -> String {
    format!(
        "the session's cwd {} is not a directory, and its MCP servers run there",
        cwd.display()
    )
}

/// Reports of agents not yet announced as subagent sessions were dropped
/// past their bound (logged once per connection).
pub(crate) const ACP_SUBAGENT_REPORTS_DROPPED: &str = "dsh acp: too many reports of children not yet announced as subagent sessions; the rest were dropped, so some subagent sessions miss their first updates";

/// A session method other than `session/cancel` called with the id of a
/// subagent session (a child the agent announced), which a client may not
/// drive: `what` is what the method would do (`prompt`, `load`, `close`).
pub(crate) fn subagent_session_refused(id: &dyn Display, what: &str) -> String {
    format!(
        "session {id} is a subagent session, started by its parent agent: a client cannot {what} it; only session/cancel is taken for it, while it runs"
    )
}

/// `session/cancel` with an id that is no session's nor a running
/// subagent's: ignored (a notification has no answer), logged.
pub(crate) fn cancel_ignored_unknown(id: &dyn Display) -> String {
    format!("dsh acp: session/cancel for unknown session {id}; nothing to cancel")
}

/// `session/cancel` with the id of a subagent session that has ended.
pub(crate) fn cancel_ignored_ended(id: &dyn Display) -> String {
    format!("dsh acp: session/cancel for subagent session {id}, which has ended; nothing to cancel")
}

/// `session/load` replays a subagent session whose record cannot be read
/// whole: what could be read is replayed, and the session is closed as
/// disconnected.
pub(crate) fn subagent_record_torn(session: &dyn Display, child: &dyn Display, why: &dyn Display) -> String {
    format!(
        "dsh acp: session/load of {session}: the record of subagent session {child} is not whole ({why}); what could be read is replayed and it is closed as disconnected"
    )
}

/// A replayed tool call whose result was never recorded: its run was
/// interrupted (the process ended mid-call).
pub(crate) const ACP_CALL_INTERRUPTED: &str = "interrupted: the run ended before this call's result was recorded";
