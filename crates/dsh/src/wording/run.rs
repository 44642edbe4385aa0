//! `dsh run`: the run's own lines besides progress and usage.

use std::fmt::Display;
use std::path::Path;

/// The label of the parent agent of `dsh run`, in its transcript.
pub(crate) const RUN_LABEL: &str = "dsh run";

/// Why the background tasks still running when `dsh run` ends are killed.
pub(crate) const RUN_FINISHED: &str = "dsh run finished";

/// Where the run's transcripts are: the parent's id, then its children's.
pub(crate) fn transcripts_line(dir: &Path, parent: &dyn Display, children: &[impl Display]) -> String {
    let mut line = format!("dsh: transcripts in {}: {parent} (parent)", dir.display());
    for child in children {
        line.push_str(&format!(", {child}"));
    }
    line.push_str("; read one with `dsh transcript <id>`");
    line
}

/// A run the user cancelled.
pub(crate) const CANCELLED: &str = "dsh: cancelled";

/// A run that stopped without finishing (an error, a turn limit).
pub(crate) fn run_unfinished(stop: &dyn Display) -> String {
    format!("dsh: the run did not finish: {stop}")
}
