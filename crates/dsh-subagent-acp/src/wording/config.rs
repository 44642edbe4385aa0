//! Configuration errors [`AcpConfig::validate`](crate::AcpConfig::validate) reports.

use std::path::Path;

/// An empty `command`.
pub(crate) const COMMAND_EMPTY: &str = "subagent-acp: config command must not be empty";

/// An empty `cwd`.
pub(crate) const CWD_EMPTY: &str =
    "subagent-acp: config cwd must not be empty — omit the key to inherit the parent's working directory";

/// A `cwd` that is not a directory we can use.
pub(crate) fn cwd_not_a_directory(cwd: &Path) -> String {
    format!(
        "subagent-acp: config cwd is not an accessible directory: {}",
        cwd.display()
    )
}

/// An `env` name no environment can hold.
pub(crate) fn env_name_impossible(key: &str) -> String {
    format!("subagent-acp: config env names a variable that cannot exist: {key:?}")
}

/// `AcpAuth::Method` with a blank id.
pub(crate) const AUTH_METHOD_EMPTY: &str = "subagent-acp: config auth method id must not be empty";

/// The one refusal of a byte bound (`ByteLimit`), however it was written.
pub(crate) fn byte_limit_refused(written: &dyn std::fmt::Display) -> String {
    format!("subagent-acp: a byte limit must be a whole number of bytes, at least 1; got {written}")
}

/// A bound or timeout of zero (`key` is the config key).
pub(crate) fn must_be_positive(key: &str) -> String {
    format!("subagent-acp: config {key} must be greater than zero")
}
