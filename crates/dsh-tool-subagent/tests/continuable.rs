//! The continuable background route (docs/contract.md, "Background tasks").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsh_subagent::{ProviderRegistration, SubagentControl, SubagentService};
use dsh_subagent_api::{
    AgentId, AgentRef, CancellationToken, Capabilities, ChildRecord, ContinuableProvider, ContinuationDescriptor,
    ResumeRequest, StartRequest, SubagentError, SubagentProvider, SubagentResult, SubagentRun, concat_text,
};
use dsh_subagent_testing::MemoryChildStore;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin, wording};
use dsh_tool_subagent_control::SubagentControlPlugin;
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{ToolExecution, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Answers `started: <prompt>` / `resumed: <prompt>`; counts every start.
struct Echo {
    store: Arc<MemoryChildStore>,
    starts: AtomicUsize,
}

fn answer(id: String, text: String) -> SubagentRun {
    SubagentRun::new(id, async move { Ok(SubagentResult::completed(text)) }, || async {
        Ok(())
    })
}

impl SubagentProvider for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(answer(
                "one-shot".into(),
                format!("foreground: {}", concat_text(&request.prompt)),
            ))
        })
    }
    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(self)
    }
}

impl ContinuableProvider for Echo {
    fn start_continuable(
        &self,
        child_id: String,
        descriptor: ContinuationDescriptor,
        request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        self.store
            .insert(ChildRecord::new(child_id.clone(), Some(request.parent.id().clone())).with_descriptor(descriptor));
        Box::pin(async move { Ok(answer(child_id, format!("started: {}", concat_text(&request.prompt)))) })
    }
    fn resume(&self, request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move {
            Ok(answer(
                request.child_id,
                format!("resumed: {}", concat_text(&request.prompt)),
            ))
        })
    }
}

struct Fixture {
    tools: ToolRegistry,
    echo: Arc<Echo>,
    tasks: TaskRegistry,
    _keep: Vec<Box<dyn std::any::Any>>,
}

/// `with_control`: mount through the control service; `with_send`: mount `send_message`.
fn fixture(with_control: bool, with_send: bool) -> Fixture {
    fixture_with(with_control, with_send, true)
}

/// As [`fixture`]; `persistent: false` gives the control service no child store.
fn fixture_with(with_control: bool, with_send: bool, persistent: bool) -> Fixture {
    let store = Arc::new(MemoryChildStore::new());
    let echo = Arc::new(Echo {
        store: store.clone(),
        starts: AtomicUsize::new(0),
    });
    let service = SubagentService::new();
    let registration: ProviderRegistration = service.register_provider(echo.clone()).unwrap();
    let tasks = TaskRegistry::new();
    let control = if persistent {
        SubagentControl::new(service.clone(), tasks.clone(), store)
    } else {
        SubagentControl::without_persistence(service.clone(), tasks.clone())
    };
    let tools = ToolRegistry::new();
    let mut keep: Vec<Box<dyn std::any::Any>> = vec![Box::new(registration)];
    keep.push(Box::new(TaskToolsPlugin::apply(&tasks, &tools).unwrap()));
    if with_send {
        keep.push(Box::new(SubagentControlPlugin::apply(&control, &tools).unwrap()));
    }
    let config = SubagentToolConfig::new("echo").enable_run_in_background(true);
    let plugin = if with_control {
        SubagentToolPlugin::apply_with_control(config, &service, &tools, &control).unwrap()
    } else {
        SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap()
    };
    keep.push(Box::new(plugin));
    Fixture {
        tools,
        echo,
        tasks,
        _keep: keep,
    }
}

fn exec() -> ToolExecution {
    ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("parent"))
}

fn in_background() -> Value {
    json!({"description": "research", "prompt": "do the thing", "run_in_background": true})
}

#[tokio::test]
async fn a_continuable_provider_gets_the_continuable_wording() {
    let fixture = fixture(true, true);
    let tool = fixture.tools.get("subagent").unwrap();
    assert!(tool.description().ends_with(wording::CONTINUABLE_SUFFIX));
    assert_eq!(
        tool.parameters()["properties"]["run_in_background"]["description"],
        wording::RUN_IN_BACKGROUND_CONTINUABLE
    );
    insta::assert_snapshot!("continuable_description", tool.description());
    insta::assert_json_snapshot!("continuable_schema", tool.parameters());
}

#[tokio::test]
async fn a_background_call_starts_a_child_that_send_message_continues() {
    let fixture = fixture(true, true);
    let started = fixture.tools.call("subagent", in_background(), exec()).await;
    assert!(!started.is_error, "{}", started.text);
    let child = started
        .text
        .strip_prefix("started subagent ")
        .and_then(|rest| rest.strip_suffix(" as task subagent-1"))
        .unwrap()
        .to_owned();
    let read = |id: &str| json!({"task_id": id, "wait": true});
    let first = fixture.tools.call("task_output", read("subagent-1"), exec()).await;
    assert_eq!(first.text, "started: do the thing\n[status: completed]");
    let sent = fixture
        .tools
        .call("send_message", json!({"subagent_id": child, "message": "more"}), exec())
        .await;
    assert_eq!(
        sent.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
    let second = fixture.tools.call("task_output", read("subagent-2"), exec()).await;
    assert_eq!(second.text, "resumed: more\n[status: completed]");
}

#[tokio::test]
async fn without_the_control_service_or_send_message_nothing_starts() {
    for (with_control, with_send, expected) in [
        (false, true, wording::CONTROL_UNAVAILABLE),
        (true, false, wording::SEND_MESSAGE_UNAVAILABLE),
    ] {
        let fixture = fixture(with_control, with_send);
        let result = fixture.tools.call("subagent", in_background(), exec()).await;
        assert!(result.is_error);
        assert_eq!(result.text, format!("Error: {expected}"));
        assert_eq!(fixture.echo.starts.load(Ordering::SeqCst), 0);
        assert!(fixture.tasks.list(&AgentId::from("parent")).is_empty());
    }
    insta::assert_snapshot!(
        "continuable_unavailable",
        format!(
            "{}\n{}",
            wording::CONTROL_UNAVAILABLE,
            wording::SEND_MESSAGE_UNAVAILABLE
        )
    );
}

#[tokio::test]
async fn without_persistence_the_continuable_route_and_send_message_refuse_before_any_task() {
    let fixture = fixture_with(true, true, false);
    let expected =
        "Error: continuable subagents require session persistence (create SubagentControl with a ChildStore)";
    let started = fixture.tools.call("subagent", in_background(), exec()).await;
    assert_eq!(started.text, expected);
    assert_eq!(started.error.unwrap().code(), Some("PERSISTENCE_UNAVAILABLE"));
    let sent = fixture
        .tools
        .call(
            "send_message",
            json!({"subagent_id": "child-1", "message": "more"}),
            exec(),
        )
        .await;
    assert_eq!(sent.text, expected);
    assert_eq!(sent.error.unwrap().code(), Some("PERSISTENCE_UNAVAILABLE"));
    assert_eq!(fixture.echo.starts.load(Ordering::SeqCst), 0);
    assert!(fixture.tasks.list(&AgentId::from("parent")).is_empty());
    insta::assert_snapshot!("persistence_unavailable", started.text);
}

#[tokio::test]
async fn without_run_in_background_the_call_stays_in_the_foreground() {
    let fixture = fixture(true, true);
    let result = fixture
        .tools
        .call("subagent", json!({"description": "d", "prompt": "now"}), exec())
        .await;
    assert_eq!(result.text, "foreground: now");
    assert!(fixture.tasks.list(&AgentId::from("parent")).is_empty());
}
