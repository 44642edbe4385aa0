//! The texts of the settlement, in one place: the model reads some of them
//! through the `subagent` tool, and people read the rest in logs.

/// The name of the tool through which a model sends follow-ups to
/// continuable children (mounted by `dsh-tool-subagent-control`).
pub const SEND_MESSAGE_TOOL: &str = "send_message";

/// The call was cancelled and releasing the child did not finish within the
/// grace period, so the settlement stopped waiting.
pub const RELEASE_ABANDONED: &str =
    "subagent release did not finish after the call was cancelled and was abandoned; the child may still be running";

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

/// A settlement found its run's outcome missing after it settled (never expected).
pub(crate) const RUN_NOT_SETTLED: &str = "subagent run result was not settled";

/// Logged when the release of an abandoned call fails.
pub(crate) fn abandoned_release_failed(error: &dsh_subagent_api::SubagentError) -> String {
    format!("subagent release after an abandoned call failed: {error}")
}

/// Logged when a call is abandoned where no tokio runtime can finish its release.
pub(crate) const RELEASE_OUTSIDE_RUNTIME: &str =
    "subagent call abandoned outside a tokio runtime; the child's release was started but not awaited";
