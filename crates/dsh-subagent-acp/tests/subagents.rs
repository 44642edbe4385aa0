//! The provider as a client of the Subagents RFD: it advertises `subagents`
//! to its child, keeps the sessions the child announces (at every depth,
//! with their titles, tasks and states), reports and records them; what
//! the child gets wrong leaves its answer whole; a flood is bounded; a
//! cancelled child's sessions end before its run does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_subagent_acp::{AcpConfig, AcpProvider, ChildUpdate, MAX_SUBAGENT_SESSIONS};
use dsh_subagent_api::{
    AgentRef, CancellationToken, ChildLog, RemoteChild, StartRequest, StopReason, SubagentProvider,
};

mod common;

use common::agent;

const GUARD: Duration = Duration::from_secs(30);

/// What the parent's records were told, last record per child.
#[derive(Default)]
struct Records(Mutex<Vec<RemoteChild>>);

impl ChildLog for Records {
    fn remote_child(&self, _id: &str, child: &RemoteChild) {
        self.0.lock().unwrap().push(child.clone());
    }
}

/// Runs the fault agent in `mode` to its end (cancelled after `cancel_after`
/// when given): its result, the reports, and its last record.
async fn run(
    mode: &str,
    cancel_after: Option<Duration>,
) -> (dsh_subagent_api::SubagentResult, Vec<ChildUpdate>, RemoteChild) {
    let dir = tempfile::tempdir().unwrap();
    let config = AcpConfig::new(agent())
        .args([mode])
        .cwd(dir.path())
        .cancel_grace(Duration::from_millis(500));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let provider = AcpProvider::new(config)
        .unwrap()
        .with_progress(move |_run, update| sink.lock().unwrap().push(update.clone()));
    let records = Arc::new(Records::default());
    let parent = AgentRef::new("parent").with_child_log(records.clone());
    let cancel = CancellationToken::new();
    let mut run = provider
        .start(StartRequest::text("go", parent, cancel.clone()))
        .await
        .unwrap();
    if let Some(after) = cancel_after {
        tokio::time::sleep(after).await;
        cancel.cancel();
    }
    let result = tokio::time::timeout(GUARD, run.result()).await.unwrap().unwrap();
    tokio::time::timeout(GUARD, run.dispose()).await.unwrap().unwrap();
    let reports = reports.lock().unwrap().clone();
    let record = records.0.lock().unwrap().last().cloned().unwrap();
    (result, reports, record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_subagents_are_kept_reported_and_recorded_and_its_faults_change_nothing() {
    let (result, reports, record) = run("subagents", None).await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.text(), "both done", "subagents' text is not the answer");
    let sessions: Vec<_> = record
        .subagents
        .iter()
        .map(|sub| {
            (
                sub.session.as_str(),
                sub.parent.as_deref(),
                sub.label.as_deref(),
                sub.task.as_deref(),
                sub.stop.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        sessions,
        [
            (
                "sub-reader",
                None,
                Some("reader"),
                Some("the reader's task"),
                Some("completed")
            ),
            (
                "sub-writer",
                None,
                Some("writer"),
                Some("the writer's task"),
                Some("error: disk full")
            ),
            (
                "sub-helper",
                Some("sub-reader"),
                Some("helper"),
                Some("the helper's task"),
                Some("completed")
            ),
        ]
    );
    let kinds: Vec<String> = reports
        .iter()
        .filter_map(|update| match update {
            ChildUpdate::Subagent { session, .. } => Some(format!("+{session}")),
            ChildUpdate::SubagentEnded { session, stop } => Some(format!("-{session} {stop}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "+sub-reader",
            "+sub-writer",
            "+sub-helper",
            "-sub-helper completed",
            "-sub-reader completed",
            "-sub-writer error: disk full",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announce_flood_is_bounded_and_closed_as_disconnected() {
    let (result, _, record) = run("subagent-flood", None).await;
    assert_eq!(result.text(), "flooded");
    assert_eq!(record.subagents.len(), MAX_SUBAGENT_SESSIONS);
    assert!(
        record
            .subagents
            .iter()
            .all(|sub| sub.stop.as_deref() == Some("disconnected"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_childs_subagents_end_before_its_run_does() {
    let (result, _, record) = run("subagent-cancel", Some(Duration::from_millis(300))).await;
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(record.subagents.len(), 1);
    assert_eq!(record.subagents[0].stop.as_deref(), Some("cancelled"));
}
