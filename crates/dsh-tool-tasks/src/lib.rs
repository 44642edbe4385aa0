//! The model-facing task tools over a [`dsh_tasks::TaskRegistry`].
//!
//! - `task_output {task_id, wait?, timeout_ms?}`: the caller's task as the
//!   body (or `(no new output)`), a newline and its status line. Reading does
//!   not consume anything. `wait: true` waits until the task settles, at most
//!   `timeout_ms` ([`DEFAULT_WAIT_MS`] by default, [`MAX_WAIT_MS`] at most),
//!   and stops waiting at once when the call is cancelled.
//! - `task_kill {task_id, reason?}`: `requested cancellation of task <id>`,
//!   or `task <id> had already finished <status line>`.
//! - `task_list {}`: one line per task of the caller, or `(no tasks)`.
//!
//! Every call needs a calling agent and acts only on that agent's tasks:
//! another agent's id and an unknown id are `Error: …` results, as are
//! malformed arguments (the message names the field). All model-facing text
//! lives in [`dsh_tasks::wording`].
//!
//! # Completion notices
//!
//! The registry queues a notice for the owner whenever a task settles. To
//! hand those to the owner's next model call, give the agent runtime a notice
//! source; with `dsh-agent`:
//!
//! ```
//! # use std::sync::Arc;
//! # use dsh_agent::AgentRuntime;
//! # use dsh_tasks::TaskRegistry;
//! # use dsh_tools::{AgentId, ToolRegistry};
//! # let model = Arc::new(dsh_llm::ScriptedModel::builtin());
//! let tasks = TaskRegistry::new();
//! let tools = ToolRegistry::new();
//! let _plugin = dsh_tool_tasks::TaskToolsPlugin::apply(&tasks, &tools).unwrap();
//! let notices = tasks.clone();
//! let runtime = AgentRuntime::new(model, tools)
//!     .with_notices(Arc::new(move |agent: &AgentId| notices.take_notices(agent)));
//! ```
//!
//! # Example
//!
//! ```
//! use dsh_tasks::{TaskOutcome, TaskRegistry, TaskSpec};
//! use dsh_tool_tasks::TaskToolsPlugin;
//! use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let tasks = TaskRegistry::new();
//! let tools = ToolRegistry::new();
//! let _plugin = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
//!
//! let parent = AgentRef::new("parent");
//! let id = tasks
//!     .spawn(TaskSpec::new("subagent", "answer", parent.id().clone()), |_| async {
//!         TaskOutcome::Completed { output: "background answer".into() }
//!     })
//!     .unwrap();
//! let exec = ToolExecution::new(CancellationToken::new()).with_agent(parent);
//! let read = tools.call("task_output", json!({"task_id": id, "wait": true}), exec.clone()).await;
//! assert_eq!(read.text, "background answer\n[status: completed]");
//! let listed = tools.call("task_list", json!({}), exec).await;
//! assert_eq!(listed.text, "subagent-1 [status: completed] (subagent: answer)");
//! # });
//! ```

#![forbid(unsafe_code)]

mod args;
mod plugin;
mod tools;

pub use args::{DEFAULT_WAIT_MS, MAX_WAIT_MS, task_kill_parameters, task_list_parameters, task_output_parameters};
pub use plugin::TaskToolsPlugin;

/// The names the plugin registers: `task_output`, `task_kill`, `task_list`.
pub const TOOL_NAMES: [&str; 3] = [
    dsh_tasks::wording::TASK_OUTPUT,
    dsh_tasks::wording::TASK_KILL,
    dsh_tasks::wording::TASK_LIST,
];

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
