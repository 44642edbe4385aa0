//! Why a `dsh` command exits non-zero: one message for stderr and an exit
//! code, by kind of failure (bad input, a task that did not complete, an
//! interruption, a bug in dsh).

use crate::wording;

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

    /// Interrupted by the user (exit 130).
    pub(crate) fn interrupted(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 130,
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

    /// The process's exit code: 2, 1, 130 or 70, by kind.
    pub(crate) fn code(&self) -> u8 {
        self.code
    }
}
