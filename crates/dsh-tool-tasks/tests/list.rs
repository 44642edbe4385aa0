//! `task_list`: the caller's tasks, oldest first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use serde_json::json;

#[tokio::test]
async fn no_tasks_reads_no_tasks() {
    let fixture = Fixture::new();
    let result = fixture.call("task_list", json!({})).await;
    assert!(!result.is_error);
    insta::assert_snapshot!(result.text, @"(no tasks)");
}

#[tokio::test]
async fn one_line_per_task_of_the_caller_in_dispatch_order() {
    let fixture = Fixture::new();
    let done = fixture.completed("parent", "count to three", "one, two, three");
    let _theirs = fixture.until_killed("stranger", "not yours");
    let running = fixture.until_killed("parent", "review the diff");
    fixture.settled(&done, "parent").await;
    let result = fixture.call("task_list", json!({})).await;
    insta::assert_snapshot!(result.text, @r"
    subagent-1 [status: completed] (subagent: count to three)
    subagent-3 [status: running] (subagent: review the diff)
    ");
    fixture.call("task_kill", json!({"task_id": running})).await;
    fixture.settled(&running, "parent").await;
    let result = fixture.call("task_list", json!({"ignored": true})).await;
    assert_eq!(
        result.text,
        "subagent-1 [status: completed] (subagent: count to three)\nsubagent-3 [status: killed] (subagent: review the diff)"
    );
}
