//! Live delivery's refusals, made deterministic with a hand-built continuable
//! provider: its runs answer when the test says so, and its steerer is absent,
//! accepting or refusing as each test needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use dsh_subagent::{SubagentControl, SubagentService};
use dsh_subagent_api::{
    AgentId, AgentRef, CancellationToken, Capabilities, ChildRecord, ChildStore, ContentBlock, ContinuableProvider,
    ContinuationDescriptor, ResumeRequest, StartRequest, Steerer, SubagentError, SubagentProvider, SubagentResult,
    SubagentRun, concat_text,
};
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent_control::SubagentControlPlugin;
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{ToolExecution, ToolRegistry, ToolResult};
use futures::future::BoxFuture;
use serde_json::json;
use tokio::sync::watch;

#[derive(Clone, Copy)]
enum Steering {
    Absent,
    Accept,
    Refuse,
}

/// Runs answer `done` (plus what was steered into them) once `answer` is set.
struct Gated {
    steering: Steering,
    answer: watch::Receiver<bool>,
    steered: Arc<Mutex<Vec<String>>>,
}

impl Gated {
    fn run(&self, id: String) -> SubagentRun {
        let mut answer = self.answer.clone();
        let steered = self.steered.clone();
        let run = SubagentRun::new(
            id,
            async move {
                let _ = answer.wait_for(|open| *open).await;
                let joined = steered.lock().unwrap().join(", ");
                Ok(SubagentResult::completed(format!("done [{joined}]")))
            },
            || async { Ok(()) },
        );
        let sink = self.steered.clone();
        match self.steering {
            Steering::Absent => run,
            Steering::Accept => run.with_steerer(Steerer::new(move |content: Vec<ContentBlock>| {
                sink.lock().unwrap().push(concat_text(&content));
                Ok(())
            })),
            Steering::Refuse => run.with_steerer(Steerer::new(|_| {
                Err(SubagentError::failed_with_code(
                    "subagent child \"c\" turn has already closed; the message was not delivered",
                    "NOT_DELIVERED",
                ))
            })),
        }
    }
}

impl SubagentProvider for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    /// A one-shot run whose id is its prompt, so a test can make it collide.
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { Ok(self.run(concat_text(&request.prompt))) })
    }
    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(self)
    }
}

impl ContinuableProvider for Gated {
    fn start_continuable(
        &self,
        child_id: String,
        _descriptor: ContinuationDescriptor,
        _request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { Ok(self.run(child_id)) })
    }
    fn resume(&self, request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { Ok(self.run(request.child_id)) })
    }
}

/// Every child belongs to `parent` and has a `gated` descriptor.
struct Store;

impl ChildStore for Store {
    fn lookup(&self, child_id: &str) -> Result<Option<ChildRecord>, SubagentError> {
        let request = StartRequest::text("", AgentRef::new("parent"), CancellationToken::new());
        Ok(Some(
            ChildRecord::new(child_id, Some(AgentId::new("parent")))
                .with_descriptor(ContinuationDescriptor::for_request("gated", &request)),
        ))
    }
    fn children_of(&self, _parent: &AgentId) -> Result<Vec<ChildRecord>, SubagentError> {
        Ok(Vec::new())
    }
}

struct World {
    service: SubagentService,
    control: SubagentControl,
    tools: ToolRegistry,
    answer: watch::Sender<bool>,
    steered: Arc<Mutex<Vec<String>>>,
    me: AgentRef,
    _keep: (
        dsh_subagent::ProviderRegistration,
        SubagentControlPlugin,
        TaskToolsPlugin,
    ),
}

impl World {
    fn new(steering: Steering) -> Self {
        let (answer, gate) = watch::channel(false);
        let steered = Arc::new(Mutex::new(Vec::new()));
        let service = SubagentService::new();
        let provider = Gated {
            steering,
            answer: gate,
            steered: steered.clone(),
        };
        let registration = service.register_provider(Arc::new(provider)).unwrap();
        let tasks = TaskRegistry::new();
        let control = SubagentControl::new(service.clone(), tasks.clone(), Arc::new(Store));
        let tools = ToolRegistry::new();
        let send = SubagentControlPlugin::apply(&control, &tools).unwrap();
        let task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
        Self {
            service,
            control,
            tools,
            answer,
            steered,
            me: AgentRef::new("parent"),
            _keep: (registration, send, task_tools),
        }
    }

    /// Starts a child and waits until its run is published.
    async fn start(&self) -> (String, String) {
        let mut request = StartRequest::text("work", self.me.clone(), CancellationToken::new());
        request.label = Some("work".into());
        let started = self.control.start_continuable("gated", "work".into(), request).unwrap();
        // The producer publishes on its first poll.
        tokio::task::yield_now().await;
        (started.child_id, started.task_id)
    }

    async fn call(&self, tool: &str, args: serde_json::Value) -> ToolResult {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(self.me.clone());
        self.tools.call(tool, args, exec).await
    }

    async fn send(&self, child: &str, message: &str) -> ToolResult {
        self.call("send_message", json!({"subagent_id": child, "message": message}))
            .await
    }

    async fn output(&self, task: &str) -> String {
        self.call("task_output", json!({"task_id": task, "wait": true}))
            .await
            .text
    }
}

#[tokio::test]
async fn a_provider_without_live_delivery_refuses_and_the_child_continues_after_it_settles() {
    let world = World::new(Steering::Absent);
    let (child, task) = world.start().await;
    let refused = world.send(&child, "also consider Y").await;
    assert!(refused.is_error);
    assert_eq!(
        refused.text,
        format!("Error: subagent \"{child}\" provider does not accept live delivery; the message was not delivered")
    );
    world.answer.send_replace(true);
    assert_eq!(world.output(&task).await, "done []\n[status: completed]");
    let sent = world.send(&child, "also consider Y").await;
    assert_eq!(
        sent.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
}

#[tokio::test]
async fn a_lost_steering_race_is_refused_and_never_falls_through_to_a_new_task() {
    let world = World::new(Steering::Refuse);
    let (child, task) = world.start().await;
    let refused = world.send(&child, "also consider Y").await;
    assert!(refused.is_error);
    assert_eq!(
        refused.text,
        format!("Error: subagent \"{child}\" stopped before delivery; the message was not delivered")
    );
    let error = world
        .control
        .send_message(&world.me, &child, "again")
        .expect_err("still refused");
    assert_eq!(error.code(), "NOT_DELIVERED");
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    assert_eq!(
        cause.as_deref(),
        Some("subagent child \"c\" turn has already closed; the message was not delivered"),
        "the provider's refusal is the cause"
    );
    let listed = world.call("task_list", json!({})).await.text;
    assert!(!listed.contains("subagent-2"), "no task was created: {listed}");
    world.answer.send_replace(true);
    assert_eq!(world.output(&task).await, "done []\n[status: completed]");
}

#[tokio::test]
async fn steered_messages_join_the_running_task_in_order() {
    let world = World::new(Steering::Accept);
    let (child, task) = world.start().await;
    for message in ["first", "second"] {
        let sent = world.send(&child, message).await;
        assert_eq!(sent.text, format!("message delivered to running task {task}"));
    }
    world.answer.send_replace(true);
    assert_eq!(world.output(&task).await, "done [first, second]\n[status: completed]");
    assert_eq!(*world.steered.lock().unwrap(), ["first", "second"]);
}

#[tokio::test]
async fn another_parent_cannot_steer_a_running_child() {
    let world = World::new(Steering::Accept);
    let (child, _task) = world.start().await;
    let stranger = AgentRef::new("stranger");
    let delivery = world.control.send_message(&stranger, &child, "hijack").unwrap();
    assert_eq!(delivery.route, dsh_subagent::Route::Started);
    let exec = ToolExecution::new(CancellationToken::new()).with_agent(stranger.clone());
    let output = world
        .tools
        .call("task_output", json!({"task_id": delivery.task_id, "wait": true}), exec)
        .await
        .text;
    assert_eq!(
        output,
        format!("(no new output)\n[status: failed, subagent \"{child}\" is unavailable]")
    );
    assert!(world.steered.lock().unwrap().is_empty(), "nothing reached the child");
    world.answer.send_replace(true);
}

#[tokio::test]
async fn every_activation_is_announced_as_a_run() {
    use dsh_subagent::SubagentEvent;
    let world = World::new(Steering::Accept);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _subscription = world.service.subscribe(Arc::new(move |event: &SubagentEvent| {
        let line = match event {
            SubagentEvent::RunStarted(info) => format!(
                "start {} {} parent={} depth={} label={:?}",
                info.provider, info.id, info.parent, info.depth, info.label
            ),
            SubagentEvent::RunEnded(end) => format!(
                "end {} {} {:?}",
                end.run.id, end.stop_reason, end.last_assistant_message
            ),
            _ => return Ok(()),
        };
        sink.lock().unwrap().push(line);
        Ok(())
    }));
    let (child, task) = world.start().await;
    world.answer.send_replace(true);
    world.output(&task).await;
    let sent = world.send(&child, "more").await;
    assert_eq!(
        sent.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
    world.output("subagent-2").await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("start gated {child} parent=parent depth=1 label=Some(\"work\")"),
            format!("end {child} completed Some(\"done []\")"),
            format!("start gated {child} parent=parent depth=1 label=None"),
            format!("end {child} completed Some(\"done []\")"),
        ]
    );
}

#[tokio::test]
async fn a_live_one_shot_child_is_outside_control_ownership_and_refused_synchronously() {
    let world = World::new(Steering::Accept);
    let one_shot = StartRequest::text("one-shot-1", world.me.clone(), CancellationToken::new());
    let mut run = world.service.start("gated", one_shot).await.unwrap();
    assert_eq!(run.id(), "one-shot-1");
    let refused = world.send("one-shot-1", "also consider Y").await;
    assert!(refused.is_error);
    assert_eq!(
        refused.text,
        "Error: subagent \"one-shot-1\" has a live agent outside control-service ownership; the message was not delivered"
    );
    assert_eq!(refused.error.unwrap().code(), Some("OWNERSHIP_CONFLICT"));
    let listed = world.call("task_list", json!({})).await.text;
    assert!(!listed.contains("subagent-"), "no task was created: {listed}");
    assert!(world.steered.lock().unwrap().is_empty(), "nothing reached the child");
    // Once the one-shot run has settled, the id is no longer live.
    world.answer.send_replace(true);
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    let sent = world.control.send_message(&world.me, "one-shot-1", "again").unwrap();
    assert_eq!(sent.route, dsh_subagent::Route::Started);
}

#[tokio::test]
async fn another_parent_s_live_one_shot_child_reads_as_an_unknown_id() {
    let world = World::new(Steering::Accept);
    let one_shot = StartRequest::text("one-shot-1", world.me.clone(), CancellationToken::new());
    let mut run = world.service.start("gated", one_shot).await.unwrap();
    let stranger = AgentRef::new("stranger");
    let mut seen = Vec::new();
    for id in ["one-shot-1", "no-such-child"] {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(stranger.clone());
        let sent = world
            .tools
            .call("send_message", json!({"subagent_id": id, "message": "hello"}), exec)
            .await;
        assert!(!sent.is_error, "{}", sent.text);
        let task = sent.text.split(' ').nth(3).unwrap().to_owned();
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(stranger.clone());
        let output = world
            .tools
            .call("task_output", json!({"task_id": task, "wait": true}), exec)
            .await
            .text;
        assert_eq!(
            sent.text,
            format!("message started task {task} continuing subagent {id}")
        );
        seen.push(output.replace(id, "<id>"));
    }
    // A live child of another parent reads like no child at all.
    assert_eq!(
        seen,
        ["(no new output)\n[status: failed, subagent \"<id>\" is unavailable]"; 2]
    );
    assert!(world.steered.lock().unwrap().is_empty(), "nothing reached the child");
    world.answer.send_replace(true);
    run.result().await.unwrap();
    run.dispose().await.unwrap();
}

#[tokio::test]
async fn a_live_run_that_is_not_the_activation_s_own_is_refused() {
    let world = World::new(Steering::Accept);
    let (child, task) = world.start().await;
    // A one-shot run published under the child's id, beside its activation.
    let impostor = StartRequest::text(child.clone(), world.me.clone(), CancellationToken::new());
    let mut run = world.service.start("gated", impostor).await.unwrap();
    let refused = world.send(&child, "also consider Y").await;
    assert!(refused.is_error);
    assert_eq!(
        refused.text,
        format!(
            "Error: subagent \"{child}\" registry agent is not the associated activation's agent; the message was not delivered"
        )
    );
    assert_eq!(refused.error.unwrap().code(), Some("OWNERSHIP_CONFLICT"));
    assert!(world.steered.lock().unwrap().is_empty(), "nothing reached the child");
    world.answer.send_replace(true);
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    assert_eq!(world.output(&task).await, "done []\n[status: completed]");
}

#[tokio::test]
async fn the_activation_s_own_live_run_is_steered_not_refused() {
    let world = World::new(Steering::Accept);
    let (child, task) = world.start().await;
    let sent = world.send(&child, "first").await;
    assert_eq!(sent.text, format!("message delivered to running task {task}"));
    world.answer.send_replace(true);
    assert_eq!(world.output(&task).await, "done [first]\n[status: completed]");
    // Settled: the next message continues the child, it is not a conflict.
    let next = world.send(&child, "second").await;
    assert_eq!(
        next.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
}

#[tokio::test]
async fn without_persistence_nothing_starts_and_no_message_starts_a_task() {
    let service = SubagentService::new();
    let (_answer, gate) = watch::channel(false);
    let provider = Gated {
        steering: Steering::Accept,
        answer: gate,
        steered: Arc::default(),
    };
    let _registration = service.register_provider(Arc::new(provider)).unwrap();
    let tasks = TaskRegistry::new();
    let control = SubagentControl::without_persistence(service, tasks.clone());
    let me = AgentRef::new("parent");
    let request = StartRequest::text("work", me.clone(), CancellationToken::new());
    let refused = control.start_continuable("gated", "work".into(), request).unwrap_err();
    let sent = control.send_message(&me, "child-1", "more").unwrap_err();
    for error in [&refused, &sent] {
        assert_eq!(
            error.to_string(),
            "continuable subagents require session persistence (create SubagentControl with a ChildStore)"
        );
        assert_eq!(error.code(), "PERSISTENCE_UNAVAILABLE");
    }
    assert!(tasks.list(me.id()).is_empty());
}
