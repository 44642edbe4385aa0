//! The texts of the service, the settlement and the control service, in one
//! place: the model reads some of them through the `subagent` and
//! `send_message` tools, and people read the rest in logs.

use std::fmt::Display;

/// The name of the tool through which a model sends follow-ups to
/// continuable children (mounted by `dsh-tool-subagent-control`).
pub const SEND_MESSAGE_TOOL: &str = "send_message";

/// The call was cancelled and releasing the child did not finish within the
/// grace period, so the settlement stopped waiting.
pub const RELEASE_ABANDONED: &str =
    "subagent release did not finish after the call was cancelled and was abandoned; the child may still be running";

/// The headline of a cancelled run (the `subagent` tool's, for an
/// `aborted` stop), which is also what a start cancelled while it waited
/// for a slot of its delegation tree fails with: nothing was started.
pub const RUN_CANCELLED: &str = "subagent run was cancelled";

/// The stop reason of a run that reached its time limit (a tool's
/// `timeout`): `time limit of 10 min reached`.
pub fn time_limit_reached(limit: std::time::Duration) -> String {
    format!("time limit of {} reached", human_duration(limit))
}

/// A duration in the largest whole unit that states it exactly: `2 h`,
/// `10 min`, `90 s`, `1500 ms`.
pub fn human_duration(duration: std::time::Duration) -> String {
    let millis = duration.as_millis();
    match millis {
        0 => "0 s".to_owned(),
        m if m % 3_600_000 == 0 => format!("{} h", m / 3_600_000),
        m if m % 60_000 == 0 => format!("{} min", m / 60_000),
        m if m % 1_000 == 0 => format!("{} s", m / 1_000),
        m => format!("{m} ms"),
    }
}

/// The stage name of awaiting a run's result, in [`provider_panicked`].
pub const STAGE_RUN: &str = "the run";

/// The stage name of releasing a run, in [`provider_panicked`].
pub const STAGE_DISPOSE: &str = "dispose";

/// The stage name of starting a run, in [`provider_panicked`].
pub const STAGE_START: &str = "start";

/// A provider panicked in one stage of the child's life.
pub fn provider_panicked(stage: &str, message: &str) -> String {
    format!("subagent provider panicked during {stage}: {message}")
}

/// A settlement found its run gone (never expected).
pub(crate) const RUN_ALREADY_RELEASED: &str = "subagent run was already released";

/// Logged when the release of an abandoned call fails.
pub(crate) fn abandoned_release_failed(error: &dsh_subagent_api::SubagentError) -> String {
    format!("subagent release after an abandoned call failed: {error}")
}

/// Logged when a call is abandoned where no tokio runtime can finish its release.
pub(crate) const RELEASE_OUTSIDE_RUNTIME: &str =
    "subagent call abandoned outside a tokio runtime; the child's release was started but not awaited";

/// The detail of a task whose run failed with a diagnostic.
pub(crate) fn failed_run_detail(reason: impl Display, diagnostic: &str) -> String {
    format!("{reason}; diagnostic: {diagnostic}")
}

/// The detail of a task whose release failed after an earlier failure.
pub(crate) fn dispose_failed_after(previous: &str, error: &str) -> String {
    format!("{previous}; dispose failed: {error}")
}

/// The detail of a task whose release failed.
pub(crate) fn dispose_failed(error: &str) -> String {
    format!("dispose failed: {error}")
}

/// A `dispatch` listener panicked; the event's start is refused with this.
pub(crate) fn listener_panicked(event: &str, message: &str) -> String {
    format!("{event} listener panicked: {message}")
}

/// Logged when a `notify` listener fails (an error or a panic's message).
pub(crate) fn listener_threw(event: &str, error: impl Display) -> String {
    format!("subagent: {event} listener threw: {error}")
}

// The control service (`send_message` and continuable children): the model
// reads its errors (docs/contract.md, "send_message").

/// The child's current activation task is no longer running but has not
/// released the child yet.
pub(crate) fn activation_settling(child: &str, task_id: &str, status: impl Display) -> String {
    format!(
        "subagent \"{child}\" task {task_id} is {status}; the message was not delivered — retry after it settles to start the next activation"
    )
}

/// The running activation's provider offers no live delivery.
pub(crate) fn no_live_delivery(child: &str) -> String {
    format!("subagent \"{child}\" provider does not accept live delivery; the message was not delivered")
}

/// The running turn ended before the message could join it.
pub(crate) fn stopped_before_delivery(child: &str) -> String {
    format!("subagent \"{child}\" stopped before delivery; the message was not delivered")
}

/// A live run outside the control service's ownership has this id.
pub(crate) fn ownership_conflict(child: &str) -> String {
    format!("subagent \"{child}\" has a live agent outside control-service ownership; the message was not delivered")
}

/// The live run with this id is not the run of the child's current activation.
pub(crate) fn registry_mismatch(child: &str) -> String {
    format!(
        "subagent \"{child}\" registry agent is not the associated activation's agent; the message was not delivered"
    )
}

/// The control service has no durable child store.
pub(crate) const PERSISTENCE_UNAVAILABLE: &str =
    "continuable subagents require session persistence (create SubagentControl with a ChildStore)";

/// Another caller's follow-up is looking the child up.
pub(crate) fn activation_starting(child: &str) -> String {
    format!("subagent \"{child}\" activation is starting; the message was not delivered")
}

/// The task registry refused the follow-up task.
pub(crate) fn follow_up_refused(source: impl Display) -> String {
    format!("{source}; the message was not delivered")
}

/// The provider cannot start continuable children.
pub(crate) fn no_continuation(provider: &str) -> String {
    format!("subagent provider \"{provider}\" does not support resuming persisted children (no resume capability)")
}

/// No persisted child of the caller's has this id (none has, it cannot be
/// read, or it is another parent's: the three read the same).
pub(crate) fn unavailable(child: &str) -> String {
    format!("subagent \"{child}\" is unavailable")
}

/// The child has no descriptor this service can resume.
pub(crate) fn no_descriptor(child: &str) -> String {
    format!("subagent \"{child}\" has no supported continuation descriptor")
}

/// The label of a follow-up task whose message is empty.
pub(crate) const EMPTY_FOLLOW_UP_LABEL: &str = "subagent follow-up";

/// Logged when reading a child from the store fails.
pub(crate) fn lookup_failed(error: impl Display) -> String {
    format!("subagent lookup failed: {error}")
}

/// Logged when a child is resumed while its record carries a diagnostic.
pub(crate) fn resuming_with_diagnostic(diagnostic: &str) -> String {
    format!("resuming with a diagnostic: {diagnostic}")
}

/// The label of a restored task whose child recorded none.
pub(crate) const RECOVERED_LABEL: &str = "recovered subagent";

/// A background child whose records name no task id.
pub(crate) const NO_TASK_RECORDED: &str = "its records name no task id";

/// A child that ran in another process, which ended with its parent's.
pub(crate) const IN_ANOTHER_PROCESS: &str =
    "it ran in another process, which ended with its parent's, and its session cannot be taken up again";

/// A child whose records hold no continuation descriptor.
pub(crate) const NO_DESCRIPTOR_RECORDED: &str = "its records hold no continuation descriptor";

/// A child whose provider is gone, or cannot continue children.
pub(crate) fn provider_cannot_recover(provider: &str) -> String {
    format!("its provider {provider:?} is not registered now, or cannot continue an interrupted child")
}

/// The detail (and output) of a restored task whose child cannot go on.
pub(crate) fn disconnected_task(child: &str, why: &str) -> String {
    format!("disconnected: subagent {child} was interrupted and cannot be resumed: {why}")
}
