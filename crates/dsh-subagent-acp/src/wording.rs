//! Every text this provider shows a model or a person, in one place.

use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason as AcpStop;
use dsh_subagent_api::bound_diagnostic;

use crate::diagnostic::Diagnostic;
use crate::provider::stop_name;

/// A start whose token was already cancelled: nothing was spawned.
pub(crate) const ABORTED_BEFORE_START: &str = "subagent request was aborted before the ACP child started";

/// A start cancelled during the handshake: the child was reaped first.
pub(crate) const ABORTED_WHILE_STARTING: &str =
    "subagent request was aborted while the ACP child was starting; the child was stopped";

pub(crate) fn no_cwd(error: &std::io::Error) -> String {
    format!(
        "subagent-acp: no working directory for the child — configure `cwd` (the parent's working directory is unavailable: {error})"
    )
}

pub(crate) fn spawn_failed(command: &Path, error: &std::io::Error) -> String {
    format!(
        "subagent ACP child could not be started: `{}`: {error}",
        command.display()
    )
}

pub(crate) fn start_failed(diagnostic: &Diagnostic) -> String {
    bound_diagnostic(format!("subagent ACP child failed to start: {diagnostic}"))
}

pub(crate) fn error_stop(stop: AcpStop) -> String {
    format!("the child ended the turn with stop reason {}", stop_name(stop))
}

pub(crate) fn cancel_ignored(grace: Duration) -> String {
    format!(
        "ACP stage session/cancel: the child did not end the turn within {} ms of session/cancel; it was stopped at release",
        grace.as_millis()
    )
}
