//! Stable error codes.

dsh_subagent_api::error_codes! {
    /// The stable codes of the `subagent` tool's errors (beyond the provider's own
    /// codes, which pass through): importable, matchable, and what `code()` returns
    /// as text. The text of a code never changes; the table of every code is in
    /// `docs/errors.md`.
    pub enum ErrorCode {
        /// `BACKGROUND_DISABLED`: `run_in_background` is set but the instance does not allow it.
        BackgroundDisabled => "BACKGROUND_DISABLED",
        /// `TASKS_UNAVAILABLE`: background runs need the task tools (`task_output`) to be collected.
        TasksUnavailable => "TASKS_UNAVAILABLE",
        /// `CONTROL_UNAVAILABLE`: continuable runs need the control service and `send_message`.
        ControlUnavailable => "CONTROL_UNAVAILABLE",
        /// `TOOL_MOUNT_FAILED`: the tool could not be mounted when its provider appeared.
        ToolMountFailed => "TOOL_MOUNT_FAILED",
        /// `RELEASE_ABANDONED`: a child's release did not finish within the grace period.
        ReleaseAbandoned => "RELEASE_ABANDONED",
        /// `PROVIDER_PANICKED`: the provider panicked in a stage.
        ProviderPanicked => "PROVIDER_PANICKED",
        /// `RUN_AND_DISPOSE_FAILED`: the run failed and so did releasing it.
        RunAndDisposeFailed => "RUN_AND_DISPOSE_FAILED",
        /// `RUN_ABORTED`: the child stopped `aborted`.
        RunAborted => "RUN_ABORTED",
        /// `RUN_FAILED`: the child stopped `error`.
        RunFailed => "RUN_FAILED",
        /// `RUN_MAX_TOKENS`: the child stopped `max-tokens`.
        RunMaxTokens => "RUN_MAX_TOKENS",
        /// `RUN_REFUSED`: the child stopped `refusal`.
        RunRefused => "RUN_REFUSED",
        /// `RUN_ENDED_ABNORMALLY`: the child stopped for a reason of its provider's own.
        RunEndedAbnormally => "RUN_ENDED_ABNORMALLY",
    }
}
