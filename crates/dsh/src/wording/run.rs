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

/// A run that stopped without finishing (an error, a turn limit).
pub(crate) fn run_unfinished(stop: &dyn Display) -> String {
    format!("dsh: the run did not finish: {stop}")
}

/// The task of `dsh run` could not be read (a missing file, a directory,
/// an input that failed).
pub(crate) fn task_unreadable(source: &dyn Display, error: &std::io::Error) -> String {
    format!("dsh: cannot read {source}: {error}")
}

/// The task of `dsh run` is not UTF-8 text.
pub(crate) fn task_not_utf8(source: &dyn Display, valid_up_to: usize) -> String {
    format!("dsh: {source} is not UTF-8 text (an invalid byte at offset {valid_up_to}); give the task as UTF-8")
}

/// The task of `dsh run` is empty, or only white space.
pub(crate) fn task_empty(source: &dyn Display) -> String {
    format!(
        "dsh: {source} is empty; give the task as an argument, `-` to read it from standard input, or --task-file FILE"
    )
}

/// The task of `dsh run` is over the most a task may hold.
pub(crate) fn task_too_large(source: &dyn Display, limit: usize) -> String {
    format!(
        "dsh: {source} is larger than {} MiB ({limit} bytes), the most a task may hold; give a shorter task",
        limit >> 20
    )
}

/// `dsh run` with neither a task nor `--resume`.
pub(crate) const TASK_MISSING: &str = "dsh: give the task as an argument, `-` to read it from standard input, or --task-file FILE (or --resume to go on with an earlier run)";

/// The first SIGINT or SIGTERM: the tree is being stopped resumably.
pub(crate) const STOPPING: &str =
    "dsh: stopping the run resumably (its children too); press Ctrl-C again to exit at once";

/// The second SIGINT or SIGTERM: `dsh` exits without waiting.
pub(crate) const STOPPED_AT_ONCE: &str =
    "dsh: exiting at once; what was written stays, and `dsh run --resume` goes on from it";

/// The one command that goes on with a run.
pub(crate) fn resume_command(data_dir: &Path, parent: &dyn Display) -> String {
    if data_dir == Path::new(".dsh") {
        format!("dsh run --resume {parent}")
    } else {
        format!("dsh run --data-dir {} --resume {parent}", data_dir.display())
    }
}

/// A background child still running when the run ended, stopped resumably.
pub(crate) fn left_running(task: &dyn Display) -> String {
    format!("dsh: stopped, to resume: {task}")
}

/// The run finished with background children stopped resumably.
pub(crate) fn work_left(count: usize, resume: &str) -> String {
    let stopped = if count == 1 {
        "1 background child was stopped before it finished".to_owned()
    } else {
        format!("{count} background children were stopped before they finished")
    };
    format!("dsh: the parent answered, and {stopped}; go on with: {resume}")
}

/// A run stopped by a signal: how to go on.
pub(crate) fn interrupted(resume: &str) -> String {
    format!("dsh: interrupted; go on with: {resume}")
}

/// A background task as a line names it: its id and its label.
pub(crate) fn task_named(id: &str, label: &str) -> String {
    format!("{id} {label:?}")
}

/// The last line of a `dsh run` whose every delegation failed: how many,
/// and the first few distinct reasons, each with how many children it
/// stopped.
pub(crate) fn delegations_failed(failed: usize, started: usize, reasons: &[(String, usize)]) -> String {
    let noun = if started == 1 { "delegation" } else { "delegations" };
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(reason, count)| match count {
            1 => reason.clone(),
            count => format!("{count} × {reason}"),
        })
        .collect();
    format!("dsh: {failed} of {started} {noun} failed: {}", reasons.join("; "))
}

/// One delegation's failure as that line names it: its stop reason, and
/// the first line of its diagnostic, cut to a readable length.
pub(crate) fn delegation_failure(stop: &dyn Display, diagnostic: Option<&str>) -> String {
    const LIMIT: usize = 200;
    let Some(diagnostic) = diagnostic.and_then(|text| text.lines().next()) else {
        return stop.to_string();
    };
    let mut diagnostic = diagnostic.trim().to_owned();
    if diagnostic.chars().count() > LIMIT {
        diagnostic = diagnostic.chars().take(LIMIT).collect::<String>() + "…";
    }
    format!("{stop} ({diagnostic})")
}
