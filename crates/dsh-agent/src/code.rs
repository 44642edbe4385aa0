//! Stable error codes.

/// The stable codes of dsh-agent's errors (its in-process children, transcripts
/// and tool calls): importable, matchable, and what `code()` returns as text.
/// The text of a code never changes; the table of every code is in
/// `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `TOOL_NOT_AVAILABLE`: the model called a tool this agent may not use.
    ToolNotAvailable,
    /// `TRANSCRIPT_REPAIR_FAILED`: a child's transcript could not be repaired before resuming it.
    TranscriptRepairFailed,
    /// `CHILD_SETUP_FAILED`: a child agent could not be set up.
    ChildSetupFailed,
    /// `NOT_IN_PROCESS`: the parent is not an in-process dsh agent.
    NotInProcess,
    /// `STORE_FAILED`: the child store could not be read.
    StoreFailed,
    /// `CONTEXT_WINDOW`: a run stopped because no request fitting its
    /// model's context window could be made (the `error.type` of its span).
    ContextWindow,
}

impl ErrorCode {
    /// The code as text, e.g. `TOOL_NOT_AVAILABLE`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ToolNotAvailable => "TOOL_NOT_AVAILABLE",
            Self::TranscriptRepairFailed => "TRANSCRIPT_REPAIR_FAILED",
            Self::ChildSetupFailed => "CHILD_SETUP_FAILED",
            Self::NotInProcess => "NOT_IN_PROCESS",
            Self::StoreFailed => "STORE_FAILED",
            Self::ContextWindow => "CONTEXT_WINDOW",
        }
    }
}

dsh_subagent_api::error_code_text!(ErrorCode);
