//! Stable error codes.

/// The stable codes of task registry errors: importable, matchable, and what
/// `code()` returns as text. The text of a code never changes; the table of
/// every code is in `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `UNKNOWN_TASK`: no task has the id.
    UnknownTask,
    /// `FOREIGN_TASK`: the task belongs to another agent (its text is
    /// `UNKNOWN_TASK`'s, so the caller learns nothing of it).
    ForeignTask,
    /// `FORGOTTEN_TASK`: the task finished and is no longer kept.
    ForgottenTask,
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
            Self::ForgottenTask => "FORGOTTEN_TASK",
            Self::InvalidLabel => "INVALID_LABEL",
            Self::OwnerDisposed => "OWNER_DISPOSED",
        }
    }
}

dsh_tools::error_code_text!(ErrorCode);
