//! Cancellation at every point of a child's life: before start, while start
//! is pending, while the run is live, after the result, and an abandoned call.
//! Each ends with dispose called once (when a run was published) and no child
//! left running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Fixture, alive_tasks, exec_with, task};
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, START_ABORTED, StartBehavior};
use dsh_tools::{ABORTED_BEFORE_DISPATCH, CancellationToken};

/// Waits (bounded) until `condition` holds, yielding to the runtime meanwhile.
async fn eventually(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("condition never held");
}

/// Calls `subagent` and cancels the call once a stage has reached `gate`.
async fn call_cancelled_at(fixture: &Fixture, gate: &Gate) -> dsh_tools::ToolResult {
    let cancel = CancellationToken::new();
    let call = fixture.tools.call("subagent", task(), exec_with(cancel.clone()));
    let canceller = async {
        gate.arrived(1).await;
        cancel.cancel();
    };
    futures::future::join(call, canceller).await.0
}

#[tokio::test]
async fn before_start_the_registry_refuses_and_the_provider_is_never_called() {
    let fixture = Fixture::new(|b| b);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let result = fixture.tools.call("subagent", task(), exec_with(cancel)).await;
    assert_eq!(result.text, "Error: tool call aborted before dispatch");
    assert_eq!(result.error.unwrap().code(), Some(ABORTED_BEFORE_DISPATCH));
    assert_eq!(fixture.provider.stats().starts(), 0);
}

#[tokio::test]
async fn before_start_a_direct_execute_passes_the_cancelled_token_and_startup_rejects() {
    let fixture = Fixture::new(|b| b);
    let tool = fixture.tools.get("subagent").unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = tool.execute(task(), exec_with(cancel)).await;
    assert_eq!(outcome.unwrap_err().message(), START_ABORTED);
    assert_eq!(fixture.provider.stats().starts(), 1);
    assert_eq!(fixture.provider.stats().published(), 0);
    assert_eq!(fixture.provider.stats().disposes(), 0);
}

#[tokio::test]
async fn while_start_is_pending_the_provider_rolls_back_and_nothing_is_published() {
    let baseline = alive_tasks();
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_start(StartBehavior::Gated(gate.clone())));
    let result = call_cancelled_at(&fixture, &gate).await;
    assert_eq!(result.text, format!("Error: {START_ABORTED}"));
    let stats = fixture.provider.stats();
    assert_eq!((stats.published(), stats.disposes(), stats.live()), (0, 0, 0));
    assert_eq!(alive_tasks(), baseline);
}

#[tokio::test]
async fn while_the_run_is_live_the_cancel_reaches_the_child_once_and_dispose_runs_once() {
    let baseline = alive_tasks();
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Gated(gate.clone())));
    let result = call_cancelled_at(&fixture, &gate).await;
    assert!(result.is_error);
    assert_eq!(
        result.text,
        "Error: subagent run was cancelled\nPartial output before the run ended:\nscripted subagent reply"
    );
    let stats = fixture.provider.stats();
    assert_eq!(stats.cancels_observed(), 1);
    assert_eq!((stats.disposes(), stats.live()), (1, 0));
    assert_eq!(alive_tasks(), baseline);
}

#[tokio::test]
async fn after_the_result_a_cancel_changes_nothing() {
    let fixture = Fixture::new(|b| b);
    let cancel = CancellationToken::new();
    let result = fixture.tools.call("subagent", task(), exec_with(cancel.clone())).await;
    assert!(!result.is_error);
    cancel.cancel();
    let stats = fixture.provider.stats();
    assert_eq!((stats.disposes(), stats.live(), stats.cancels_observed()), (1, 0, 0));
}

#[tokio::test]
async fn cancelling_a_call_does_not_cancel_the_caller() {
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Gated(gate.clone())));
    let parent = CancellationToken::new();
    let call = fixture.tools.call("subagent", task(), exec_with(parent.clone()));
    let opener = async {
        gate.arrived(1).await;
        gate.open();
    };
    let (result, ()) = futures::future::join(call, opener).await;
    assert!(!result.is_error);
    assert!(!parent.is_cancelled(), "the tool never cancels the call's token");
}

#[tokio::test]
async fn a_provider_that_ignores_cancellation_still_ends_the_call_once_released() {
    let baseline = alive_tasks();
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Hang));
    let cancel = CancellationToken::new();
    let call = fixture.tools.call("subagent", task(), exec_with(cancel.clone()));
    let published = fixture.provider.stats().clone();
    let canceller = async {
        eventually(|| published.published() == 1).await;
        cancel.cancel();
    };
    let (result, ()) = futures::future::join(call, canceller).await;
    assert_eq!(result.text, "Error: subagent run was cancelled");
    let stats = fixture.provider.stats();
    assert_eq!((stats.disposes(), stats.live()), (1, 0));
    assert_eq!(alive_tasks(), baseline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_call_is_cancelled_and_released_in_the_background() {
    let baseline = alive_tasks();
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Gated(gate.clone())));
    let parent = CancellationToken::new();
    let call = fixture.tools.call("subagent", task(), exec_with(parent.clone()));
    // Drive the call until the child is live, then drop it mid-run.
    tokio::select! {
        _ = call => panic!("the call cannot finish while the gate is closed"),
        () = gate.arrived(1) => {}
    }
    let stats = fixture.provider.stats().clone();
    eventually(|| stats.disposes() == 1 && stats.live() == 0).await;
    assert_eq!(stats.cancels_observed(), 1);
    assert!(!parent.is_cancelled());
    eventually(|| alive_tasks() == baseline).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_cancellations_leave_nothing_running() {
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::UntilCancelled));
    let tools = fixture.tools.clone();
    let mut calls = Vec::new();
    let mut tokens = Vec::new();
    for _ in 0..200 {
        let cancel = CancellationToken::new();
        tokens.push(cancel.clone());
        let tools = tools.clone();
        calls.push(tokio::spawn(async move {
            tools.call("subagent", task(), exec_with(cancel)).await
        }));
    }
    let stats = fixture.provider.stats().clone();
    eventually(|| stats.published() == 200).await;
    for token in tokens {
        token.cancel();
    }
    for call in calls {
        let result = call.await.unwrap();
        assert!(
            result.text.starts_with("Error: subagent run was cancelled"),
            "{}",
            result.text
        );
    }
    assert_eq!(
        (stats.disposes(), stats.live(), stats.cancels_observed()),
        (200, 0, 200)
    );
}
