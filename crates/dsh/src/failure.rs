//! Why a `dsh` command exits non-zero: one message for stderr and an exit
//! code, by kind of failure (bad input, a task that did not complete, an
//! interruption, a bug in dsh).

use crate::wording;

/// The exit code of a run stopped by SIGINT or SIGTERM (128 + SIGINT's 2),
/// as a shell reports a Ctrl-C.
pub(crate) const INTERRUPTED_EXIT: u8 = 130;

/// The exit code of a run that finished (its parent answered) but left
/// work to resume: background children stopped resumably.
pub(crate) const WORK_LEFT_EXIT: u8 = 3;

/// Why `dsh` exits non-zero: a message for stderr and an exit code.
pub(crate) struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// Bad input or configuration (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// The task did not complete (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }

    /// Interrupted by the user (exit 130); resumable.
    pub(crate) fn interrupted(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: INTERRUPTED_EXIT,
        }
    }

    /// The parent answered, and work it started was stopped resumably
    /// (exit 3).
    pub(crate) fn work_left(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: WORK_LEFT_EXIT,
        }
    }

    /// A bug in dsh itself (exit 70).
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self {
            message: wording::internal_error(&message.into()),
            code: 70,
        }
    }

    /// The message for stderr.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The process's exit code: 2, 1, 3, 130 or 70, by kind.
    pub(crate) fn code(&self) -> u8 {
        self.code
    }
}
