//! Every model-facing string of the task surface, in one place.
//!
//! The task tools (`task_output`, `task_kill`, `task_list`) and the
//! completion notice render through these functions only; snapshot tests pin
//! them (reference-contract §1.10, task vocabulary).

use crate::{TaskSnapshot, TaskStatus};

/// A status line: `[status: <status>]` or `[status: <status>, <detail>]`.
pub fn status_line(status: TaskStatus, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("[status: {status}, {detail}]"),
        None => format!("[status: {status}]"),
    }
}

/// The body shown when a task has no output.
pub const NO_NEW_OUTPUT: &str = "(no new output)";

/// What `task_output` shows: the body, a newline, the status line.
pub fn task_output(task: &TaskSnapshot) -> String {
    let body = if task.output.is_empty() {
        NO_NEW_OUTPUT
    } else {
        &task.output
    };
    format!("{body}\n{}", task.status_line())
}

/// `task_kill` on a running task.
pub fn kill_requested(id: &str) -> String {
    format!("requested cancellation of task {id}")
}

/// `task_kill` on a finished task.
pub fn already_finished(task: &TaskSnapshot) -> String {
    format!("task {} had already finished {}", task.id, task.status_line())
}

/// The notice an owner receives when one of its tasks finishes.
pub fn completion_notice(task: &TaskSnapshot) -> String {
    format!(
        "background task {} ({}: {}) finished {}. Read its output with task_output.",
        task.id,
        task.kind,
        task.label,
        task.status_line()
    )
}

/// One `task_list` line.
pub fn list_line(task: &TaskSnapshot) -> String {
    format!("{} {} ({}: {})", task.id, task.status_line(), task.kind, task.label)
}

/// `task_list` with no tasks.
pub const NO_TASKS: &str = "(no tasks)";

/// An id that names no task.
pub fn unknown_task(id: &str) -> String {
    format!("no task with id \"{id}\"; task_list shows your tasks")
}

/// An id that names another agent's task.
pub fn foreign_task(id: &str) -> String {
    format!("task \"{id}\" belongs to another agent")
}

/// A task registered with an empty label.
pub const EMPTY_LABEL: &str = "invalid task label: expected a non-empty string";

/// A task registered after the owner was disposed.
pub fn owner_disposed(owner: &str) -> String {
    format!("agent \"{owner}\" was disposed; no new background task can start for it")
}

/// The detail of a task whose producer panicked.
pub fn producer_panicked(message: &str) -> String {
    format!("task stopped unexpectedly: {message}")
}
