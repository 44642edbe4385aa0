//! Stable error codes.

/// The stable codes of task registry errors: importable, matchable, and what
/// `code()` returns as text. The text of a code never changes; the table of
/// every code is in `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `UNKNOWN_TASK`: no task has the id.
    UnknownTask,
    /// `FOREIGN_TASK`: the task belongs to another agent.
    ForeignTask,
    /// `INVALID_LABEL`: the task's label is empty.
    InvalidLabel,
    /// `OWNER_DISPOSED`: the owning agent was disposed.
    OwnerDisposed,
}

impl ErrorCode {
    /// The code as text, e.g. `UNKNOWN_TASK`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTask => "UNKNOWN_TASK",
            Self::ForeignTask => "FOREIGN_TASK",
            Self::InvalidLabel => "INVALID_LABEL",
            Self::OwnerDisposed => "OWNER_DISPOSED",
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
