//! `Harness::recover` after an interruption: a background child whose last
//! run had ended is finished again when the recovery returns, so the
//! parent's first model call after it reads the child's result, never a
//! task still running (its model may have read the completion notice before
//! the interruption, and calls `task_output` at once).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_harness::provider::{
    BoxFuture, Capabilities, ChildRecord, ContinuableProvider, ContinuationDescriptor, RecordedChild, Rerun,
    ResumeRequest, RunMode, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentResult, SubagentRun,
};
use dsh_harness::{AgentRef, Background, CancellationToken, Fate, HarnessBuilder, SubagentToolConfig};
use dsh_subagent_testing::MemoryChildStore;
use dsh_tasks::TaskStatus;

/// A provider that only recovers: it reads a child's records (which takes
/// a while) and hands back the answer the child had recorded.
struct Recovering;

impl SubagentProvider for Recovering {
    fn name(&self) -> &str {
        "spawn"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, _request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("this provider only recovers")) })
    }

    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(self)
    }
}

impl ContinuableProvider for Recovering {
    fn start_continuable(
        &self,
        _child_id: String,
        _descriptor: ContinuationDescriptor,
        _request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("this provider only recovers")) })
    }

    fn resume(&self, _request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("this provider only recovers")) })
    }

    fn recover(
        &self,
        request: dsh_harness::provider::RecoverRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let result = async { Ok(SubagentResult::completed("the recorded answer")) };
            Ok(SubagentRun::new(request.child_id, result, || async { Ok(()) }))
        })
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_child_that_had_finished_is_finished_again_when_the_recovery_returns() {
    let parent = AgentRef::new("parent");
    let descriptor = ContinuationDescriptor::for_request(
        "spawn",
        &StartRequest::text("write it", parent.clone(), CancellationToken::new()),
    );
    let store = MemoryChildStore::new();
    store.insert(
        ChildRecord::new("child-1", Some(parent.id().clone()))
            .with_descriptor(descriptor)
            .with_task(RunMode::Background, Some("subagent-1".to_owned()))
            .with_ended(Some(StopReason::Completed))
            // Its parent's model read the notice before the interruption.
            .with_notice_delivered(true),
    );
    let harness = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("spawn").enable_run_in_background(true),
            Arc::new(Recovering),
        )
        .background(Background::Continuable(Arc::new(store)))
        .build()
        .unwrap();

    let report = harness.recover(&parent).await.unwrap();

    assert_eq!(report.children.len(), 1);
    assert_eq!(report.children[0].fate, Fate::Delivered);
    let task = harness.tasks().get("subagent-1", parent.id()).unwrap();
    assert_eq!(task.status, TaskStatus::Completed, "{task:?}");
    let output = task.output.read().await.unwrap();
    assert!(output.contains("the recorded answer"), "{output}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_background_call_run_again_finds_the_child_it_had_started() {
    let parent = AgentRef::new("parent");
    let request = StartRequest::text("write it", parent.clone(), CancellationToken::new());
    let store = MemoryChildStore::new();
    store.insert(
        ChildRecord::new("child-1", Some(parent.id().clone()))
            .with_descriptor(ContinuationDescriptor::for_request("spawn", &request))
            .with_task(RunMode::Background, Some("subagent-1".to_owned()))
            .with_ended(Some(StopReason::Completed)),
    );
    let harness = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("spawn").enable_run_in_background(true),
            Arc::new(Recovering),
        )
        .background(Background::Continuable(Arc::new(store)))
        .build()
        .unwrap();
    harness.recover(&parent).await.unwrap();

    // The call that started it had no recorded result: it runs again,
    // naming the child its caller's records give it.
    let mut again = request;
    let recorded = RecordedChild::in_process("child-1").with_task_id(Some("subagent-1".to_owned()));
    again.provenance_mut().rerun = Some(Rerun::new(Some(recorded)));
    let control = harness.control().unwrap();
    let started = control
        .start_continuable("spawn", "write it".to_owned(), again)
        .unwrap();

    assert_eq!(
        (started.child_id.as_str(), started.task_id.as_str()),
        ("child-1", "subagent-1")
    );
    assert_eq!(harness.tasks().list(parent.id()).len(), 1, "nothing else started");
}
