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

/// A parent whose transcript cannot be read (corrupt mid-file, of a newer
/// version): nothing is changed.
pub(crate) fn cannot_resume(id: &str, error: &dyn Display) -> String {
    format!("dsh: cannot resume {id}: {error}; nothing was changed")
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

/// What became of a child of a resumed agent, on stderr; nothing for a
/// foreground child (its call goes on, and its start shows then) or one
/// whose task was kept already.
pub(crate) fn child_recovered(agent: &str, child: &dsh_subagent::RecoveredChild) -> Option<String> {
    let task = child.task_id.as_deref().unwrap_or("no task");
    let fate = match &child.fate {
        dsh_subagent::Fate::Delivered => "finished before the interruption: its result is delivered".to_owned(),
        dsh_subagent::Fate::Resumed => "resumed from its last completed step".to_owned(),
        dsh_subagent::Fate::Disconnected { why } => format!("disconnected: {why}"),
        _ => return None,
    };
    Some(format!("↳ {} ({task}) of {agent}: {fate}", child.child_id))
}

/// A resumed agent whose background children could not be read.
pub(crate) fn recovery_failed(error: &dyn Display) -> String {
    format!("dsh: the background children of a resumed agent could not be restored: {error}")
}

/// A resume whose interrupted turn has calls of tools the configuration no
/// longer offers: refused before any request is sent.
pub(crate) fn pending_tool_gone(transcript: &std::path::Path, missing: &[&str], offered: &[String]) -> String {
    let missing: Vec<String> = missing.iter().map(|tool| format!("{tool:?}")).collect();
    let offered = match offered.is_empty() {
        true => "none".to_owned(),
        false => offered.join(", "),
    };
    format!(
        "dsh: cannot resume: the interrupted turn in {} has calls of {} waiting to run again, and this configuration no longer offers that tool (tools offered now: {offered}); restore it in dsh.toml (or the MCP server that gave it), then resume",
        transcript.display(),
        missing.join(", ")
    )
}
