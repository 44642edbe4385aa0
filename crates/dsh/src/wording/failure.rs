//! How a `dsh` command fails: the one stderr line before the exit code.

use std::fmt::Display;

/// An error of the user's making (a flag, a file, the configuration), as stderr shows it.
pub(crate) fn failed(error: &dyn Display) -> String {
    format!("dsh: {error}")
}

/// A bug in dsh itself.
pub(crate) fn internal_error(message: &str) -> String {
    format!("dsh: internal error: {message}")
}

/// The tokio runtime could not be built.
pub(crate) fn runtime_failed(error: &dyn Display) -> String {
    format!("cannot start the async runtime: {error}")
}

/// `dsh acp` stopped by Ctrl-C.
pub(crate) const INTERRUPTED: &str = "dsh: interrupted";
