//! Stable error codes.

dsh_subagent_api::error_codes! {
    /// The stable codes of the ACP provider's errors: importable, matchable, and
    /// what `code()` returns as text. The text of a code never changes; the table
    /// of every code is in `docs/errors.md`.
    pub enum ErrorCode {
        /// `INVALID_CONFIG`: the provider's configuration is invalid.
        InvalidConfig => "INVALID_CONFIG",
        /// `ACP_NO_CWD`: no working directory for the child.
        NoCwd => "ACP_NO_CWD",
        /// `ACP_SPAWN_FAILED`: the child process could not be spawned.
        SpawnFailed => "ACP_SPAWN_FAILED",
        /// `ACP_START_FAILED`: the child process did not start an ACP session.
        StartFailed => "ACP_START_FAILED",
        /// `ACP_TEARDOWN_FAILED`: the child process could not be torn down.
        TeardownFailed => "ACP_TEARDOWN_FAILED",
    }
}
