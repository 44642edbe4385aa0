//! The three tools: `task_output`, `task_kill`, `task_list`.

use dsh_tasks::{KillOutcome, TaskRegistry, TaskSnapshot, wording};
use dsh_tools::budget::{self, PagedRead};
use dsh_tools::{AgentId, ResultLimit, Tool, ToolError, ToolExecution, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::args::{self, TaskKillArgs, TaskListArgs, TaskOutputArgs, Words};
use dsh_tools::Arguments;

/// The calling agent's id, or the tool's "requires a calling agent" error.
fn caller(tool: &str, exec: &ToolExecution) -> Result<AgentId, ToolError> {
    exec.agent()
        .map(|agent| agent.id().clone())
        .ok_or_else(|| ToolError::new(wording::no_calling_agent(tool)).with_code(dsh_tools::ErrorCode::NoCallingAgent))
}

/// `task_output`: the caller's task, at once or after waiting, within its
/// result budget.
pub(crate) struct TaskOutputTool {
    tasks: TaskRegistry,
    arguments: Arguments<TaskOutputArgs>,
    budget: ResultLimit,
}

impl TaskOutputTool {
    pub(crate) fn new(tasks: TaskRegistry, budget: ResultLimit) -> Self {
        Self {
            tasks,
            arguments: args::task_output_arguments(),
            budget,
        }
    }

    async fn read(&self, args: Value, exec: ToolExecution) -> Result<ToolOutput, ToolError> {
        let args = self.arguments.parse(args, &Words(wording::TASK_OUTPUT))?;
        let wait = args.wait()?;
        let task_id = args.task_id.trim();
        let caller = caller(wording::TASK_OUTPUT, &exec)?;
        let task = match wait {
            None => self.tasks.get(task_id, &caller),
            Some(limit) => {
                // Check the id first, so a bad id fails even when the call is cancelled.
                self.tasks.get(task_id, &caller).map_err(ToolError::from)?;
                tokio::select! {
                    biased;
                    () = exec.cancel().cancelled() => self.tasks.get(task_id, &caller),
                    task = self.tasks.wait(task_id, &caller, Some(limit)) => task,
                }
            }
        }
        .map_err(ToolError::from)?;
        self.render(&task, args.offset).await
    }

    /// The task as the model reads it: its text (or a page of it from
    /// `offset`) and its status line, within the budget. A text that fits
    /// reads as it always did; a longer one shows its head and tail, or the
    /// page, with the notice that gives the next offset. A text no longer
    /// kept says so, with its size and the status. The status line counts
    /// within the budget: it takes at most half of it, a longer detail cut
    /// to fit ([`wording::status_suffix_within`]).
    async fn render(&self, task: &TaskSnapshot, offset: Option<u64>) -> Result<ToolOutput, ToolError> {
        let budget = self.budget.bytes();
        let suffix = wording::status_suffix_within(task, budget / 2);
        let Some(text) = task.output.read().await else {
            let body = wording::output_no_longer_kept(&task.id, task.output.size().chars);
            return Ok(ToolOutput::text(format!("{body}{suffix}")));
        };
        let allowance = budget.saturating_sub(suffix.len());
        let read = PagedRead::new(wording::TASK_OUTPUT, task.id.clone());
        let excerpt = match offset {
            None => budget::head_and_tail(&text, allowance, Some(read)),
            Some(offset) => {
                let page = budget::page(&text, offset, allowance, read).ok_or_else(|| {
                    let chars = task.output.size().chars;
                    ToolError::invalid_arguments(wording::offset_past_end(&task.id, offset, chars))
                })?;
                // A page that holds all the text from the start is the text.
                let whole = offset == 0 && page.cut.shown.size() == page.cut.full;
                let empty = page.cut.shown.size().chars == 0;
                (!whole && !empty).then_some(page)
            }
        };
        Ok(match excerpt {
            Some(excerpt) => ToolOutput::excerpt(excerpt.followed_by(&suffix)),
            None if offset.is_some_and(|offset| offset > 0) => {
                ToolOutput::text(wording::task_output_followed_by("", &suffix))
            }
            None => ToolOutput::text(wording::task_output_followed_by(&text, &suffix)),
        })
    }
}

impl Tool for TaskOutputTool {
    fn name(&self) -> &str {
        wording::TASK_OUTPUT
    }

    fn description(&self) -> &str {
        wording::TASK_OUTPUT_DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        self.arguments.parameters()
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(self.read(args, exec))
    }
}

/// `task_kill`: requests cancellation of the caller's running task.
pub(crate) struct TaskKillTool {
    tasks: TaskRegistry,
    arguments: Arguments<TaskKillArgs>,
}

impl TaskKillTool {
    pub(crate) fn new(tasks: TaskRegistry) -> Self {
        Self {
            tasks,
            arguments: args::task_kill_arguments(),
        }
    }

    fn kill(&self, args: Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        let args = self.arguments.parse(args, &Words(wording::TASK_KILL))?;
        let task_id = args.task_id.trim();
        let reason = args.reason.filter(|reason| !reason.trim().is_empty());
        let caller = caller(wording::TASK_KILL, exec)?;
        let text = match self.tasks.kill(task_id, &caller, reason).map_err(ToolError::from)? {
            KillOutcome::Requested => wording::kill_requested(task_id),
            KillOutcome::AlreadyFinished(task) => wording::already_finished(&task),
        };
        Ok(ToolOutput::text(text))
    }
}

impl Tool for TaskKillTool {
    fn name(&self) -> &str {
        wording::TASK_KILL
    }

    fn description(&self) -> &str {
        wording::TASK_KILL_DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        self.arguments.parameters()
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.kill(args, &exec)))
    }
}

/// `task_list`: the caller's running tasks and its most recently finished
/// ones, oldest first, then a count of the older finished ones left out.
pub(crate) struct TaskListTool {
    tasks: TaskRegistry,
    arguments: Arguments<TaskListArgs>,
}

impl TaskListTool {
    pub(crate) fn new(tasks: TaskRegistry) -> Self {
        Self {
            tasks,
            arguments: Arguments::new(),
        }
    }

    fn list(&self, args: Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        let TaskListArgs {} = self.arguments.parse(args, &Words(wording::TASK_LIST))?;
        let caller = caller(wording::TASK_LIST, exec)?;
        Ok(ToolOutput::text(wording::task_list(
            &self.tasks.listing(&caller, crate::LISTED_FINISHED),
        )))
    }
}

impl Tool for TaskListTool {
    fn name(&self) -> &str {
        wording::TASK_LIST
    }

    fn description(&self) -> &str {
        wording::TASK_LIST_DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        self.arguments.parameters()
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.list(args, &exec)))
    }
}
