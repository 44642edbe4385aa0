//! Every model-facing string of the task surface, in one place.
//!
//! The task tools (`task_output`, `task_kill`, `task_list`) and the
//! completion notice render through these functions only; snapshot tests pin
//! them (docs/contract.md, "Background tasks").

use crate::{TaskListing, TaskSnapshot, TaskStatus};

// The snapshot's own status line is a text of this module's, so it lives here.
impl TaskSnapshot {
    /// `[status: <status>]` or `[status: <status>, <detail>]`.
    pub fn status_line(&self) -> String {
        status_line(self.status, self.detail.as_deref())
    }
}

/// A status line: `[status: <status>]` or `[status: <status>, <detail>]`.
pub fn status_line(status: TaskStatus, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("[status: {status}, {detail}]"),
        None => format!("[status: {status}]"),
    }
}

/// The body shown when a task has no output.
pub const NO_NEW_OUTPUT: &str = "(no new output)";

/// What `task_output` shows: the body (the task's `text` as read, or
/// [`NO_NEW_OUTPUT`] when it has none), a newline, the status line.
pub fn task_output(text: &str, task: &TaskSnapshot) -> String {
    task_output_followed_by(text, &status_suffix(task))
}

/// The body of `task_output` (the task's `text` as read, or
/// [`NO_NEW_OUTPUT`] when it has none), then `suffix`: the status line as
/// [`status_suffix`] or [`status_suffix_within`] gives it.
pub fn task_output_followed_by(text: &str, suffix: &str) -> String {
    let body = if text.is_empty() { NO_NEW_OUTPUT } else { text };
    format!("{body}{suffix}")
}

/// What follows the body of `task_output`: a newline and the status line.
pub fn status_suffix(task: &TaskSnapshot) -> String {
    format!("\n{}", task.status_line())
}

/// [`status_suffix`] in at most `bytes` bytes, when its detail can be cut
/// to fit: a longer detail (a failed run's diagnostic, up to 4 KB) keeps
/// its start, then [`detail_cut`] says how many characters were left out.
/// A status line without a detail is never cut.
pub fn status_suffix_within(task: &TaskSnapshot, bytes: usize) -> String {
    let whole = status_suffix(task);
    let Some(detail) = task.detail.as_deref() else {
        return whole;
    };
    if whole.len() <= bytes {
        return whole;
    }
    let total = detail.chars().count();
    // Room for the detail's start beside everything else, the count of what
    // is left out taken at its longest (every character).
    let frame = whole.len() - detail.len() + detail_cut(total).len();
    let mut end = bytes.saturating_sub(frame).min(detail.len());
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    let kept = &detail[..end];
    let cut = format!("{kept}{}", detail_cut(total - kept.chars().count()));
    format!("\n{}", status_line(task.status, Some(&cut)))
}

/// The most characters of a status line's detail that a `task_list` line,
/// a completion notice and `task_kill` show: they stand outside any result
/// budget, so
/// a failed run's diagnostic (up to 4 KB) shows there as its first line,
/// cut at this length, and `task_output` shows the rest within its budget.
/// A recorded failure's headline ([`recorded_failure_detail`], at most
/// [`RECORDED_DETAIL_CHARS`] and its `…`) stays whole.
pub const BRIEF_DETAIL_CHARS: usize = 240;

/// The task's status line with its detail cut to its first line and at
/// most [`BRIEF_DETAIL_CHARS`] characters, then [`detail_cut`] counting
/// what was left out: how a `task_list` line, a completion notice and
/// `task_kill` on a finished task show it.
pub fn brief_status_line(task: &TaskSnapshot) -> String {
    let Some(detail) = task.detail.as_deref() else {
        return task.status_line();
    };
    let line = detail.lines().next().unwrap_or_default();
    let end = line
        .char_indices()
        .nth(BRIEF_DETAIL_CHARS)
        .map_or(line.len(), |(end, _)| end);
    if end == detail.len() {
        return task.status_line();
    }
    let kept = &detail[..end];
    let omitted = detail.chars().count() - kept.chars().count();
    status_line(task.status, Some(&format!("{kept}{}", detail_cut(omitted))))
}

/// What ends a status line's detail cut to fit `task_output`'s budget.
pub fn detail_cut(omitted: usize) -> String {
    format!("… ({omitted} more characters not shown)")
}

/// The body `task_output` shows for a task whose output is no longer kept
/// (evicted to make room for newer ones, or gone from where it was read):
/// how large it was, and that reading it never runs anything again.
pub fn output_no_longer_kept(id: &str, chars: u64) -> String {
    format!(
        "(the output of task {id}, {chars} characters, is no longer kept. Reading it does not run the task again; its status follows.)"
    )
}

/// `task_output` with an `offset` past the end of the task's output.
pub fn offset_past_end(id: &str, offset: u64, chars: u64) -> String {
    format!(
        "{TASK_OUTPUT} argument \"offset\" is past the end of task {id}'s output: it has {chars} characters, so an offset is at most {chars}; got {offset}"
    )
}

/// `task_kill` on a running task.
pub fn kill_requested(id: &str) -> String {
    format!("requested cancellation of task {id}")
}

/// `task_kill` on a finished task, its status line brief
/// ([`brief_status_line`]).
pub fn already_finished(task: &TaskSnapshot) -> String {
    format!("task {} had already finished {}", task.id, brief_status_line(task))
}

/// The notice an owner receives when one of its tasks finishes, its status
/// line brief ([`brief_status_line`]).
pub fn completion_notice(task: &TaskSnapshot) -> String {
    format!(
        "background task {} ({}: {}) finished {}. Read its output with task_output.",
        task.id,
        task.kind,
        task.label,
        brief_status_line(task)
    )
}

/// One `task_list` line, its status line brief ([`brief_status_line`]).
pub fn list_line(task: &TaskSnapshot) -> String {
    format!(
        "{} {} ({}: {})",
        task.id,
        brief_status_line(task),
        task.kind,
        task.label
    )
}

/// `task_list` with no tasks.
pub const NO_TASKS: &str = "(no tasks)";

/// An id that names no task of the caller's: none has it, or another
/// agent's does (the two read the same).
pub fn unknown_task(id: &str) -> String {
    format!("no task with id \"{id}\"; task_list shows your tasks")
}

/// An id that was issued, of a task that finished and is no longer kept.
pub fn forgotten_task(id: &str, kept: usize) -> String {
    let kept = match kept {
        1 => "its most recently finished task".to_owned(),
        _ => format!("its {kept} most recently finished tasks"),
    };
    format!(
        "task \"{id}\" has finished and is no longer kept: each agent keeps only {kept}; task_list shows your tasks"
    )
}

/// How a failed result kept for paged reads (a delegation's, an MCP
/// tool's) shows in its task's status line: the first line of its error
/// (the headline), at most [`RECORDED_DETAIL_CHARS`] characters, ending in
/// `…` when cut.
pub fn recorded_failure_detail(message: &str) -> String {
    let headline = message.lines().next().unwrap_or_default();
    match headline.char_indices().nth(RECORDED_DETAIL_CHARS) {
        None => headline.to_owned(),
        Some((end, _)) => format!("{}…", &headline[..end]),
    }
}

/// The most characters of a headline [`recorded_failure_detail`] keeps.
pub const RECORDED_DETAIL_CHARS: usize = 200;

/// The kind of the task that keeps an MCP tool's result cut to its budget
/// (ids `mcp-<n>`).
pub const MCP_RESULT_KIND: &str = "mcp";

/// A task registered with an empty label.
pub const EMPTY_LABEL: &str = "invalid task label: expected a non-empty string";

/// A task given an id that a task of its owner already has.
pub fn id_taken(id: &str) -> String {
    format!("task id \"{id}\" is taken: a task of the same owner already has it")
}

/// A text that is not a task id.
pub fn invalid_id(id: &str) -> String {
    format!(
        "invalid task id \"{id}\": expected <kind>-<n>, a kind, a dash and a whole number from 1 without leading zeros (as in subagent-1)"
    )
}

/// A task registered after the owner was disposed.
pub fn owner_disposed(owner: &str) -> String {
    format!("agent \"{owner}\" was disposed; no new background task can start for it")
}

/// The detail of a task whose producer panicked.
pub fn producer_panicked(message: &str) -> String {
    format!("task stopped unexpectedly: {message}")
}

/// Logged when an owner's disposal kills one of its running tasks.
pub(crate) const KILLED_ON_OWNER_DISPOSAL: &str = "killed on owner disposal";

// ---- the task tools (`dsh-tool-tasks`) ---------------------------------------

/// The name of the tool that reads a task.
pub const TASK_OUTPUT: &str = "task_output";

/// The name of the tool that kills a task.
pub const TASK_KILL: &str = "task_kill";

/// The name of the tool that lists tasks.
pub const TASK_LIST: &str = "task_list";

/// `task_output`'s description.
pub const TASK_OUTPUT_DESCRIPTION: &str = "Read the output and status of one of your background tasks (such as a subagent started in the background). Returns the task's output, or (no new output) while it has none, then a status line: [status: running], [status: completed], [status: failed, <detail>] or [status: killed]. Reading does not consume anything: reading again returns the same. By default it answers at once; pass wait: true only when you have nothing else to do until the task finishes. You are told in the conversation when a task finishes, so there is no need to poll.";

/// `task_kill`'s description.
pub const TASK_KILL_DESCRIPTION: &str = "Stop one of your background tasks that is still running, such as a subagent whose result you no longer need. Cancellation is requested at once and the task then finishes as killed; read its final status with task_output. Killing a task that has already finished changes nothing and reports how it finished.";

/// `task_list`'s description.
pub const TASK_LIST_DESCRIPTION: &str = "List your background tasks, oldest first: one line per task with its id, its status line and what it is. Use it to find a task id you no longer have or to see which tasks are still running; read a task's output with task_output.";

/// The `task_id` parameter (both `task_output` and `task_kill`).
pub const TASK_ID_PARAMETER: &str =
    "The id of the task, as given when it started (for example subagent-1); task_list shows your tasks.";

/// `task_output`'s `wait` parameter.
pub const WAIT_PARAMETER: &str = "Wait until the task finishes (or timeout_ms passes) before answering. Default false: answer at once with the task as it is now.";

/// `task_output`'s `timeout_ms` parameter.
pub const TIMEOUT_MS_PARAMETER: &str = "Only with wait: true. The longest to wait, in milliseconds: default 30000 (30 seconds), at most 600000 (10 minutes). When it passes, the task is shown as it is, still running.";

/// `task_output`'s `offset` parameter.
pub const OFFSET_PARAMETER: &str = "Read one page of the task's output, starting at this character. Without it, an output too long to show whole shows its beginning and end, and a notice gives the offset to read the rest from.";

/// `task_kill`'s `reason` parameter.
pub const REASON_PARAMETER: &str = "Why the task is being stopped (optional); the task's producer receives it.";

/// A task tool called without a calling agent.
pub fn no_calling_agent(tool: &str) -> String {
    format!("{tool} requires a calling agent (exec.agent was undefined)")
}

/// A task tool's arguments are not a JSON object.
pub fn arguments_not_object(tool: &str, kind: &str) -> String {
    format!("{tool} arguments must be a JSON object, got {kind}")
}

/// A required argument is missing.
pub fn argument_missing(tool: &str, field: &str) -> String {
    format!("{tool} argument \"{field}\" is required")
}

/// An argument has the wrong JSON type.
pub fn argument_wrong_type(tool: &str, field: &str, expected: &str, kind: &str) -> String {
    format!("{tool} argument \"{field}\" must be {expected}, got {kind}")
}

/// A text argument is empty or only white space.
pub fn argument_empty(tool: &str, field: &str) -> String {
    format!("{tool} argument \"{field}\" must not be empty")
}

/// `timeout_ms` above the maximum.
pub fn timeout_too_long(tool: &str, max_ms: u64, got: u64) -> String {
    format!("{tool} argument \"timeout_ms\" must be at most {max_ms} (milliseconds), got {got}")
}

/// `timeout_ms` without `wait: true`.
pub fn timeout_without_wait(tool: &str) -> String {
    format!(
        "{tool} argument \"timeout_ms\" only applies with \"wait\": true; add \"wait\": true or drop \"timeout_ms\""
    )
}

/// The last `task_list` line when older finished tasks are left out.
pub fn older_finished_line(count: usize) -> String {
    match count {
        1 => "(1 older finished task not shown; task_output reads it by its id)".to_owned(),
        _ => format!("({count} older finished tasks not shown; task_output reads any of them by id)"),
    }
}

/// `task_list` output: one line per task shown, then
/// [`older_finished_line`] when some are left out; or [`NO_TASKS`].
pub fn task_list(listing: &TaskListing) -> String {
    if listing.tasks.is_empty() && listing.older_finished == 0 {
        return NO_TASKS.to_owned();
    }
    let mut lines: Vec<String> = listing.tasks.iter().map(list_line).collect();
    if listing.older_finished > 0 {
        lines.push(older_finished_line(listing.older_finished));
    }
    lines.join("\n")
}
