//! `send_message` (docs/contract.md, "send_message").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::World;
use dsh_agent::child::{ChildContext, start_child};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest};
use dsh_tool_subagent_control::{SubagentControlPlugin, TOOL_NAMES, wording};
use dsh_tools::{CancellationToken as Token, ToolExecution};
use serde_json::json;

/// The parameter schema of the mounted `send_message`.
fn send_message_parameters() -> serde_json::Value {
    let service = dsh_subagent::SubagentService::new();
    let control = dsh_subagent::SubagentControl::without_persistence(service, dsh_tasks::TaskRegistry::new());
    let tools = dsh_tools::ToolRegistry::new();
    let _plugin = SubagentControlPlugin::apply(&control, &tools).unwrap();
    tools.get(wording::SEND_MESSAGE).unwrap().parameters().clone()
}

#[test]
fn description_and_schema_are_pinned_and_match_the_contract() {
    insta::assert_snapshot!("description_send_message", wording::DESCRIPTION);
    insta::assert_json_snapshot!("schema_send_message", send_message_parameters());
    assert_eq!(
        send_message_parameters(),
        json!({
            "type": "object",
            "properties": {
                "subagent_id": {"type": "string", "description": "The subagent id returned when the background subagent was started."},
                "message": {"type": "string", "description": "The message to deliver to the subagent."}
            },
            "required": ["subagent_id", "message"]
        })
    );
    assert!(wording::DESCRIPTION.contains("`task_output`"));
    assert!(!wording::DESCRIPTION.contains("job"));
}

#[test]
fn renderings_and_refusals_are_pinned() {
    use dsh_subagent::ControlError;
    insta::assert_snapshot!("rendering_started", wording::started("subagent-2", "child-1"));
    insta::assert_snapshot!("rendering_steered", wording::steered("subagent-9"));
    insta::assert_snapshot!("no_calling_agent", wording::NO_CALLING_AGENT);
    let child = || "child-1".to_owned();
    let refusals = [
        (
            "refused_settling",
            ControlError::ActivationSettling {
                child: child(),
                task_id: "subagent-1".into(),
                status: dsh_tasks::TaskStatus::Completed,
            },
        ),
        ("refused_starting", ControlError::ActivationStarting { child: child() }),
        (
            "refused_no_live_delivery",
            ControlError::NoLiveDelivery { child: child() },
        ),
        (
            "refused_stopped_before_delivery",
            ControlError::StoppedBeforeDelivery {
                child: child(),
                cause: dsh_subagent_api::SubagentError::failed(
                    "subagent child \"child-1\" turn has already closed; the message was not delivered",
                ),
            },
        ),
    ];
    for (name, refusal) in refusals {
        insta::assert_snapshot!(name, refusal.to_string());
        assert_eq!(refusal.code(), "NOT_DELIVERED", "{name}");
        assert!(refusal.to_string().contains("the message was not delivered"), "{name}");
    }
    let conflicts = [
        (
            "refused_ownership_conflict",
            ControlError::OwnershipConflict { child: child() },
        ),
        (
            "refused_registry_mismatch",
            ControlError::RegistryMismatch { child: child() },
        ),
    ];
    for (name, refusal) in conflicts {
        insta::assert_snapshot!(name, refusal.to_string());
        assert_eq!(refusal.code(), "OWNERSHIP_CONFLICT", "{name}");
        assert!(
            refusal.to_string().ends_with("; the message was not delivered"),
            "{name}"
        );
    }
    insta::assert_snapshot!(
        "refused_persistence_unavailable",
        ControlError::PersistenceUnavailable.to_string()
    );
    assert_eq!(ControlError::PersistenceUnavailable.code(), "PERSISTENCE_UNAVAILABLE");
}

#[tokio::test]
async fn a_settled_child_is_continued_by_a_new_task_with_its_history() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let me = parent.agent_ref();
    let (child, first) = world.start(&parent, "first question");
    assert_eq!(first, "subagent-1");
    assert_eq!(
        world.output(&me, &first).await,
        "answer to first question after 0 earlier answers\n[status: completed]"
    );
    let sent = world.send(&me, &child, "second question").await;
    assert!(!sent.is_error, "{}", sent.text);
    assert_eq!(
        sent.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
    assert_eq!(
        world.output(&me, "subagent-2").await,
        "answer to second question after 1 earlier answers\n[status: completed]"
    );
    let listed = world.call(&me, "task_list", json!({})).await.text;
    assert!(
        listed.contains("subagent-2 [status: completed] (subagent: second question)"),
        "{listed}"
    );
}

#[tokio::test]
async fn a_message_to_a_running_child_joins_its_current_task() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let me = parent.agent_ref();
    let (child, task) = world.start(&parent, "slow work");
    // Not published yet (its task has not run): nothing to steer.
    let early = world.send(&me, &child, "too early").await;
    assert!(early.is_error);
    assert_eq!(
        early.text,
        format!("Error: subagent \"{child}\" activation is starting; the message was not delivered")
    );
    // Mid-turn: once the child has recorded its prompt.
    let path = data.path().join("agents").join(format!("{child}.jsonl"));
    while !std::fs::read_to_string(&path).is_ok_and(|t| t.contains("slow work")) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let steered = world.send(&me, &child, "also consider Y").await;
    assert!(!steered.is_error, "{}", steered.text);
    assert_eq!(steered.text, format!("message delivered to running task {task}"));
    // The task's answer has seen the message; no new task was created.
    assert_eq!(
        world.output(&me, &task).await,
        "answer to also consider Y after 1 earlier answers\n[status: completed]"
    );
    let listed = world.call(&me, "task_list", json!({})).await.text;
    assert!(!listed.contains("subagent-2"), "{listed}");
    let transcript = dsh_agent::transcript::read_transcript(&path).unwrap();
    let prompts: Vec<_> = transcript
        .messages()
        .iter()
        .filter(|m| m.role().as_str() == "user")
        .map(|m| m.content().to_owned())
        .collect();
    assert_eq!(prompts, ["slow work", "also consider Y"]);
    let refused = std::fs::read_to_string(&path).unwrap();
    assert!(!refused.contains("too early"), "a refused message is never recorded");
    // After it settled, a message starts the next activation.
    let sent = world.send(&me, &child, "and Z").await;
    assert_eq!(
        sent.text,
        format!("message started task subagent-2 continuing subagent {child}")
    );
    assert_eq!(
        world.output(&me, "subagent-2").await,
        "answer to and Z after 2 earlier answers\n[status: completed]"
    );
}

#[tokio::test]
async fn a_killed_activation_frees_the_child_for_the_next_message() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let me = parent.agent_ref();
    let (child, task) = world.start(&parent, "slow work");
    // Kill mid-turn: once the child has recorded its prompt.
    let path = data.path().join("agents").join(format!("{child}.jsonl"));
    while !std::fs::read_to_string(&path).is_ok_and(|t| t.contains("slow work")) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let killed = world.call(&me, "task_kill", json!({"task_id": task})).await;
    assert_eq!(killed.text, format!("requested cancellation of task {task}"));
    assert!(world.output(&me, &task).await.ends_with("[status: killed]"));
    let sent = world.send(&me, &child, "try again").await;
    assert!(!sent.is_error, "{}", sent.text);
    let answer = world.output(&me, "subagent-2").await;
    assert!(answer.starts_with("answer to try again"), "{answer}");
    assert!(answer.ends_with("[status: completed]"));
}

#[tokio::test]
async fn a_child_killed_before_it_was_established_reports_unavailable() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let me = parent.agent_ref();
    let (child, task) = world.start(&parent, "slow work");
    // Current-thread runtime: the producer has not run yet, so nothing exists.
    world.call(&me, "task_kill", json!({"task_id": task})).await;
    assert_eq!(world.output(&me, &task).await, "(no new output)\n[status: killed]");
    world.send(&me, &child, "anyone there?").await;
    assert_eq!(
        world.output(&me, "subagent-2").await,
        format!("(no new output)\n[status: failed, subagent \"{child}\" is unavailable]")
    );
}

#[tokio::test]
async fn unknown_ids_start_a_task_that_fails_as_unavailable() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let me = world.parent("parent").agent_ref();
    for id in ["no-such-child", "../parent", "."] {
        let sent = world.send(&me, id, "hello").await;
        assert!(!sent.is_error, "{}", sent.text);
        let task = sent.text.split(' ').nth(3).unwrap().to_owned();
        assert_eq!(
            world.output(&me, &task).await,
            format!("(no new output)\n[status: failed, subagent \"{id}\" is unavailable]")
        );
    }
}

#[tokio::test]
async fn another_parent_gets_a_failed_task_both_in_memory_and_from_the_store() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let stranger = world.parent("stranger").agent_ref();
    let (child, task) = world.start(&parent, "first");
    world.output(&parent.agent_ref(), &task).await;
    let foreign = format!("(no new output)\n[status: failed, subagent \"{child}\" is unavailable]");
    let sent = world.send(&stranger, &child, "let me in").await;
    assert!(!sent.is_error, "{}", sent.text);
    // Ids are each owner's own: the stranger's first task is its `subagent-1`.
    assert_eq!(world.output(&stranger, "subagent-1").await, foreign);
    // A new process knows nothing in memory: the store answers.
    let reopened = World::open(data.path());
    let stranger = reopened.parent("stranger").agent_ref();
    reopened.send(&stranger, &child, "let me in").await;
    assert_eq!(reopened.output(&stranger, "subagent-1").await, foreign);
}

#[tokio::test]
async fn a_child_without_a_descriptor_cannot_be_continued() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = world.parent("parent");
    let me = parent.agent_ref();
    // A one-shot child: same parent, no descriptor.
    let mut run = start_child(
        StartRequest::text("once", me.clone(), CancellationToken::new()),
        ChildContext::Fresh,
    )
    .unwrap();
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    let sent = world.send(&me, run.id(), "again").await;
    assert!(!sent.is_error, "{}", sent.text);
    assert_eq!(
        world.output(&me, "subagent-1").await,
        format!(
            "(no new output)\n[status: failed, subagent \"{}\" has no supported continuation descriptor]",
            run.id()
        )
    );
}

#[tokio::test]
async fn calls_without_an_agent_or_with_bad_arguments_are_refused() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let exec = ToolExecution::new(Token::new());
    let result = world
        .tools
        .call("send_message", json!({"subagent_id": "x", "message": "m"}), exec)
        .await;
    assert!(result.is_error);
    assert_eq!(
        result.text,
        "Error: send_message requires a calling agent (exec.agent was undefined)"
    );
    let me = AgentRef::new("parent");
    let cases = [
        (
            json!("text"),
            "Error: send_message arguments must be a JSON object with \"subagent_id\" and \"message\" strings, got a string; the message was not delivered",
        ),
        (
            json!({"message": "m"}),
            "Error: send_message argument \"subagent_id\" is required; the message was not delivered",
        ),
        (
            json!({"subagent_id": "x"}),
            "Error: send_message argument \"message\" is required; the message was not delivered",
        ),
        (
            json!({"subagent_id": 3, "message": "m"}),
            "Error: send_message argument \"subagent_id\" must be a string, got a number; the message was not delivered",
        ),
        (
            json!({"subagent_id": " ", "message": "m"}),
            "Error: send_message argument \"subagent_id\" must not be empty; the message was not delivered",
        ),
    ];
    for (args, expected) in cases {
        let result = world.call(&me, "send_message", args).await;
        assert!(result.is_error);
        assert_eq!(result.text, expected);
    }
    assert!(world.tasks.list(me.id()).is_empty(), "no refused call started a task");
}

#[test]
fn disposing_the_plugin_removes_the_tool() {
    let data = tempfile::tempdir().unwrap();
    let tasks = dsh_tasks::TaskRegistry::new();
    let control = dsh_subagent::SubagentControl::new(
        dsh_subagent::SubagentService::new(),
        tasks,
        Arc::new(dsh_agent::JsonlChildStore::new(data.path())),
    );
    let tools = dsh_tools::ToolRegistry::new();
    let plugin = SubagentControlPlugin::apply(&control, &tools).unwrap();
    assert_eq!(TOOL_NAMES, ["send_message"]);
    assert!(tools.get("send_message").is_some());
    assert!(SubagentControlPlugin::apply(&control, &tools).is_err());
    plugin.dispose();
    assert!(tools.get("send_message").is_none());
}
