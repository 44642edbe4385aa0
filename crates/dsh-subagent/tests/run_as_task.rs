//! A child run as a background task (`dsh_subagent::run_as_task`): the
//! task's kill token governs the run, the run is settled and released, and
//! its outcome (a failed start included) is the task's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_subagent::{Settled, run_as_task};
use dsh_subagent_api::{AgentId, AgentRef, CancellationToken, StartRequest, SubagentError, SubagentProvider};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tasks::{TaskError, TaskRegistry, TaskStatus};

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

fn owner() -> AgentId {
    AgentId::new("parent")
}

#[tokio::test]
async fn a_published_run_is_settled_released_and_its_text_is_the_tasks_output() {
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("spawn").reply("the answer").build();
    let stats = provider.stats().clone();
    let settlements = Arc::new(AtomicUsize::new(0));
    let seen = settlements.clone();
    let id = run_as_task(
        &tasks,
        "look it up".into(),
        owner(),
        move |kill| async move {
            let request = StartRequest::text("task", AgentRef::new("parent"), kill);
            provider.start(request).await
        },
        move |settled: &Settled| {
            assert!(settled.result.is_ok() && settled.disposed.is_ok());
            seen.fetch_add(1, Ordering::SeqCst);
        },
    )
    .unwrap();
    assert!(id.starts_with("subagent-"), "{id}");
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Completed);
    assert_eq!(task.output, "the answer");
    assert_eq!(task.label, "look it up");
    assert_eq!(settlements.load(Ordering::SeqCst), 1);
    assert_eq!((stats.starts(), stats.disposes(), stats.live()), (1, 1, 0));
}

#[tokio::test]
async fn the_start_gets_the_tasks_kill_token_and_a_killed_start_reads_killed() {
    let tasks = TaskRegistry::new();
    let (handed, received) = tokio::sync::oneshot::channel::<CancellationToken>();
    let id = run_as_task(
        &tasks,
        "wait for a kill".into(),
        owner(),
        move |kill: CancellationToken| async move {
            handed.send(kill.clone()).unwrap();
            kill.cancelled().await;
            Err(SubagentError::aborted("start aborted before publication"))
        },
        |_: &Settled| panic!("nothing was published, so nothing settles"),
    )
    .unwrap();
    let kill = received.await.unwrap();
    assert!(!kill.is_cancelled());
    tasks.kill(&id, &owner(), None).unwrap();
    assert!(kill.is_cancelled());
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Killed);
}

#[tokio::test]
async fn a_failed_start_fails_the_task_with_its_error() {
    let tasks = TaskRegistry::new();
    let id = run_as_task(
        &tasks,
        "fail".into(),
        owner(),
        |_kill| async { Err(SubagentError::failed("no such model")) },
        |_: &Settled| {},
    )
    .unwrap();
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.detail.as_deref(), Some("no such model"));
}

#[tokio::test]
async fn a_refused_task_starts_nothing() {
    let tasks = TaskRegistry::new();
    let starts = Arc::new(AtomicUsize::new(0));
    let counted = starts.clone();
    let refused = run_as_task(
        &tasks,
        "  ".into(),
        owner(),
        move |_kill| async move {
            counted.fetch_add(1, Ordering::SeqCst);
            Err(SubagentError::failed("never"))
        },
        |_: &Settled| {},
    )
    .unwrap_err();
    assert_eq!(refused, TaskError::EmptyLabel);
    tokio::task::yield_now().await;
    assert_eq!(starts.load(Ordering::SeqCst), 0);
    assert!(tasks.list(&owner()).is_empty());
}
