//! How a run ended when it did not answer: stop reasons, timeouts, cancellations.

use std::time::Duration;

/// A turn the child ended with a stop reason that maps to an error.
pub(crate) fn error_stop(stop: &str) -> String {
    format!("the child ended the turn with stop reason {stop}")
}

/// A cancelled turn the child did not end within the cancel grace.
pub(crate) fn cancel_ignored(grace: Duration) -> String {
    format!(
        "ACP stage session/cancel: the child did not end the turn within {} ms of session/cancel; it was stopped at release",
        grace.as_millis()
    )
}

/// A turn that ran out of time; `acknowledged` when the child ended it at
/// `session/cancel`.
pub(crate) fn turn_timed_out(limit: Duration, acknowledged: bool, grace: Duration) -> String {
    let mut text = format!(
        "the turn did not end within the turn timeout ({} ms), so it was cancelled",
        limit.as_millis()
    );
    if !acknowledged {
        text.push_str(&format!(
            "; the child did not end the turn within {} ms of session/cancel and was stopped at release",
            grace.as_millis()
        ));
    }
    text
}

/// A turn the child ended with a stop reason ACP does not define (`raw` is
/// already cut and cleaned).
pub(crate) fn unknown_stop(raw: &str) -> String {
    format!("the child ended the turn with an unknown stop reason \"{raw}\"")
}

/// The conversation ended before the turn did, without an error.
pub(crate) const ENDED_EARLY: &str = "the child ended the conversation early";

/// The child closed its end of the connection before answering.
pub(crate) const CLOSED_BEFORE_ANSWER: &str = "the child closed the connection before answering";

/// A request the child answered with an error.
pub(crate) fn request_failed(error: &dyn std::fmt::Display) -> String {
    format!("the request failed: {error}")
}

/// A request the child refused because it wants authentication, with what to do about it.
pub(crate) fn request_needs_auth(error: &dyn std::fmt::Display, advice: &str) -> String {
    format!("the request failed: {error}\n{advice}")
}

/// The task that talks to the child panicked or was cancelled.
pub(crate) fn conversation_task_failed(error: &dyn std::fmt::Display) -> String {
    format!("the conversation task failed: {error}")
}

/// Log line: a turn ran out of time.
pub(crate) fn log_run_timed_out(diagnostic: &dyn std::fmt::Display) -> String {
    format!("ACP child run timed out: {diagnostic}")
}

/// Log line: a run failed.
pub(crate) fn log_run_failed(diagnostic: &dyn std::fmt::Display) -> String {
    format!("ACP child run failed: {diagnostic}")
}

/// Why a child in another process cannot go on after an interruption.
pub(crate) fn interrupted_child(provider: &str) -> String {
    format!(
        "it ran in a process of ACP agent {provider:?} that ended with the run, and dsh does not take up an ACP child's session again; none of its text was kept (an ACP child's answer is recorded when it ends), so delegate the work again if it is still needed"
    )
}

/// The diagnostic of a disconnected ACP child with a task id.
pub(crate) fn disconnected_with_task(child: &str, task: &str, why: &str) -> String {
    format!("subagent {child} (task {task}) was interrupted and cannot be resumed: {why}")
}

/// The diagnostic of a disconnected ACP child.
pub(crate) fn disconnected(child: &str, why: &str) -> String {
    format!("subagent {child} was interrupted and cannot be resumed: {why}")
}
