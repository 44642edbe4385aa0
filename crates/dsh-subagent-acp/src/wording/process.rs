//! The child's process group: teardown failures and the log lines about it.
//! (How a child exited, and a spawn whose pipes did not come back, are
//! worded by `dsh-process`.)

use std::fmt::Display;
use std::time::Duration;

/// A write after the child's stdin was closed.
pub(crate) const STDIN_CLOSED: &str = "the ACP child's stdin is closed";

/// What the SDK's reader gets when a guard caught a fault (the fault itself
/// is kept for the diagnostic).
pub(crate) const PROTOCOL_FAULT: &str = "ACP protocol fault";

/// A signal to the group that the system refused.
pub(crate) fn cannot_signal(group: &dyn Display, error: &dyn Display) -> String {
    format!("cannot signal the ACP child's process group {group}: {error}")
}

/// A group that outlived SIGKILL and the wait after it.
pub(crate) fn survived_kill(group: &dyn Display, wait: Duration) -> String {
    format!(
        "the ACP child's process group {group} still had running members {} ms after SIGKILL",
        wait.as_millis()
    )
}

/// Log line: an immediate SIGKILL the system refused.
pub(crate) fn log_cannot_kill(group: &dyn Display, error: &dyn Display) -> String {
    format!("cannot SIGKILL the ACP child's process group {group}: {error}")
}

/// Log line: the child was released after a run.
pub(crate) const LOG_CHILD_RELEASED: &str = "ACP child released";
