//! Every text this crate shows a model or a person, in one place.
//!
//! The exit texts reach a model inside its callers' diagnostics and errors
//! (`exit code 3` in "it exited with exit code 3"); the others are errors
//! and log lines. A caller that names its child its own way ("the ACP
//! child", "the MCP server") maps [`TeardownError`](crate::TeardownError)'s
//! fields to its own text rather than showing these.

use std::fmt::Display;
use std::time::Duration;

/// The child exited with `code`.
pub fn exit_code(code: i32) -> String {
    format!("exit code {code}")
}

/// A signal ended the child (`signal` is its name, or its number when unnamed).
pub fn killed_by_signal(signal: &dyn Display) -> String {
    format!("killed by signal {signal}")
}

/// Neither an exit code nor a signal.
pub const UNKNOWN_EXIT: &str = "unknown exit status";

/// Piped stdio that did not come back from the spawn.
pub const PIPES_UNAVAILABLE: &str = "the child's pipes were not available";

/// A signal to the group that the system refused.
pub fn cannot_signal(group: &dyn Display, error: &dyn Display) -> String {
    format!("cannot signal the child's process group {group}: {error}")
}

/// A group that outlived SIGKILL and the wait after it.
pub fn survived_kill(group: &dyn Display, wait: Duration) -> String {
    format!(
        "the child's process group {group} still had running members {} ms after SIGKILL",
        wait.as_millis()
    )
}

/// Log line: waiting for the child's exit status failed.
pub fn log_wait_failed(error: &dyn Display) -> String {
    format!("waiting for the child process failed: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_is_pinned() {
        let texts = [
            exit_code(3),
            killed_by_signal(&"SIGKILL"),
            UNKNOWN_EXIT.to_owned(),
            PIPES_UNAVAILABLE.to_owned(),
            cannot_signal(&4242, &"EPERM: Operation not permitted"),
            survived_kill(&4242, Duration::from_millis(1000)),
            log_wait_failed(&"No child processes (os error 10)"),
        ];
        insta::assert_snapshot!(texts.join("\n"));
    }
}
