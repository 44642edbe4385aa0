//! `task_output`: the body and status line, idempotent reads, waiting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Fixture, exec_with};
use dsh_tasks::{TaskOutcome, TaskSpec};
use dsh_tool_tasks::{DEFAULT_WAIT_MS, MAX_WAIT_MS};
use dsh_tools::{AgentId, CancellationToken};
use serde_json::json;

#[tokio::test]
async fn a_completed_task_reads_its_output_then_its_status_and_reads_the_same_twice() {
    let fixture = Fixture::new();
    let id = fixture.completed("parent", "answer", "background answer");
    fixture.settled(&id, "parent").await;
    let first = fixture.call("task_output", json!({"task_id": id})).await;
    let second = fixture.call("task_output", json!({"task_id": id})).await;
    assert!(!first.is_error);
    insta::assert_snapshot!(first.text, @r"
    background answer
    [status: completed]
    ");
    assert_eq!(first, second);
}

#[tokio::test]
async fn a_killed_task_without_output_reads_no_new_output() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    fixture.tasks.kill(&id, &AgentId::from("parent"), None).unwrap();
    fixture.settled(&id, "parent").await;
    let result = fixture.call("task_output", json!({"task_id": id})).await;
    insta::assert_snapshot!(result.text, @r"
    (no new output)
    [status: killed]
    ");
}

#[tokio::test]
async fn a_failed_task_shows_its_detail_in_the_status_line() {
    let fixture = Fixture::new();
    let id = fixture
        .tasks
        .spawn(TaskSpec::new("subagent", "setup", AgentId::from("parent")), |_| async {
            TaskOutcome::Failed {
                detail: "Error: setup failed".into(),
            }
        })
        .unwrap();
    let result = fixture.call("task_output", json!({"task_id": id, "wait": true})).await;
    assert!(!result.is_error, "reading a failed task is a successful read");
    insta::assert_snapshot!(result.text, @r"
    (no new output)
    [status: failed, Error: setup failed]
    ");
}

#[tokio::test]
async fn without_wait_a_running_task_answers_at_once() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    let result = fixture.call("task_output", json!({"task_id": id, "wait": false})).await;
    insta::assert_snapshot!(result.text, @r"
    (no new output)
    [status: running]
    ");
}

#[tokio::test]
async fn wait_returns_the_settled_task() {
    let fixture = Fixture::new();
    let gate = CancellationToken::new();
    let id = {
        let gate = gate.clone();
        fixture
            .tasks
            .spawn(
                TaskSpec::new("subagent", "gated", AgentId::from("parent")),
                |_| async move {
                    gate.cancelled().await;
                    TaskOutcome::Completed {
                        output: "after the gate".into(),
                    }
                },
            )
            .unwrap()
    };
    let (result, ()) = tokio::join!(
        fixture.call("task_output", json!({"task_id": id, "wait": true})),
        async {
            tokio::task::yield_now().await;
            gate.cancel();
        }
    );
    assert_eq!(result.text, "after the gate\n[status: completed]");
}

// Paused time: timeouts elapse only on the test's virtual clock, so the
// assertions below are about which limit applied, never about speed.

#[tokio::test(start_paused = true)]
async fn wait_with_a_timeout_returns_the_task_still_running_after_that_timeout() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    let started = tokio::time::Instant::now();
    let result = fixture
        .call("task_output", json!({"task_id": id, "wait": true, "timeout_ms": 250}))
        .await;
    assert_eq!(started.elapsed(), Duration::from_millis(250));
    insta::assert_snapshot!(result.text, @r"
    (no new output)
    [status: running]
    ");
}

#[tokio::test(start_paused = true)]
async fn wait_without_a_timeout_uses_the_default() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    let started = tokio::time::Instant::now();
    let result = fixture.call("task_output", json!({"task_id": id, "wait": true})).await;
    assert_eq!(started.elapsed(), Duration::from_millis(DEFAULT_WAIT_MS));
    assert_eq!(result.text, "(no new output)\n[status: running]");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_call_stops_waiting_and_shows_the_task_as_it_is() {
    let fixture = Fixture::new();
    let id = fixture.until_killed("parent", "slow");
    let cancel = CancellationToken::new();
    let started = tokio::time::Instant::now();
    let call = fixture.tools.call(
        "task_output",
        json!({"task_id": id, "wait": true, "timeout_ms": MAX_WAIT_MS}),
        exec_with(cancel.clone()),
    );
    let (result, ()) = tokio::join!(call, async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        cancel.cancel();
    });
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "returned when the token fired, not at the timeout"
    );
    assert!(!result.is_error);
    assert_eq!(result.text, "(no new output)\n[status: running]");
    // The task itself is untouched by the abandoned read.
    let task = fixture.tasks.get(&id, &AgentId::from("parent")).unwrap();
    assert_eq!(task.status, dsh_tasks::TaskStatus::Running);
}
