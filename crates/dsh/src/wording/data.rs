//! What dsh says about its data directory: the `[data]` keys' errors and
//! the log lines of a sweep.

use std::fmt::Display;
use std::path::Path;

/// A `[data].max_age` that is not an age.
pub(crate) fn config_bad_age(text: &str) -> String {
    format!(
        "{text:?} is not an age: write a positive whole number and a unit, such as \"30d\", \"12h\" or \"90min\", or \"off\" to keep transcripts whatever their age"
    )
}

/// A `[data].max_size` that is not a size.
pub(crate) fn config_bad_size(text: &str) -> String {
    format!(
        "{text:?} is not a size: write a positive whole number and a unit, such as \"500MB\", \"2GiB\" or \"800KiB\", or \"off\" to bound no size"
    )
}

/// What `[data]`'s ages and sizes are written as.
pub(crate) const CONFIG_EXPECTING_BOUND: &str = r#"text such as "30d" or "1GiB", or "off""#;

/// A sweep removed transcripts past the `[data]` bounds.
pub(crate) fn data_swept(data_dir: &Path, files: usize, bytes: u64) -> String {
    let noun = if files == 1 { "transcript" } else { "transcripts" };
    format!(
        "removed {files} {noun} ({bytes} bytes) from {} past the [data] bounds",
        data_dir.join("agents").display()
    )
}

/// A sweep of the data directory failed; nothing else stops.
pub(crate) fn data_sweep_failed(data_dir: &Path, error: &dyn Display) -> String {
    format!(
        "could not sweep {} for the [data] bounds: {error}",
        data_dir.join("agents").display()
    )
}

/// The transcripts of an ended MCP session could not all be removed.
pub(crate) fn session_transcripts_not_removed(session: &dyn Display, error: &dyn Display) -> String {
    format!("could not remove the transcripts of ended MCP session {session}: {error}")
}
