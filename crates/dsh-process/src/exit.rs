//! How a child's direct process ended.

use std::fmt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

use crate::wording;

/// How the direct child ended; its `Display` is the text diagnostics quote
/// (`exit code 3`, `killed by signal SIGKILL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitInfo(ExitStatus);

impl ExitInfo {
    /// The status the system reported.
    pub fn status(&self) -> ExitStatus {
        self.0
    }
}

impl From<ExitStatus> for ExitInfo {
    fn from(status: ExitStatus) -> Self {
        Self(status)
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        match (self.0.code(), self.0.signal()) {
            (Some(code), _) => f.write_str(&wording::exit_code(code)),
            (None, Some(signal)) => match Signal::try_from(signal) {
                Ok(signal) => f.write_str(&wording::killed_by_signal(&signal)),
                Err(_) => f.write_str(&wording::killed_by_signal(&signal)),
            },
            (None, None) => f.write_str(wording::UNKNOWN_EXIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exits_read_as_a_code_or_a_signal() {
        let text = |raw| ExitInfo::from(ExitStatus::from_raw(raw)).to_string();
        assert_eq!(text(3 << 8), "exit code 3");
        assert_eq!(text(9), "killed by signal SIGKILL");
        assert_eq!(text(100), "killed by signal 100");
    }
}
