//! Stable error codes.

dsh_subagent_api::error_codes! {
    /// The stable codes of dsh-agent's errors (its in-process children, transcripts
    /// and tool calls): importable, matchable, and what `code()` returns as text.
    /// The text of a code never changes; the table of every code is in
    /// `docs/errors.md`.
    pub enum ErrorCode {
        /// `TOOL_NOT_AVAILABLE`: the model called a tool this agent may not use.
        ToolNotAvailable => "TOOL_NOT_AVAILABLE",
        /// `TRANSCRIPT_REPAIR_FAILED`: a child's transcript could not be repaired before resuming it.
        TranscriptRepairFailed => "TRANSCRIPT_REPAIR_FAILED",
        /// `CHILD_SETUP_FAILED`: a child agent could not be set up.
        ChildSetupFailed => "CHILD_SETUP_FAILED",
        /// `NOT_IN_PROCESS`: the parent is not an in-process dsh agent.
        NotInProcess => "NOT_IN_PROCESS",
        /// `STORE_FAILED`: the child store could not be read.
        StoreFailed => "STORE_FAILED",
        /// `CONTEXT_WINDOW`: a run stopped because no request fitting its
        /// model's context window could be made (the `error.type` of its span).
        ContextWindow => "CONTEXT_WINDOW",
    }
}
