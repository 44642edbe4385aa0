//! `dsh mcp` on stdio after a crash: the next `dsh mcp` on the same data
//! directory takes the session up again, and `task_output` of a task from
//! before gives its result (an interrupted child goes on to finish it),
//! never "unknown task". A session that ended cleanly leaves nothing to
//! take up. Offline: a scripted model whose child answers slowly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use mcp_session::McpSession;
use serde_json::json;

mod mcp_session;

/// The child answers after a while; the session's own tools are served.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "task_output"}, "reply": {"text": "THE-RESULT", "delay_ms": 1500}}
]}"#;

async fn start(dir: &std::path::Path) -> McpSession {
    McpSession::start(dir, &["--script", "script.json", "--data-dir", "data"]).await
}

#[tokio::test]
async fn a_task_from_before_a_crash_reads_its_result_in_the_next_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();

    let first = start(dir.path()).await;
    let started = first
        .answer(
            "subagent",
            json!({"description": "slow work", "prompt": "Work slowly.", "run_in_background": true}),
        )
        .await;
    assert!(started.contains("as task subagent-1"), "{started}");
    // The child is at work when the process dies.
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.crash().await;

    let second = start(dir.path()).await;
    let read = second
        .answer("task_output", json!({"task_id": "subagent-1", "wait": true}))
        .await;
    assert_eq!(read, "THE-RESULT\n[status: completed]");
    // New tasks do not repeat the ids the host read before.
    let next = second
        .answer(
            "subagent",
            json!({"description": "more", "prompt": "More.", "run_in_background": true}),
        )
        .await;
    assert!(!next.contains("task subagent-1"), "{next}");
    second.close().await;

    // A session that ended cleanly is not taken up again.
    let third = start(dir.path()).await;
    let (unknown, is_error) = third.call("task_output", json!({"task_id": "subagent-1"})).await;
    assert!(is_error && unknown.starts_with("Error:"), "{unknown}");
    third.close().await;
}
