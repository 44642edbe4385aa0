//! Stable error codes.

/// The stable codes of the `subagent` tool's errors (beyond the provider's own
/// codes, which pass through): importable, matchable, and what `code()` returns
/// as text. The text of a code never changes; the table of every code is in
/// `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `BACKGROUND_DISABLED`: `run_in_background` is set but the instance does not allow it.
    BackgroundDisabled,
    /// `TASKS_UNAVAILABLE`: background runs need the task tools (`task_output`) to be collected.
    TasksUnavailable,
    /// `CONTROL_UNAVAILABLE`: continuable runs need the control service and `send_message`.
    ControlUnavailable,
    /// `TOOL_MOUNT_FAILED`: the tool could not be mounted when its provider appeared.
    ToolMountFailed,
    /// `RELEASE_ABANDONED`: a child's release did not finish within the grace period.
    ReleaseAbandoned,
    /// `PROVIDER_PANICKED`: the provider panicked in a stage.
    ProviderPanicked,
    /// `RUN_AND_DISPOSE_FAILED`: the run failed and so did releasing it.
    RunAndDisposeFailed,
    /// `RUN_ABORTED`: the child stopped `aborted`.
    RunAborted,
    /// `RUN_FAILED`: the child stopped `error`.
    RunFailed,
    /// `RUN_MAX_TOKENS`: the child stopped `max-tokens`.
    RunMaxTokens,
    /// `RUN_REFUSED`: the child stopped `refusal`.
    RunRefused,
    /// `RUN_ENDED_ABNORMALLY`: the child stopped for a reason of its provider's own.
    RunEndedAbnormally,
}

impl ErrorCode {
    /// The code as text, e.g. `BACKGROUND_DISABLED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BackgroundDisabled => "BACKGROUND_DISABLED",
            Self::TasksUnavailable => "TASKS_UNAVAILABLE",
            Self::ControlUnavailable => "CONTROL_UNAVAILABLE",
            Self::ToolMountFailed => "TOOL_MOUNT_FAILED",
            Self::ReleaseAbandoned => "RELEASE_ABANDONED",
            Self::ProviderPanicked => "PROVIDER_PANICKED",
            Self::RunAndDisposeFailed => "RUN_AND_DISPOSE_FAILED",
            Self::RunAborted => "RUN_ABORTED",
            Self::RunFailed => "RUN_FAILED",
            Self::RunMaxTokens => "RUN_MAX_TOKENS",
            Self::RunRefused => "RUN_REFUSED",
            Self::RunEndedAbnormally => "RUN_ENDED_ABNORMALLY",
        }
    }
}

dsh_subagent_api::error_code_text!(ErrorCode);
