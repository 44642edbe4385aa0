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
