//! One-shot background runs (docs/contract.md, "Background tasks").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{exec, task};
use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_api::StopReason;
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, ScriptedProvider, ScriptedProviderBuilder, StartBehavior};
use dsh_tasks::{KillOutcome, TaskRegistry, TaskStatus, wording as task_wording};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin, wording};
use dsh_tools::{AgentId, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistration, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Stands in for `dsh-tool-tasks`: background calls need a `task_output` to be collectable.
struct FakeTaskOutput(Value);

impl Tool for FakeTaskOutput {
    fn name(&self) -> &str {
        "task_output"
    }
    fn description(&self) -> &str {
        "fake"
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn execute(&self, _: Value, _: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async { Err(ToolError::new("fake")) })
    }
}

struct Background {
    tools: ToolRegistry,
    tasks: TaskRegistry,
    provider: Arc<ScriptedProvider>,
    _keep: (ProviderRegistration, SubagentToolPlugin, Option<ToolRegistration>),
}

fn background(build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder) -> Background {
    background_with(build, true)
}

fn background_with(
    build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder,
    with_task_output: bool,
) -> Background {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let provider = build(ScriptedProvider::builder("mock")).build();
    let registration = service.register_provider(provider.clone()).unwrap();
    let output = with_task_output.then(|| {
        tools
            .register(Arc::new(FakeTaskOutput(json!({"type": "object"}))))
            .unwrap()
    });
    let config = SubagentToolConfig::new("mock").enable_run_in_background(true);
    let plugin = SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap();
    Background {
        tools,
        tasks,
        provider,
        _keep: (registration, plugin, output),
    }
}

fn in_background() -> Value {
    json!({"description": "d", "prompt": "do the thing", "run_in_background": true})
}

fn parent() -> AgentId {
    AgentId::from("parent-1")
}

impl Background {
    async fn start(&self) -> String {
        let result = self.tools.call("subagent", in_background(), exec()).await;
        assert!(!result.is_error, "{}", result.text);
        result.text
    }

    async fn output(&self, id: &str) -> String {
        let task = self.tasks.wait(id, &parent(), None).await.unwrap();
        task_wording::task_output(&task.output.read().await.unwrap(), &task)
    }
}

#[tokio::test]
async fn enabling_background_adds_the_parameter_and_the_task_sentence() {
    let fixture = background(|b| b);
    let spec = fixture
        .tools
        .specs()
        .into_iter()
        .find(|s| s.name == "subagent")
        .unwrap();
    assert_eq!(
        spec.description,
        format!("{}{}", wording::STANDALONE_DESCRIPTION, wording::ONE_SHOT_SUFFIX)
    );
    assert!(spec.description.contains("task_output"));
    let properties: Vec<_> = spec.parameters["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(properties, ["description", "prompt", "run_in_background"]);
    assert_eq!(spec.parameters["required"], json!(["description", "prompt"]));
    // The foreground schema plus `run_in_background` in the one-shot words.
    let mut foreground = common::mounted_parameters(false);
    foreground["properties"]["run_in_background"] =
        json!({"type": "boolean", "description": wording::RUN_IN_BACKGROUND_ONE_SHOT});
    assert_eq!(spec.parameters, foreground);
    insta::assert_snapshot!("background_description", spec.description);
    insta::assert_json_snapshot!("background_schema", spec.parameters);
}

#[tokio::test]
async fn a_background_run_is_a_task_whose_output_reads_the_same_twice() {
    let fixture = background(|b| b.reply("background answer"));
    assert_eq!(fixture.start().await, "started background subagent task subagent-1");
    assert_eq!(
        fixture.output("subagent-1").await,
        "background answer\n[status: completed]"
    );
    assert_eq!(
        fixture.output("subagent-1").await,
        "background answer\n[status: completed]"
    );
    assert_eq!(fixture.provider.stats().disposes(), 1);
    assert_eq!(
        fixture.tasks.take_notices(&parent()),
        ["background task subagent-1 (subagent: d) finished [status: completed]. Read its output with task_output."]
    );
}

#[tokio::test]
async fn an_explicit_false_runs_in_the_foreground() {
    let fixture = background(|b| b.reply("foreground answer"));
    let result = fixture
        .tools
        .call(
            "subagent",
            json!({"description": "d", "prompt": "p", "run_in_background": false}),
            exec(),
        )
        .await;
    assert_eq!(result.text, "foreground answer");
    assert!(fixture.tasks.list(&parent()).is_empty());
}

#[tokio::test]
async fn a_failed_child_reports_its_reason_and_diagnostic_but_not_its_partial_output() {
    let fixture = background(|b| {
        b.stop_reason(StopReason::Error)
            .diagnostic("Claude Code cancelled an unattended dialog")
            .reply("")
    });
    let id = fixture.start().await.rsplit(' ').next().unwrap().to_owned();
    assert_eq!(
        fixture.output(&id).await,
        "(no new output)\n[status: failed, error; diagnostic: Claude Code cancelled an unattended dialog]"
    );
}

#[tokio::test]
async fn an_async_start_failure_acknowledges_then_fails_the_task() {
    let fixture = background(|b| b.on_start(StartBehavior::Fail("setup failed".into())));
    assert_eq!(fixture.start().await, "started background subagent task subagent-1");
    let output = fixture.output("subagent-1").await;
    assert!(output.contains("[status: failed, setup failed]"), "{output}");
}

#[tokio::test]
async fn a_kill_while_startup_is_pending_reads_killed() {
    let gate = Gate::new();
    let fixture = background(|b| b.on_start(StartBehavior::Gated(gate.clone())));
    fixture.start().await;
    gate.arrived(1).await;
    assert_eq!(
        fixture.tasks.kill("subagent-1", &parent(), None).unwrap(),
        KillOutcome::Requested
    );
    assert_eq!(fixture.output("subagent-1").await, "(no new output)\n[status: killed]");
    assert_eq!(fixture.provider.stats().published(), 0);
}

/// A provider whose start waits for its cancellation, then fails to roll
/// back what it had set up.
struct RollbackFails;

impl dsh_subagent_api::SubagentProvider for RollbackFails {
    fn name(&self) -> &str {
        "mock"
    }
    fn capabilities(&self) -> dsh_subagent_api::Capabilities {
        dsh_subagent_api::Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(
        &self,
        request: dsh_subagent_api::StartRequest,
    ) -> BoxFuture<'_, Result<dsh_subagent_api::SubagentRun, dsh_subagent_api::SubagentError>> {
        Box::pin(async move {
            request.cancel.cancelled().await;
            Err(dsh_subagent_api::SubagentError::rollback_failed(
                dsh_subagent_api::SubagentError::aborted("startup cancelled before publication"),
                dsh_subagent_api::SubagentError::failed("cleanup also failed"),
            ))
        })
    }
}

#[tokio::test]
async fn a_kill_during_startup_whose_rollback_fails_reads_failed_with_both_errors() {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let _registration = service.register_provider(Arc::new(RollbackFails)).unwrap();
    let _output = tools
        .register(Arc::new(FakeTaskOutput(json!({"type": "object"}))))
        .unwrap();
    let config = SubagentToolConfig::new("mock").enable_run_in_background(true);
    let _plugin = SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap();
    let started = tools.call("subagent", in_background(), exec()).await;
    assert_eq!(started.text, "started background subagent task subagent-1");
    assert_eq!(
        tasks.kill("subagent-1", &parent(), None).unwrap(),
        KillOutcome::Requested
    );
    let task = tasks.wait("subagent-1", &parent(), None).await.unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(
        task_wording::task_output("", &task),
        "(no new output)\n[status: failed, startup cancelled before publication; rollback failed: cleanup also failed]"
    );
}

#[tokio::test]
async fn a_kill_mid_run_cancels_the_child_releases_it_and_reads_killed() {
    let fixture = background(|b| b.on_result(ResultBehavior::UntilCancelled));
    fixture.start().await;
    fixture.start().await;
    let stats = fixture.provider.stats().clone();
    while stats.published() < 2 {
        tokio::task::yield_now().await;
    }
    for (id, reason) in [("subagent-1", Some("superseded".to_owned())), ("subagent-2", None)] {
        assert_eq!(
            fixture.tasks.kill(id, &parent(), reason).unwrap(),
            KillOutcome::Requested
        );
        assert_eq!(
            task_wording::kill_requested(id),
            format!("requested cancellation of task {id}")
        );
        assert_eq!(fixture.output(id).await, "(no new output)\n[status: killed]");
    }
    assert_eq!((stats.disposes(), stats.live(), stats.cancels_observed()), (2, 0, 2));
}

/// Without a task registry the model would be shown `run_in_background` and
/// refused at every call: the instance is refused when it loads instead, and
/// nothing is mounted or reserved.
#[tokio::test]
async fn without_a_task_registry_background_is_refused_when_the_tool_loads() {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let provider = ScriptedProvider::builder("mock").build();
    let _registration = service.register_provider(provider.clone()).unwrap();
    let config = SubagentToolConfig::new("mock").enable_run_in_background(true);
    let error = SubagentToolPlugin::apply(config, &service, &tools).unwrap_err();
    assert_eq!(
        error,
        dsh_tool_subagent::ConfigError::BackgroundWithoutTasks {
            tool_name: "subagent".into()
        }
    );
    assert!(tools.names().is_empty());
    assert_eq!(provider.stats().starts(), 0);
    // The name was never reserved: a foreground instance takes it.
    let _foreground = SubagentToolPlugin::apply(SubagentToolConfig::new("mock"), &service, &tools).unwrap();
    assert_eq!(tools.names(), ["subagent"]);
    insta::assert_snapshot!("background_without_tasks", error.to_string());
}

#[tokio::test]
async fn without_task_tools_the_caller_could_not_collect_so_nothing_starts() {
    let fixture = background_with(|b| b, false);
    let result = fixture.tools.call("subagent", in_background(), exec()).await;
    assert!(
        result.text.contains("no control surface is attached"),
        "{}",
        result.text
    );
    assert_eq!(fixture.provider.stats().starts(), 0);
    assert!(fixture.tasks.list(&parent()).is_empty());
    insta::assert_snapshot!("background_unavailable", result.text);
}

#[tokio::test]
async fn disposing_the_owner_kills_its_background_children() {
    let fixture = background(|b| b.on_result(ResultBehavior::UntilCancelled));
    fixture.start().await;
    let stats = fixture.provider.stats().clone();
    while stats.published() < 1 {
        tokio::task::yield_now().await;
    }
    fixture.tasks.dispose_owner(&parent(), "parent disposed").await;
    assert_eq!(
        fixture.tasks.get("subagent-1", &parent()).unwrap().status,
        TaskStatus::Killed
    );
    assert_eq!((stats.disposes(), stats.live()), (1, 0));
}

#[tokio::test]
async fn tasks_are_numbered_in_dispatch_order_and_labelled_by_description() {
    let fixture = background(|b| b);
    let first = fixture.start().await;
    let second = fixture
        .tools
        .call(
            "subagent",
            json!({"description": "second", "prompt": "p", "run_in_background": true}),
            exec(),
        )
        .await;
    assert_eq!(first, "started background subagent task subagent-1");
    assert_eq!(second.text, "started background subagent task subagent-2");
    let labels: Vec<_> = fixture.tasks.list(&parent()).into_iter().map(|t| t.label).collect();
    assert_eq!(labels, ["d", "second"]);
    let _ = task();
}
