//! Starting a child: cancellations, the working directory, spawning and the handshake.

use std::path::Path;
use std::time::Duration;

use dsh_subagent_api::bound_diagnostic;

/// A start whose token was already cancelled: nothing was spawned.
pub(crate) const ABORTED_BEFORE_START: &str = "subagent request was aborted before the ACP child started";

/// A start cancelled during the handshake: the child was reaped first.
pub(crate) const ABORTED_WHILE_STARTING: &str =
    "subagent request was aborted while the ACP child was starting; the child was stopped";

/// No `cwd` configured and the parent's working directory is unreadable.
pub(crate) fn no_cwd(error: &std::io::Error) -> String {
    format!(
        "subagent-acp: no working directory for the child — configure `cwd` (the parent's working directory is unavailable: {error})"
    )
}

/// The child command could not be spawned.
pub(crate) fn spawn_failed(command: &Path, error: &std::io::Error) -> String {
    format!(
        "subagent ACP child could not be started: `{}`: {error}",
        command.display()
    )
}

/// The child was spawned but did not open a session.
pub(crate) fn start_failed(diagnostic: &impl std::fmt::Display) -> String {
    bound_diagnostic(format!("subagent ACP child failed to start: {diagnostic}"))
}

/// The child did not finish the handshake within the startup timeout.
pub(crate) fn startup_timed_out(limit: Duration) -> String {
    format!("no answer within the startup timeout ({} ms)", limit.as_millis())
}

/// The task that talks to the child vanished between the handshake and the run.
pub(crate) const CONVERSATION_TASK_LOST: &str = "the ACP conversation task was lost";

/// Log line: the child process is running.
pub(crate) const LOG_CHILD_STARTED: &str = "ACP child started";

/// Log line: a start failed with `error`.
pub(crate) fn log_start_failed(error: &dyn std::fmt::Display) -> String {
    format!("ACP child start failed: {error}")
}
