//! The habits of real ACP product adapters, reproduced by `acp-fault-agent`
//! flags: authentication, children that ignore end-of-input, grandchildren
//! left behind, JSON-RPC errors with `data`, coloured stderr. Each case pins
//! the exact text and bounds the time with a generous margin (the real
//! figures are in `docs/benchmarks.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_subagent::SubagentService;
use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_api::{AgentRef, CancellationToken};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{ToolExecution, ToolRegistry};
use serde_json::json;

/// A hang guard, far above any wait of the default configuration.
const GUARD: Duration = Duration::from_secs(40);

fn agent() -> &'static str {
    env!("CARGO_BIN_EXE_acp-fault-agent")
}

fn pid_file(dir: &Path) -> PathBuf {
    dir.join("agent.pid")
}

/// A config with every default except the mode, its flags and the pid file.
fn config(dir: &Path, mode: &str, flags: &[&str]) -> AcpConfig {
    AcpConfig::new(agent())
        .args(std::iter::once(mode).chain(flags.iter().copied()))
        .env("FAULT_AGENT_PID_FILE", pid_file(dir).display().to_string())
        .cwd(dir)
}

/// One delegation through the `subagent_acp` tool, cancelled after
/// `cancel_after` when given; what the model sees and how long it took.
async fn delegate(config: AcpConfig, cancel_after: Option<Duration>) -> (String, Duration) {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let _provider = service
        .register_provider(Arc::new(AcpProvider::new(config).unwrap()))
        .unwrap();
    let _tool = SubagentToolPlugin::apply(
        SubagentToolConfig::new("acp")
            .tool_name("subagent_acp")
            .max_depth(MaxDepth::ProviderManaged),
        &service,
        &tools,
    )
    .unwrap();
    let cancel = CancellationToken::new();
    if let Some(after) = cancel_after {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            cancel.cancel();
        });
    }
    let exec = ToolExecution::new(cancel).with_agent(AgentRef::new("parent"));
    let began = Instant::now();
    let call = tools.call("subagent_acp", json!({"description": "adapter", "prompt": "p"}), exec);
    let text = tokio::time::timeout(GUARD, call).await.expect("the delegation settled").text;
    (text, began.elapsed())
}

fn report(case: &str, text: &str, took: Duration) {
    eprintln!("[timing] {case}: {} ms\n{text}\n", took.as_millis());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_failed_start_auth_required_ignoring_eof() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(config(dir.path(), "echo", &["--auth", "--ignore-eof"]), None).await;
    report("failed start (auth required, ignores EOF)", &text, took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_failed_run_error_data_ignoring_eof() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(config(dir.path(), "error-data", &["--ignore-eof", "--color-stderr"]), None).await;
    report("failed run (error with data, ignores EOF)", &text, took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_failed_run_with_grandchild() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(config(dir.path(), "refuse", &["--ignore-eof", "--grandchild"]), None).await;
    report("failed run (refuse, grandchild, ignores EOF)", &text, took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_cancel_honoured_ignoring_eof() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(
        config(dir.path(), "cancel-ok", &["--ignore-eof"]),
        Some(Duration::from_millis(300)),
    )
    .await;
    report("cancel honoured (ignores EOF), cancel at 300 ms", &text, took);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_cancel_after_failed_start() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(
        config(dir.path(), "echo", &["--auth", "--ignore-eof"]),
        Some(Duration::from_millis(300)),
    )
    .await;
    report("cancel at 300 ms after a failed start", &text, took);
}
