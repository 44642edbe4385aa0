//! Refusals: no calling agent, unknown, foreign and forgotten ids,
//! malformed arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use dsh_tools::{CancellationToken, ToolExecution};
use serde_json::{Value, json};

#[tokio::test]
async fn every_tool_needs_a_calling_agent() {
    let fixture = Fixture::new();
    let mut rendered = Vec::new();
    for (tool, args) in [
        ("task_output", json!({"task_id": "subagent-1"})),
        ("task_kill", json!({"task_id": "subagent-1"})),
        ("task_list", json!({})),
    ] {
        let exec = ToolExecution::new(CancellationToken::new());
        let result = fixture.tools.call(tool, args, exec).await;
        assert!(result.is_error);
        assert_eq!(result.error.as_ref().unwrap().code(), Some("NO_CALLING_AGENT"));
        rendered.push(result.text);
    }
    insta::assert_snapshot!(rendered.join("\n"), @r"
    Error: task_output requires a calling agent (exec.agent was undefined)
    Error: task_kill requires a calling agent (exec.agent was undefined)
    Error: task_list requires a calling agent (exec.agent was undefined)
    ");
}

#[tokio::test]
async fn a_foreign_id_reads_as_an_unknown_one_and_only_its_code_differs() {
    let fixture = Fixture::new();
    let theirs = fixture.until_killed("stranger", "not yours");
    let mut rendered = Vec::new();
    for args in [
        json!({"task_id": "subagent-9"}),
        json!({"task_id": theirs}),
        json!({"task_id": "subagent-9", "wait": true}),
        json!({"task_id": theirs, "wait": true}),
    ] {
        let result = fixture.call("task_output", args.clone()).await;
        rendered.push(format!("task_output {args} -> {}", result.text));
    }
    for args in [json!({"task_id": "subagent-9"}), json!({"task_id": theirs})] {
        let result = fixture.call("task_kill", args.clone()).await;
        rendered.push(format!("task_kill {args} -> {}", result.text));
    }
    insta::assert_snapshot!(rendered.join("\n"), @r#"
    task_output {"task_id":"subagent-9"} -> Error: no task with id "subagent-9"; task_list shows your tasks
    task_output {"task_id":"subagent-1"} -> Error: no task with id "subagent-1"; task_list shows your tasks
    task_output {"task_id":"subagent-9","wait":true} -> Error: no task with id "subagent-9"; task_list shows your tasks
    task_output {"task_id":"subagent-1","wait":true} -> Error: no task with id "subagent-1"; task_list shows your tasks
    task_kill {"task_id":"subagent-9"} -> Error: no task with id "subagent-9"; task_list shows your tasks
    task_kill {"task_id":"subagent-1"} -> Error: no task with id "subagent-1"; task_list shows your tasks
    "#);
    let unknown = fixture.call("task_kill", json!({"task_id": "subagent-9"})).await;
    assert_eq!(unknown.error.unwrap().code(), Some("UNKNOWN_TASK"));
    let foreign = fixture.call("task_kill", json!({"task_id": theirs})).await;
    assert_eq!(foreign.error.unwrap().code(), Some("FOREIGN_TASK"));
    // The stranger's task was not touched.
    let task = fixture.tasks.get(&theirs, &"stranger".into()).unwrap();
    assert_eq!(task.status, dsh_tasks::TaskStatus::Running);
}

#[tokio::test]
async fn a_forgotten_task_reads_no_longer_kept_with_its_code() {
    let mut fixture = Fixture::new();
    fixture.tasks = fixture.tasks.clone().keep_finished(std::num::NonZeroUsize::MIN);
    for _ in 0..2 {
        let id = fixture.completed("parent", "quick", "done");
        fixture.settled(&id, "parent").await;
    }
    let mut rendered = Vec::new();
    for (tool, args) in [
        ("task_output", json!({"task_id": "subagent-1"})),
        ("task_output", json!({"task_id": "subagent-1", "wait": true})),
        ("task_kill", json!({"task_id": "subagent-1"})),
    ] {
        let result = fixture.call(tool, args.clone()).await;
        assert_eq!(result.error.as_ref().unwrap().code(), Some("FORGOTTEN_TASK"));
        rendered.push(format!("{tool} {args} -> {}", result.text));
    }
    insta::assert_snapshot!(rendered.join("\n"), @r#"
    task_output {"task_id":"subagent-1"} -> Error: task "subagent-1" has finished and is no longer kept: each agent keeps only its most recently finished task; task_list shows your tasks
    task_output {"task_id":"subagent-1","wait":true} -> Error: task "subagent-1" has finished and is no longer kept: each agent keeps only its most recently finished task; task_list shows your tasks
    task_kill {"task_id":"subagent-1"} -> Error: task "subagent-1" has finished and is no longer kept: each agent keeps only its most recently finished task; task_list shows your tasks
    "#);
    let kept = fixture.call("task_output", json!({"task_id": "subagent-2"})).await;
    assert_eq!(kept.text, "done\n[status: completed]");
    let never = fixture.call("task_output", json!({"task_id": "subagent-3"})).await;
    assert_eq!(never.error.unwrap().code(), Some("UNKNOWN_TASK"));
}

#[tokio::test]
async fn malformed_arguments_name_the_field() {
    let fixture = Fixture::new();
    let _task = fixture.until_killed("parent", "slow");
    let cases: Vec<(&str, Value)> = vec![
        ("task_output", json!("subagent-1")),
        ("task_output", json!(null)),
        ("task_output", json!({})),
        ("task_output", json!({"task_id": 1})),
        ("task_output", json!({"task_id": ""})),
        ("task_output", json!({"task_id": "  "})),
        ("task_output", json!({"task_id": "subagent-1", "wait": "yes"})),
        (
            "task_output",
            json!({"task_id": "subagent-1", "wait": true, "timeout_ms": "10"}),
        ),
        (
            "task_output",
            json!({"task_id": "subagent-1", "wait": true, "timeout_ms": -5}),
        ),
        (
            "task_output",
            json!({"task_id": "subagent-1", "wait": true, "timeout_ms": 1.5}),
        ),
        (
            "task_output",
            json!({"task_id": "subagent-1", "wait": true, "timeout_ms": 600_001}),
        ),
        ("task_output", json!({"task_id": "subagent-1", "timeout_ms": 10})),
        ("task_kill", json!([])),
        ("task_kill", json!({"reason": "x"})),
        ("task_kill", json!({"task_id": ["subagent-1"]})),
        ("task_kill", json!({"task_id": "subagent-1", "reason": 3})),
        ("task_list", json!("all")),
        ("task_list", json!([])),
    ];
    let mut rendered = Vec::new();
    for (tool, args) in cases {
        let result = fixture.call(tool, args.clone()).await;
        assert!(result.is_error, "{tool} {args}");
        assert_eq!(result.error.as_ref().unwrap().code(), Some("INVALID_ARGUMENTS"));
        rendered.push(format!("{tool} {args} -> {}", result.text));
    }
    insta::assert_snapshot!("argument_errors", rendered.join("\n"));
    let still = fixture.call("task_output", json!({"task_id": "subagent-1"})).await;
    assert_eq!(
        still.text, "(no new output)\n[status: running]",
        "no refused call killed it"
    );
}
