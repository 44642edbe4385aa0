//! `dsh mcp` on stdio after a crash: the next `dsh mcp` on the same data
//! directory takes the session up again, and `task_output` of a task from
//! before gives its result (an interrupted child goes on to finish it),
//! never "unknown task". A session that ended cleanly leaves nothing to
//! take up. Offline: a scripted model whose child answers slowly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// A hang guard, far above anything these tests wait for.
const GUARD: Duration = Duration::from_secs(60);

/// The child answers after a while; the session's own tools are served.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "task_output"}, "reply": {"text": "THE-RESULT", "delay_ms": 1500}}
]}"#;

struct Session {
    child: Child,
    client: RunningService<RoleClient, ()>,
}

async fn start(dir: &Path) -> Session {
    let mut child = Command::new(DSH)
        .args(["mcp", "--quiet", "--script", "script.json", "--data-dir", "data"])
        .current_dir(dir)
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .env_remove("DSH_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = tokio::time::timeout(GUARD, ().serve(transport)).await.unwrap().unwrap();
    Session { child, client }
}

impl Session {
    async fn call(&self, tool: &str, args: Value) -> String {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        let result = tokio::time::timeout(
            GUARD,
            self.client
                .peer()
                .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
        )
        .await
        .unwrap()
        .unwrap();
        result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Kills the process (SIGKILL), as a crash would.
    async fn crash(mut self) {
        self.child.kill().await.unwrap();
        let _ = self.child.wait().await;
    }

    /// Closes stdin, as a host that ends the session does.
    async fn close(self) {
        let Session { mut child, client } = self;
        drop(client);
        let _ = tokio::time::timeout(GUARD, child.wait()).await;
    }
}

#[tokio::test]
async fn a_task_from_before_a_crash_reads_its_result_in_the_next_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();

    let first = start(dir.path()).await;
    let started = first
        .call(
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
        .call("task_output", json!({"task_id": "subagent-1", "wait": true}))
        .await;
    assert_eq!(read, "THE-RESULT\n[status: completed]");
    // New tasks do not repeat the ids the host read before.
    let next = second
        .call(
            "subagent",
            json!({"description": "more", "prompt": "More.", "run_in_background": true}),
        )
        .await;
    assert!(!next.contains("task subagent-1"), "{next}");
    second.close().await;

    // A session that ended cleanly is not taken up again.
    let third = start(dir.path()).await;
    let unknown = third.call("task_output", json!({"task_id": "subagent-1"})).await;
    assert!(unknown.starts_with("Error:"), "{unknown}");
    third.close().await;
}
