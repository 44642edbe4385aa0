//! Stable error codes.

/// The stable codes of the ACP provider's errors: importable, matchable, and
/// what `code()` returns as text. The text of a code never changes; the table
/// of every code is in `docs/errors.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `INVALID_CONFIG`: the provider's configuration is invalid.
    InvalidConfig,
    /// `ACP_NO_CWD`: no working directory for the child.
    NoCwd,
    /// `ACP_SPAWN_FAILED`: the child process could not be spawned.
    SpawnFailed,
    /// `ACP_START_FAILED`: the child process did not start an ACP session.
    StartFailed,
    /// `ACP_TEARDOWN_FAILED`: the child process could not be torn down.
    TeardownFailed,
}

impl ErrorCode {
    /// The code as text, e.g. `INVALID_CONFIG`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidConfig => "INVALID_CONFIG",
            Self::NoCwd => "ACP_NO_CWD",
            Self::SpawnFailed => "ACP_SPAWN_FAILED",
            Self::StartFailed => "ACP_START_FAILED",
            Self::TeardownFailed => "ACP_TEARDOWN_FAILED",
        }
    }
}

dsh_subagent_api::error_code_text!(ErrorCode);
