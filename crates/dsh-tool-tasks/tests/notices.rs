//! End to end: a background task's completion notice reaches its owner's
//! next model call, and `task_output` then reads the task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use dsh_agent::transcript::read_transcript;
use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_llm::{ChatModel, ChatRequest, ChatStream, Message, ScriptedModel};
use dsh_tasks::{TaskOutcome, TaskRegistry, TaskSpec};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A scripted model that keeps every request it receives.
struct Recording {
    inner: ScriptedModel,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Recording {
    fn new(script: &Value) -> Arc<Self> {
        Arc::new(Self {
            inner: ScriptedModel::from_json_str(&script.to_string()).unwrap(),
            requests: Mutex::default(),
        })
    }
}

/// A runtime on `model` whose agents hear the notices of their own tasks in `tasks`.
fn runtime_with_notices(model: &Arc<Recording>, tools: ToolRegistry, tasks: &TaskRegistry) -> AgentRuntime {
    let notices = tasks.clone();
    AgentRuntime::new(model.clone(), tools).with_notices(Arc::new(move |agent: &AgentId| notices.take_notices(agent)))
}

impl ChatModel for Recording {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream_chat(request, cancel)
    }
}

/// `start_job`: starts a background task for the caller that completes with
/// `background answer`. It returns once the task has settled, so the
/// notice is queued before the agent's next model call (a deterministic
/// stand-in for a task that finishes while the agent works on).
struct StartJob {
    tasks: TaskRegistry,
    parameters: Value,
}

impl Tool for StartJob {
    fn name(&self) -> &str {
        "start_job"
    }
    fn description(&self) -> &str {
        "Start a background job."
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute(&self, _args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let owner = exec.agent().unwrap().id().clone();
            let id = self
                .tasks
                .spawn(TaskSpec::new("subagent", "count", owner.clone()), |_| async {
                    TaskOutcome::Completed {
                        output: "background answer".into(),
                    }
                })
                .map_err(|error| ToolError::new(error.to_string()))?;
            self.tasks.wait(&id, &owner, None).await.unwrap();
            Ok(ToolOutput::text(format!("started background subagent task {id}")))
        })
    }
}

const NOTICE: &str =
    "background task subagent-1 (subagent: count) finished [status: completed]. Read its output with task_output.";

#[tokio::test]
async fn the_owner_hears_of_the_finished_task_on_its_next_model_call_and_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = TaskRegistry::new();
    let tools = ToolRegistry::new();
    let _plugin = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    let _job = tools
        .register(Arc::new(StartJob {
            tasks: tasks.clone(),
            parameters: json!({"type": "object", "properties": {}}),
        }))
        .unwrap();
    let script = json!({"rules": [
        {"when": {"last_message": "user", "last_user_contains": "Read its output with task_output."},
         "reply": {"tool_calls": [{"name": "task_output", "arguments": {"task_id": "subagent-1"}}]}},
        {"when": {"last_message": "tool", "last_tool": "task_output"}, "reply": {"text": "{{last_tool_result}}"}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "start_job", "arguments": {}}]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "no notice arrived"}}
    ]});
    let model = Recording::new(&script);
    let runtime = Arc::new(runtime_with_notices(&model, tools, &tasks).with_data_dir(dir.path()));
    let parent = Agent::builder(runtime).id("parent").build().unwrap();

    let outcome = parent.run("start the job", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(outcome.text, "background answer\n[status: completed]");

    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0]
            .messages
            .iter()
            .all(|m| !m.content().contains("background task")),
        "no notice before the task existed"
    );
    let second = &requests[1].messages;
    assert_eq!(second.last().unwrap(), &Message::user(NOTICE));
    assert_eq!(
        second[second.len() - 2].content(),
        "started background subagent task subagent-1"
    );
    let notices_in_last: Vec<_> = requests[2]
        .messages
        .iter()
        .filter(|m| m.content().contains("Read its output with task_output."))
        .collect();
    assert_eq!(notices_in_last.len(), 1, "the notice is delivered once");

    // The notice is part of the recorded conversation.
    let transcript = read_transcript(parent.transcript_path().unwrap()).unwrap();
    assert!(transcript.messages().contains(&Message::user(NOTICE)));
    assert_eq!(transcript.messages(), parent.history());
    assert!(tasks.take_notices(parent.id()).is_empty());
}

#[tokio::test]
async fn a_task_that_finished_between_runs_is_announced_before_the_next_prompt() {
    let tasks = TaskRegistry::new();
    let tools = ToolRegistry::new();
    let _plugin = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    let script = json!({"rules": [{"when": {}, "reply": {"text": "ok"}}]});
    let model = Recording::new(&script);
    let runtime = Arc::new(runtime_with_notices(&model, tools, &tasks));
    let parent = Agent::builder(runtime).id("parent").build().unwrap();
    let other = AgentId::from("someone-else");
    for owner in [parent.id().clone(), other.clone()] {
        let id = tasks
            .spawn(TaskSpec::new("subagent", "count", owner.clone()), |_| async {
                TaskOutcome::Completed {
                    output: "background answer".into(),
                }
            })
            .unwrap();
        tasks.wait(&id, &owner, None).await.unwrap();
    }
    parent.run("anything new?", &CancellationToken::new()).await;
    let request = model.requests.lock().unwrap()[0].clone();
    assert_eq!(
        request.messages,
        [Message::user(NOTICE), Message::user("anything new?")],
        "only the parent's own notice, before its prompt"
    );
    assert_eq!(
        tasks.take_notices(&other).len(),
        1,
        "another agent's notice stays queued for it"
    );
}
