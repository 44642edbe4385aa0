//! `dsh mcp` on stdio under an rmcp client, as an MCP host drives it: for
//! the tests of its sessions, tasks and restarts.
#![allow(dead_code)]

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use serde_json::Value;
use tokio::process::{Child, Command};

const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// A hang guard, far above anything these tests wait for.
pub(crate) const GUARD: Duration = Duration::from_secs(60);

/// One `dsh mcp` process and its client.
pub(crate) struct McpSession {
    pub(crate) child: Child,
    client: RunningService<RoleClient, ()>,
}

impl McpSession {
    /// `dsh mcp --quiet <args>` in `dir`, offline (no model endpoint in its
    /// environment), in a process group of its own, killed when dropped.
    pub(crate) async fn start(dir: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(DSH)
            .args(["mcp", "--quiet"])
            .args(args)
            .current_dir(dir)
            .env_remove("DSH_API_KEY")
            .env_remove("DSH_BASE_URL")
            .env_remove("DSH_MODEL")
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = tokio::time::timeout(GUARD, ().serve(transport)).await.unwrap().unwrap();
        Self { child, client }
    }

    /// Calls `tool` with `args` (an object): the result's text blocks, one
    /// per line, and whether it is an error.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> (String, bool) {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let result = tokio::time::timeout(GUARD, self.client.peer().call_tool(request))
            .await
            .unwrap()
            .unwrap();
        let text = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.clone()))
            .collect::<Vec<_>>()
            .join("\n");
        (text, result.is_error == Some(true))
    }

    /// [`McpSession::call`] of a call that must succeed: its text.
    pub(crate) async fn answer(&self, tool: &str, args: Value) -> String {
        let (text, is_error) = self.call(tool, args).await;
        assert!(!is_error, "{tool}: {text}");
        text
    }

    /// Kills the process (SIGKILL), as a crash would.
    pub(crate) async fn crash(mut self) {
        self.child.kill().await.unwrap();
        let _ = self.child.wait().await;
    }

    /// Ends the session as a host does (its client goes, stdin closes);
    /// returns how `dsh mcp` exited.
    pub(crate) async fn close(mut self) -> ExitStatus {
        let _ = self.client.cancel().await;
        tokio::time::timeout(GUARD, self.child.wait()).await.unwrap().unwrap()
    }
}
