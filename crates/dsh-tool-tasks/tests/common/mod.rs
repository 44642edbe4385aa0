//! Shared fixtures for the task-tool suites.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use dsh_tasks::{TaskOutcome, TaskRegistry, TaskSpec};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use serde_json::Value;

/// A task registry, a tool registry and the three tools mounted over them.
pub struct Fixture {
    pub tasks: TaskRegistry,
    pub tools: ToolRegistry,
    pub plugin: Option<TaskToolsPlugin>,
}

impl Fixture {
    pub fn new() -> Self {
        let tasks = TaskRegistry::new();
        let tools = ToolRegistry::new();
        let plugin = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
        Self {
            tasks,
            tools,
            plugin: Some(plugin),
        }
    }

    /// Calls `tool` as agent `parent` with a fresh token.
    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.tools.call(tool, args, exec()).await
    }

    /// A task of `owner` that completes with `output`.
    pub fn completed(&self, owner: &str, label: &str, output: &str) -> String {
        let output = output.to_owned();
        self.tasks
            .spawn(TaskSpec::new("subagent", label, AgentId::from(owner)), |_| async move {
                TaskOutcome::Completed { output: output.into() }
            })
            .unwrap()
    }

    /// A task of `owner` that runs until killed, then settles `killed`.
    pub fn until_killed(&self, owner: &str, label: &str) -> String {
        self.tasks
            .spawn(
                TaskSpec::new("subagent", label, AgentId::from(owner)),
                |control| async move {
                    control.token().cancelled().await;
                    TaskOutcome::Killed
                },
            )
            .unwrap()
    }

    /// Waits until the task has settled.
    pub async fn settled(&self, id: &str, owner: &str) {
        self.tasks.wait(id, &AgentId::from(owner), None).await.unwrap();
    }
}

/// An execution context for agent `parent`.
pub fn exec() -> ToolExecution {
    exec_with(CancellationToken::new())
}

pub fn exec_with(cancel: CancellationToken) -> ToolExecution {
    dsh_subagent_testing::exec_with("parent", cancel)
}
