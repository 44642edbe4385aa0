//! A child run as a background task (`SubagentService::start_as_task`): the
//! task's kill token governs the run, the run is settled and released, and
//! its outcome (a failed start or check included) is the task's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_subagent::{Limits, SubagentService};
use dsh_subagent_api::{AgentId, AgentRef, CancellationToken, StartRequest};
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, ScriptedProvider, StartBehavior};
use dsh_tasks::{TaskError, TaskRegistry, TaskStatus, TextStore};

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

fn owner() -> AgentId {
    AgentId::new("parent")
}

fn request(cancel: &CancellationToken) -> StartRequest {
    StartRequest::text("task", AgentRef::new("parent"), cancel.clone())
}

#[tokio::test]
async fn a_published_run_is_settled_released_and_its_text_is_the_tasks_output() {
    let service = SubagentService::new();
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("spawn").reply("the answer").build();
    let stats = provider.stats().clone();
    let _registration = service.register_provider(provider).unwrap();
    let id = service
        .start_as_task(&tasks, "spawn", "look it up".into(), request(&CancellationToken::new()))
        .unwrap();
    assert!(id.starts_with("subagent-"), "{id}");
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Completed);
    assert_eq!(task.output.read().await.unwrap().as_str(), "the answer");
    assert_eq!(task.label, "look it up");
    assert_eq!((stats.starts(), stats.disposes(), stats.live()), (1, 1, 0));
}

#[tokio::test]
async fn the_tasks_kill_not_the_callers_token_governs_the_run() {
    let service = SubagentService::new();
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("spawn")
        .on_result(ResultBehavior::UntilCancelled)
        .build();
    let stats = provider.stats().clone();
    let _registration = service.register_provider(provider).unwrap();
    let caller = CancellationToken::new();
    let id = service
        .start_as_task(&tasks, "spawn", "wait".into(), request(&caller))
        .unwrap();
    // Cancelling the call that asked for the task leaves the child running.
    caller.cancel();
    let still = tasks
        .wait(&id, &owner(), Some(Duration::from_millis(50)))
        .await
        .unwrap();
    assert_eq!(still.status, TaskStatus::Running);
    assert_eq!(stats.live(), 1);
    tasks.kill(&id, &owner(), None).unwrap();
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Killed);
    assert_eq!((stats.disposes(), stats.live()), (1, 0));
}

#[tokio::test]
async fn a_start_killed_before_publication_reads_killed() {
    let service = SubagentService::new();
    let tasks = TaskRegistry::new();
    let gate = Gate::new();
    let provider = ScriptedProvider::builder("spawn")
        .on_start(StartBehavior::Gated(gate.clone()))
        .build();
    let stats = provider.stats().clone();
    let _registration = service.register_provider(provider).unwrap();
    let id = service
        .start_as_task(&tasks, "spawn", "held".into(), request(&CancellationToken::new()))
        .unwrap();
    gate.arrived(1).await;
    tasks.kill(&id, &owner(), None).unwrap();
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Killed);
    assert_eq!((stats.published(), stats.live()), (0, 0));
}

#[tokio::test]
async fn a_failed_start_or_check_fails_the_task_with_its_error() {
    let service = SubagentService::new();
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("spawn")
        .on_start(StartBehavior::Fail("no such model".into()))
        .build();
    let _registration = service.register_provider(provider).unwrap();
    let id = service
        .start_as_task(&tasks, "spawn", "fail".into(), request(&CancellationToken::new()))
        .unwrap();
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(task.detail.as_deref(), Some("no such model"));
    // The service's checks run in the task, like any start's.
    let id = service
        .start_as_task(&tasks, "acp", "nobody".into(), request(&CancellationToken::new()))
        .unwrap();
    let task = tasks.wait(&id, &owner(), WAIT).await.unwrap();
    assert_eq!(task.status, TaskStatus::Failed);
    assert_eq!(
        task.detail.as_deref(),
        Some(r#"no subagent provider registered for "acp""#)
    );
}

#[tokio::test]
async fn a_refused_task_starts_nothing() {
    let service = SubagentService::new();
    let tasks = TaskRegistry::new();
    let provider = ScriptedProvider::builder("spawn").build();
    let stats = provider.stats().clone();
    let _registration = service.register_provider(provider).unwrap();
    let refused = service
        .start_as_task(&tasks, "spawn", "  ".into(), request(&CancellationToken::new()))
        .unwrap_err();
    assert_eq!(refused, TaskError::EmptyLabel.into());
    tokio::task::yield_now().await;
    assert_eq!(stats.starts(), 0);
    assert!(tasks.list(&owner()).is_empty());
}

#[tokio::test]
async fn every_tree_of_a_service_keeps_its_outputs_in_one_store() {
    // Without a bound of its own, a service keeps them in the process's store.
    let unbounded = SubagentService::new();
    assert_eq!(unbounded.texts(&AgentRef::new("anyone")), TextStore::process());
    let service = SubagentService::with_limits(Limits::none().with_kept_output(10_000));
    let provider = ScriptedProvider::builder("p").reply("x".repeat(1_000)).build();
    let _registration = service.register_provider(provider.clone()).unwrap();
    let tree = service.open_tree();
    let parent = AgentRef::new("parent").with_lineage(tree.lineage());
    let mut run = service
        .start("p", StartRequest::text("go", parent.clone(), CancellationToken::new()))
        .await
        .unwrap();
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    let lineage = provider.stats().last_request().unwrap().lineage;
    let child = AgentRef::new("child").with_depth(1).with_lineage(lineage);
    assert_eq!(service.texts(&child), service.texts(&parent), "one tree, one store");
    let loner = AgentRef::new("loner");
    let other_tree = AgentRef::new("other").with_lineage(service.open_tree().lineage());
    assert_eq!(service.texts(&loner), service.texts(&parent), "one service, one store");
    assert_eq!(service.texts(&other_tree), service.texts(&parent));
    assert_ne!(service.texts(&parent), TextStore::process());
    assert_eq!(service.texts(&parent).bound(), 10_000);

    // A background result is kept in the service's store.
    let tasks = TaskRegistry::new();
    let id = service
        .start_as_task(
            &tasks,
            "p",
            "answer".into(),
            StartRequest::text("go", parent.clone(), CancellationToken::new()),
        )
        .unwrap();
    tasks.wait(&id, parent.id(), None).await.unwrap();
    assert_eq!(service.texts(&parent).held(), 1_000);
}
