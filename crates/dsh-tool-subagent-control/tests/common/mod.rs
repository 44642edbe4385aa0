//! A real continuable setup: the spawn provider over a scripted model, a
//! task registry with the task tools, `send_message`, and transcripts in a
//! temporary data directory that a "restart" can reopen.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use dsh_agent::JsonlChildStore;
use dsh_agent::{Agent, AgentRuntime};
use dsh_llm::ScriptedModel;
use dsh_subagent::{ProviderRegistration, SubagentControl, SubagentService};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest};
use dsh_subagent_spawn::SpawnProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent_control::SubagentControlPlugin;
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{ToolExecution, ToolRegistry};
use serde_json::{Value, json};

/// Children answer with what they were told and how many answers they gave before.
pub fn script() -> Value {
    json!({"rules": [
        {"when": {"system_contains": "You are a delegated subagent", "last_user_contains": "slow"},
         "reply": {"text": "slow answer", "stream_by": "char", "delay_ms": 200}},
        {"when": {"system_contains": "You are a delegated subagent"},
         "reply": {"text": "answer to {{last_user}} after {{assistant_turns}} earlier answers"}},
        {"when": {}, "reply": {"text": "parent"}}
    ]})
}

/// One process's worth of services over a data directory.
pub struct World {
    pub control: SubagentControl,
    pub tasks: TaskRegistry,
    pub tools: ToolRegistry,
    pub runtime: Arc<AgentRuntime>,
    _keep: (ProviderRegistration, SubagentControlPlugin, TaskToolsPlugin),
}

impl World {
    pub fn open(data_dir: &Path) -> Self {
        let service = SubagentService::new();
        let registration = service.register_provider(Arc::new(SpawnProvider::new())).unwrap();
        let tasks = TaskRegistry::new();
        let control = SubagentControl::new(service, tasks.clone(), Arc::new(JsonlChildStore::new(data_dir)));
        let tools = ToolRegistry::new();
        let send = SubagentControlPlugin::apply(&control, &tools).unwrap();
        let task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
        let model = ScriptedModel::from_json_str(&script().to_string()).unwrap();
        let runtime = Arc::new(AgentRuntime::new(Arc::new(model), tools.clone()).with_data_dir(data_dir));
        Self {
            control,
            tasks,
            tools,
            runtime,
            _keep: (registration, send, task_tools),
        }
    }

    /// The parent agent `id` (the same id across restarts).
    pub fn parent(&self, id: &str) -> Agent {
        Agent::builder(self.runtime.clone())
            .id(id)
            .system_prompt("You are the parent.")
            .build()
            .unwrap()
    }

    /// Starts a continuable spawn child of `parent`; returns (child id, task id).
    pub fn start(&self, parent: &Agent, prompt: &str) -> (String, String) {
        let mut request = StartRequest::text(prompt, parent.agent_ref(), CancellationToken::new());
        request.label = Some("research".into());
        let started = self
            .control
            .start_continuable("spawn", "research".into(), request)
            .unwrap();
        (started.child_id, started.task_id)
    }

    /// Calls a tool as `agent`.
    pub async fn call(&self, agent: &AgentRef, tool: &str, args: Value) -> dsh_tools::ToolResult {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(agent.clone());
        self.tools.call(tool, args, exec).await
    }

    /// `task_output` with `wait: true`.
    pub async fn output(&self, agent: &AgentRef, task_id: &str) -> String {
        self.call(agent, "task_output", json!({"task_id": task_id, "wait": true}))
            .await
            .text
    }

    pub async fn send(&self, agent: &AgentRef, child: &str, message: &str) -> dsh_tools::ToolResult {
        self.call(agent, "send_message", json!({"subagent_id": child, "message": message}))
            .await
    }
}
