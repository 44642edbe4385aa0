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
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<ErrorCode> for std::borrow::Cow<'static, str> {
    fn from(code: ErrorCode) -> Self {
        std::borrow::Cow::Borrowed(code.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for str {
    fn eq(&self, other: &ErrorCode) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ErrorCode> for &str {
    fn eq(&self, other: &ErrorCode) -> bool {
        *self == other.as_str()
    }
}
