//! The three tools: `task_output`, `task_kill`, `task_list`.

use dsh_tasks::{KillOutcome, TaskRegistry, wording};
use dsh_tools::{AgentId, Tool, ToolError, ToolExecution, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::args::{self, KillArgs, OutputArgs};

/// The calling agent's id, or the tool's "requires a calling agent" error.
fn caller(tool: &str, exec: &ToolExecution) -> Result<AgentId, ToolError> {
    exec.agent()
        .map(|agent| agent.id().clone())
        .ok_or_else(|| ToolError::new(wording::no_calling_agent(tool)).with_code(dsh_tools::ErrorCode::NoCallingAgent))
}

/// `task_output`: the caller's task, at once or after waiting.
pub(crate) struct TaskOutputTool {
    tasks: TaskRegistry,
    parameters: Value,
}

impl TaskOutputTool {
    pub(crate) fn new(tasks: TaskRegistry) -> Self {
        Self {
            tasks,
            parameters: args::task_output_parameters(),
        }
    }

    async fn read(&self, args: Value, exec: ToolExecution) -> Result<ToolOutput, ToolError> {
        let args = OutputArgs::parse(&args)?;
        let caller = caller(wording::TASK_OUTPUT, &exec)?;
        let task = match args.wait {
            None => self.tasks.get(&args.task_id, &caller),
            Some(limit) => {
                // Check the id first, so a bad id fails even when the call is cancelled.
                self.tasks.get(&args.task_id, &caller).map_err(ToolError::from)?;
                tokio::select! {
                    biased;
                    () = exec.cancel().cancelled() => self.tasks.get(&args.task_id, &caller),
                    task = self.tasks.wait(&args.task_id, &caller, Some(limit)) => task,
                }
            }
        }
        .map_err(ToolError::from)?;
        Ok(ToolOutput::text(wording::task_output(&task)))
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
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(self.read(args, exec))
    }
}

/// `task_kill`: requests cancellation of the caller's running task.
pub(crate) struct TaskKillTool {
    tasks: TaskRegistry,
    parameters: Value,
}

impl TaskKillTool {
    pub(crate) fn new(tasks: TaskRegistry) -> Self {
        Self {
            tasks,
            parameters: args::task_kill_parameters(),
        }
    }

    fn kill(&self, args: &Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        let args = KillArgs::parse(args)?;
        let caller = caller(wording::TASK_KILL, exec)?;
        let text = match self
            .tasks
            .kill(&args.task_id, &caller, args.reason)
            .map_err(ToolError::from)?
        {
            KillOutcome::Requested => wording::kill_requested(&args.task_id),
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
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.kill(&args, &exec)))
    }
}

/// `task_list`: the caller's tasks, oldest first.
pub(crate) struct TaskListTool {
    tasks: TaskRegistry,
    parameters: Value,
}

impl TaskListTool {
    pub(crate) fn new(tasks: TaskRegistry) -> Self {
        Self {
            tasks,
            parameters: args::task_list_parameters(),
        }
    }

    fn list(&self, args: &Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        args::parse_list(args)?;
        let caller = caller(wording::TASK_LIST, exec)?;
        Ok(ToolOutput::text(wording::task_list(&self.tasks.list(&caller))))
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
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.list(&args, &exec)))
    }
}
