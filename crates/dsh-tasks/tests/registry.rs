//! The task registry's rules: ownership, kills, waits, notices, disposal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_tasks::{KillOutcome, TaskError, TaskOutcome, TaskRegistry, TaskSpec, TaskStatus, wording};
use dsh_tools::AgentId;

fn owner() -> AgentId {
    AgentId::from("parent")
}

fn until_killed(tasks: &TaskRegistry, kind: &str) -> String {
    tasks
        .spawn(TaskSpec::new(kind, "waits for a kill", owner()), |control| async move {
            control.token().cancelled().await;
            TaskOutcome::Failed {
                detail: format!("killed because {}", control.reason().unwrap_or_default()),
            }
        })
        .unwrap()
}

#[tokio::test]
async fn ids_count_per_kind_in_dispatch_order() {
    let tasks = TaskRegistry::new();
    let a = until_killed(&tasks, "subagent");
    let b = until_killed(&tasks, "subagent");
    let c = until_killed(&tasks, "shell");
    assert_eq!(
        [a.as_str(), b.as_str(), c.as_str()],
        ["subagent-1", "subagent-2", "shell-1"]
    );
    let listed: Vec<_> = tasks.list(&owner()).into_iter().map(|t| t.id).collect();
    assert_eq!(listed, ["subagent-1", "subagent-2", "shell-1"]);
    tasks.dispose_owner(&owner(), "test over").await;
}

#[tokio::test]
async fn only_the_owner_may_touch_a_task_and_unknown_ids_are_errors() {
    let tasks = TaskRegistry::new();
    let id = until_killed(&tasks, "subagent");
    let stranger = AgentId::from("stranger");
    assert_eq!(
        tasks.get(&id, &stranger).unwrap_err(),
        TaskError::Foreign { id: id.clone() }
    );
    assert!(matches!(
        tasks.kill(&id, &stranger, None),
        Err(TaskError::Foreign { .. })
    ));
    assert!(tasks.list(&stranger).is_empty());
    let unknown = tasks.get("subagent-9", &owner()).unwrap_err();
    insta::assert_snapshot!(
        format!("{unknown}\n{}", TaskError::Foreign { id: id.clone() }),
        @r#"
    no task with id "subagent-9"; task_list shows your tasks
    no task with id "subagent-1"; task_list shows your tasks
    "#
    );
    assert_eq!(unknown.code(), "UNKNOWN_TASK");
    tasks.dispose_owner(&owner(), "test over").await;
}

#[tokio::test]
async fn a_wait_with_a_timeout_returns_the_task_still_running() {
    let tasks = TaskRegistry::new();
    let id = until_killed(&tasks, "subagent");
    let still = tasks
        .wait(&id, &owner(), Some(Duration::from_millis(10)))
        .await
        .unwrap();
    assert_eq!(still.status, TaskStatus::Running);
    assert_eq!(wording::task_output("", &still), "(no new output)\n[status: running]");
    tasks.dispose_owner(&owner(), "test over").await;
}

#[tokio::test]
async fn the_first_kill_reason_wins_and_a_settled_task_reports_its_status() {
    let tasks = TaskRegistry::new();
    let id = until_killed(&tasks, "subagent");
    assert_eq!(
        tasks.kill(&id, &owner(), Some("superseded".into())).unwrap(),
        KillOutcome::Requested
    );
    // A second kill before settlement does not replace the reason.
    let _ = tasks.kill(&id, &owner(), Some("later".into())).unwrap();
    let done = tasks.wait(&id, &owner(), None).await.unwrap();
    assert_eq!(done.detail.as_deref(), Some("killed because superseded"));
    let KillOutcome::AlreadyFinished(finished) = tasks.kill(&id, &owner(), None).unwrap() else {
        panic!()
    };
    insta::assert_snapshot!(
        wording::already_finished(&finished),
        @"task subagent-1 had already finished [status: failed, killed because superseded]"
    );
}

#[tokio::test]
async fn outputs_are_idempotent_and_notices_are_status_lines_never_output() {
    let tasks = TaskRegistry::new();
    let id = tasks
        .spawn(TaskSpec::new("subagent", "answer", owner()), |_| async {
            TaskOutcome::Completed {
                output: "background answer".into(),
            }
        })
        .unwrap();
    let first = tasks.wait(&id, &owner(), None).await.unwrap();
    let second = tasks.wait(&id, &owner(), None).await.unwrap();
    assert_eq!(
        wording::task_output(&first.output.read().await.unwrap(), &first),
        "background answer\n[status: completed]"
    );
    assert_eq!(first, second);
    let notices = tasks.take_notices(&owner());
    assert_eq!(
        notices,
        [
            "background task subagent-1 (subagent: answer) finished [status: completed]. Read its output with task_output."
        ]
    );
    assert!(tasks.take_notices(&owner()).is_empty(), "each notice is delivered once");
}

#[tokio::test]
async fn a_panicking_producer_settles_its_task_failed() {
    let tasks = TaskRegistry::new();
    let id = tasks
        .spawn(TaskSpec::new("subagent", "boom", owner()), |_| async {
            panic!("kaboom")
        })
        .unwrap();
    let failed = tasks.wait(&id, &owner(), None).await.unwrap();
    assert_eq!(
        failed.status_line(),
        "[status: failed, task stopped unexpectedly: kaboom]"
    );
}

#[tokio::test]
async fn an_empty_label_is_refused_before_anything_runs() {
    let tasks = TaskRegistry::new();
    let mut ran = false;
    let error = tasks
        .spawn(TaskSpec::new("subagent", "  ", owner()), |_| {
            ran = true;
            async { TaskOutcome::Killed }
        })
        .unwrap_err();
    assert_eq!(error.to_string(), "invalid task label: expected a non-empty string");
    assert!(!ran);
}

#[tokio::test]
async fn disposing_an_owner_kills_its_tasks_waits_for_them_and_refuses_new_ones() {
    let tasks = TaskRegistry::new();
    let a = until_killed(&tasks, "subagent");
    let b = until_killed(&tasks, "subagent");
    let other = AgentId::from("other");
    let theirs = tasks
        .spawn(
            TaskSpec::new("subagent", "not yours", other.clone()),
            |control| async move {
                control.token().cancelled().await;
                TaskOutcome::Killed
            },
        )
        .unwrap();
    tasks.dispose_owner(&owner(), "parent disposed").await;
    for id in [a, b] {
        let task = tasks.get(&id, &owner()).unwrap();
        assert_eq!(task.detail.as_deref(), Some("killed because parent disposed"));
    }
    assert_eq!(tasks.get(&theirs, &other).unwrap().status, TaskStatus::Running);
    let refused = tasks
        .spawn(TaskSpec::new("subagent", "too late", owner()), |_| async {
            TaskOutcome::Killed
        })
        .unwrap_err();
    assert_eq!(refused.code(), "OWNER_DISPOSED");
    tasks.dispose_owner(&other, "test over").await;
}

#[tokio::test]
async fn a_long_diagnostic_shows_briefly_in_the_list_the_notice_and_a_kill() {
    let tasks = TaskRegistry::new();
    // A failed run's diagnostic, as long as a provider may give (4 KB).
    let detail = format!("error: the child exited with status 1: {}", "stderr line\n".repeat(340));
    let id = tasks
        .spawn(TaskSpec::new("subagent", "broke", owner()), {
            let detail = detail.clone();
            |_| async move { TaskOutcome::Failed { detail } }
        })
        .unwrap();
    let done = tasks.wait(&id, &owner(), None).await.unwrap();
    let omitted = detail.chars().count() - "error: the child exited with status 1: stderr line".len();
    let brief = format!(
        "[status: failed, error: the child exited with status 1: stderr line… ({omitted} more characters not shown)]"
    );
    assert_eq!(wording::brief_status_line(&done), brief);
    insta::assert_snapshot!(
        tasks.take_notices(&owner()).join("\n"),
        @"background task subagent-1 (subagent: broke) finished [status: failed, error: the child exited with status 1: stderr line… (4069 more characters not shown)]. Read its output with task_output."
    );
    insta::assert_snapshot!(
        wording::task_list(&tasks.listing(&owner(), 20)),
        @"subagent-1 [status: failed, error: the child exited with status 1: stderr line… (4069 more characters not shown)] (subagent: broke)"
    );
    let KillOutcome::AlreadyFinished(finished) = tasks.kill(&id, &owner(), None).unwrap() else {
        panic!()
    };
    assert_eq!(
        wording::already_finished(&finished),
        format!("task subagent-1 had already finished {brief}")
    );
    // A first line longer than the bound keeps its first characters.
    let long = "x".repeat(5_000);
    let id = tasks
        .spawn(TaskSpec::new("subagent", "long", owner()), {
            let long = long.clone();
            |_| async move { TaskOutcome::Failed { detail: long } }
        })
        .unwrap();
    let done = tasks.wait(&id, &owner(), None).await.unwrap();
    assert_eq!(
        wording::brief_status_line(&done),
        format!(
            "[status: failed, {}… (4760 more characters not shown)]",
            "x".repeat(wording::BRIEF_DETAIL_CHARS)
        )
    );
}
