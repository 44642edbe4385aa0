//! `task_kill`: acknowledgements, the reason, already-finished tasks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use dsh_tasks::{TaskOutcome, TaskSpec};
use dsh_tools::AgentId;
use serde_json::json;

#[tokio::test]
async fn killing_a_running_task_acknowledges_the_request_and_the_task_settles_killed() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    let result = fixture.call("task_kill", json!({"task_id": id})).await;
    assert!(!result.is_error);
    insta::assert_snapshot!(result.text, @"requested cancellation of task subagent-1");
    let read = fixture.call("task_output", json!({"task_id": id, "wait": true})).await;
    assert_eq!(read.text, "(no new output)\n[status: killed]");
}

/// A task of `parent` that runs until killed, then fails with `describe`
/// of the kill's reason.
fn killable_task(fixture: &Fixture, describe: fn(Option<String>) -> String) -> String {
    fixture
        .tasks
        .spawn(
            TaskSpec::new("subagent", "slow", AgentId::from("parent")),
            move |control| async move {
                control.token().cancelled().await;
                TaskOutcome::Failed {
                    detail: describe(control.reason()),
                }
            },
        )
        .unwrap()
}

#[tokio::test]
async fn the_reason_reaches_the_producer() {
    let fixture = Fixture::new();
    let id = killable_task(&fixture, |reason| format!("stopped: {}", reason.unwrap_or_default()));
    fixture
        .call("task_kill", json!({"task_id": id, "reason": "no longer needed"}))
        .await;
    let read = fixture.call("task_output", json!({"task_id": id, "wait": true})).await;
    assert_eq!(
        read.text,
        "(no new output)\n[status: failed, stopped: no longer needed]"
    );
}

#[tokio::test]
async fn an_empty_reason_counts_as_none() {
    let fixture = Fixture::new();
    let id = killable_task(&fixture, |reason| format!("reason given: {}", reason.is_some()));
    fixture.call("task_kill", json!({"task_id": id, "reason": "  "})).await;
    let read = fixture.call("task_output", json!({"task_id": id, "wait": true})).await;
    assert_eq!(read.text, "(no new output)\n[status: failed, reason given: false]");
}

#[tokio::test]
async fn killing_a_finished_task_reports_how_it_finished() {
    let fixture = Fixture::new();
    let done = fixture.completed("parent", "answer", "background answer");
    fixture.settled(&done, "parent").await;
    let result = fixture.call("task_kill", json!({"task_id": done})).await;
    assert!(!result.is_error);
    insta::assert_snapshot!(result.text, @"task subagent-1 had already finished [status: completed]");

    let killed = fixture.until_killed("parent", "slow");
    fixture.call("task_kill", json!({"task_id": killed})).await;
    fixture.settled(&killed, "parent").await;
    let again = fixture.call("task_kill", json!({"task_id": killed})).await;
    insta::assert_snapshot!(again.text, @"task subagent-2 had already finished [status: killed]");
}
