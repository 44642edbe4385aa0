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
    // The stranger's task takes none of the parent's numbers.
    insta::assert_snapshot!(result.text, @r"
    subagent-1 [status: completed] (subagent: count to three)
    subagent-2 [status: running] (subagent: review the diff)
    ");
    fixture.call("task_kill", json!({"task_id": running})).await;
    fixture.settled(&running, "parent").await;
    let result = fixture.call("task_list", json!({"ignored": true})).await;
    assert_eq!(
        result.text,
        "subagent-1 [status: completed] (subagent: count to three)\nsubagent-2 [status: killed] (subagent: review the diff)"
    );
}

#[tokio::test]
async fn every_running_task_and_the_twenty_most_recently_finished_then_a_count_of_the_rest() {
    let fixture = Fixture::new();
    let slow = fixture.until_killed("parent", "still working");
    for n in 1..=25 {
        let id = fixture.completed("parent", &format!("job {n}"), "done");
        fixture.settled(&id, "parent").await;
    }
    let result = fixture.call("task_list", json!({})).await;
    assert!(!result.is_error);
    let lines: Vec<&str> = result.text.lines().collect();
    assert_eq!(lines.len(), 1 + dsh_tool_tasks::LISTED_FINISHED + 1);
    assert_eq!(lines[0], format!("{slow} [status: running] (subagent: still working)"));
    // The five that finished first are left out, counted on the last line.
    assert_eq!(lines[1], "subagent-7 [status: completed] (subagent: job 6)");
    assert_eq!(lines[20], "subagent-26 [status: completed] (subagent: job 25)");
    insta::assert_snapshot!(
        lines[21],
        @"(5 older finished tasks not shown; task_output reads any of them by id)"
    );
    // Still kept, so still readable.
    let hidden = fixture.call("task_output", json!({"task_id": "subagent-2"})).await;
    assert_eq!(hidden.text, "done\n[status: completed]");
    fixture.call("task_kill", json!({"task_id": slow})).await;
}
