//! Resuming a parent agent from its transcript (`--resume`, `session/load`).

use std::fmt::Display;

/// `--resume` (or `session/load`) without transcripts to read.
pub(crate) const RESUME_NEEDS_DATA_DIR: &str =
    "dsh: resuming needs the data directory the parent's transcript is in (--data-dir)";

/// `--resume` with an id that names no parent.
pub(crate) fn unknown_parent(id: &str, dir: &std::path::Path, parents: &[String]) -> String {
    let known = if parents.is_empty() {
        "none".to_owned()
    } else {
        parents.join(", ")
    };
    format!(
        "dsh: no parent agent {id:?} to resume in {} (parents that can be resumed: {known})",
        dir.display()
    )
}

/// What a resume repaired, on stderr.
pub(crate) fn resume_repaired(id: &str, repair: &str) -> String {
    format!("dsh: resuming {id}: {repair}")
}

/// A transcript whose torn tail or interrupted turn could not be repaired.
pub(crate) fn cannot_repair(path: &std::path::Path, error: &dyn Display) -> String {
    format!("dsh: cannot repair {}: {error}", path.display())
}

/// `--resume` without an id, when no run in the data directory was interrupted.
pub(crate) fn nothing_to_resume(dir: &std::path::Path) -> String {
    format!(
        "dsh: no interrupted run to resume in {} (give the parent's id: --resume <AGENT_ID>)",
        dir.display()
    )
}

/// The run `--resume` goes on with.
pub(crate) fn resuming(id: &str) -> String {
    format!("dsh: resuming {id} and its delegation tree")
}
