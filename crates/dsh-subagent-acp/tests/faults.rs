//! The provider against a deliberately faulty ACP agent (`acp-fault-agent`):
//! every fault ends as a bounded result or a clear start error, and no
//! process of the child's group remains afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_subagent_acp::{AcpConfig, AcpProvider, PermissionPolicy};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, StopReason, SubagentProvider};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// A hang guard, far above any grace period used here.
const GUARD: Duration = Duration::from_secs(30);

mod common;

use common::{Mounted, agent};

/// A config for one mode with small graces and a pid file in `dir`.
fn config(dir: &Path, mode: &str) -> AcpConfig {
    AcpConfig::new(agent())
        .args([mode])
        .env("FAULT_AGENT_PID_FILE", pid_file(dir).display().to_string())
        .cwd(dir)
        .startup_timeout(Duration::from_secs(10))
        .cancel_grace(Duration::from_millis(300))
        .eof_grace(Duration::from_millis(500))
        .term_grace(Duration::from_millis(500))
}

fn pid_file(dir: &Path) -> PathBuf {
    dir.join("agent.pid")
}

/// The child's process group (it is the group leader), if it ever started.
fn group(dir: &Path) -> Option<Pid> {
    let pid = std::fs::read_to_string(pid_file(dir)).ok()?;
    Some(Pid::from_raw(pid.trim().parse().unwrap()))
}

/// Asserts that the child ran and that nothing of its process group remains.
fn assert_group_gone(dir: &Path) {
    let pgid = group(dir).expect("the child wrote its pid");
    assert_eq!(
        killpg(pgid, None),
        Err(Errno::ESRCH),
        "process group {pgid} still exists"
    );
}

/// One delegation through the `subagent_acp` tool; returns what the model sees.
async fn delegate(config: AcpConfig, prompt: &str) -> String {
    let mounted = Mounted::new(config);
    let call = mounted.call("fault", prompt, CancellationToken::new());
    tokio::time::timeout(GUARD, call)
        .await
        .expect("the delegation settled")
        .text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_child_answers_with_its_streamed_text() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "echo"), "ping").await;
    assert_eq!(text, "echo: ping");
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_reasons_map_and_partial_text_is_kept() {
    let cases = [
        (
            "stop=max_tokens",
            "Error: subagent run hit its token limit before finishing\nPartial output before the run ended:\npartial",
        ),
        (
            "stop=refusal",
            "Error: subagent declined the task\nPartial output before the run ended:\npartial",
        ),
        (
            "stop=cancelled",
            "Error: subagent run was cancelled\nPartial output before the run ended:\npartial",
        ),
        (
            "stop=max_turn_requests",
            "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child ended the turn with stop reason max_turn_requests\nPartial output before the run ended:\npartial",
        ),
    ];
    for (mode, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(delegate(config(dir.path(), mode), "p").await, expected, "{mode}");
        assert_group_gone(dir.path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_stop_reason_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "stop=frobnicated"), "p").await;
    assert!(
        text.starts_with(
            "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child ended the turn with an unknown stop reason \"frobnicated\""
        ),
        "{text}"
    );
    assert!(
        text.ends_with("Partial output before the run ended:\npartial"),
        "{text}"
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_exits_mid_turn_fails_with_its_exit_code_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "exit-mid-turn"), "p").await;
    assert_eq!(
        text,
        "Error: subagent run failed\n\
         Diagnostic: ACP stage session/prompt: the child closed the connection before answering (child process: exit code 3)\n\
         child stderr (tail):\n\
         fault agent: crashing mid-turn\n\
         Partial output before the run ended:\n\
         partial answer"
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_dies_at_initialize_rejects_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "exit-at-init"), "p").await;
    assert_eq!(
        text,
        "Error: subagent ACP child failed to start: ACP stage initialize: the child closed the connection before answering (child process: exit code 7)\n\
         child stderr (tail):\n\
         fault agent: cannot start (exit-at-init)"
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_never_answers_initialize_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "silent-init").startup_timeout(Duration::from_millis(300));
    let text = delegate(config, "p").await;
    assert_eq!(
        text,
        "Error: subagent ACP child failed to start: ACP stage initialize: no answer within the startup timeout (300 ms)"
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_on_stdout_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "not-json"), "p").await;
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child wrote a line to stdout that is not JSON"
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_method_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "unknown-method"), "p").await;
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child called an unsupported method \"frobnicate/now\""
    );
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_answer_text_is_cut_at_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "flood").max_output_bytes(dsh_subagent_acp::ByteLimit::new(64 * 1024).unwrap());
    let text = delegate(config, "p").await;
    let (headline, partial) = text.split_once("\nPartial output before the run ended:\n").unwrap();
    assert_eq!(
        headline,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child streamed more than 65536 bytes of answer text"
    );
    assert!(partial.len() <= 64 * 1024 && partial.bytes().all(|b| b == b'x'));
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_line_is_cut_at_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "flood-line").max_line_bytes(dsh_subagent_acp::ByteLimit::new(64 * 1024).unwrap());
    let text = delegate(config, "p").await;
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the child wrote a protocol line longer than 65536 bytes"
    );
    assert_group_gone(dir.path());
}

fn start_request(prompt: &str, cancel: &CancellationToken) -> StartRequest {
    StartRequest::text(prompt, AgentRef::new("parent"), cancel.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_sends_session_cancel_and_settles_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let provider = AcpProvider::new(config(dir.path(), "cancel-ok")).unwrap();
    let cancel = CancellationToken::new();
    let mut run = provider.start(start_request("p", &cancel)).await.unwrap();
    assert!(run.id().starts_with("acp-"));
    // Cancel once the child is in its turn (it wrote its pid before that).
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel.cancel();
    let result = tokio::time::timeout(GUARD, run.result()).await.unwrap().unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(result.text(), "started");
    assert_eq!(result.diagnostic, None, "the child acknowledged the cancel");
    tokio::time::timeout(GUARD, run.dispose()).await.unwrap().unwrap();
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_ignores_cancel_eof_and_sigterm_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    // `trap '' TERM` is inherited across exec: the agent ignores SIGTERM too.
    let mut config = config(dir.path(), "ignore-cancel");
    config.program.command = "sh".into();
    config.program.args = vec![
        "-c".into(),
        "trap '' TERM; exec \"$0\" ignore-cancel".into(),
        agent().into(),
    ];
    let provider = AcpProvider::new(config).unwrap();
    let cancel = CancellationToken::new();
    let mut run = provider.start(start_request("p", &cancel)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel.cancel();
    let result = tokio::time::timeout(GUARD, run.result()).await.unwrap().unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(result.text(), "working");
    assert_eq!(
        result.diagnostic.as_deref(),
        Some(
            "ACP stage session/cancel: the child did not end the turn within 300 ms of session/cancel; it was stopped at release"
        )
    );
    assert!(
        killpg(group(dir.path()).unwrap(), None).is_ok(),
        "still running before release"
    );
    tokio::time::timeout(GUARD, run.dispose()).await.unwrap().unwrap();
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_request_spawns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let provider = AcpProvider::new(config(dir.path(), "echo")).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let error = provider.start(start_request("p", &cancel)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "subagent request was aborted before the ACP child started"
    );
    assert_eq!(error.code(), "ABORTED");
    assert!(group(dir.path()).is_none(), "nothing was spawned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_during_the_handshake_rejects_after_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let provider = AcpProvider::new(config(dir.path(), "silent-init")).unwrap();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let error = tokio::time::timeout(GUARD, provider.start(start_request("p", &cancel)))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code(), "ABORTED");
    assert!(
        error.to_string().contains("while the ACP child was starting"),
        "{error}"
    );
    // The start returns at the cancellation, right after SIGKILLing the
    // group; the kernel and the child's waiter finish within moments.
    let pgid = group(dir.path()).expect("the child wrote its pid");
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while killpg(pgid, None).is_ok() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_group_gone(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_be_spawned_rejects_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let provider = AcpProvider::new(AcpConfig::new(dir.path().join("no-such-agent"))).unwrap();
    let error = provider
        .start(start_request("p", &CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "ACP_SPAWN_FAILED");
    assert!(
        error
            .to_string()
            .starts_with("subagent ACP child could not be started: `"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_gets_a_scrubbed_environment_and_the_configured_cwd() {
    let dir = tempfile::tempdir().unwrap();
    // Cargo sets CARGO_PKG_NAME for this test process; it must not leak.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    let scrubbed = config(dir.path(), "env").env("DSH_MODEL", "m");
    let text = delegate(scrubbed, "p").await;
    let (names, cwd) = text.strip_prefix("env: ").unwrap().split_once("; cwd: ").unwrap();
    let names: Vec<&str> = names.split(',').collect();
    assert!(names.contains(&"PATH") && names.contains(&"DSH_MODEL"), "{names:?}");
    assert!(!names.contains(&"CARGO_PKG_NAME"), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| dsh_subagent_acp::BASE_ENV.contains(n) || ["DSH_MODEL", "FAULT_AGENT_PID_FILE"].contains(n)),
        "{names:?}"
    );
    assert_eq!(
        Path::new(cwd).canonicalize().unwrap(),
        dir.path().canonicalize().unwrap()
    );

    let inherited = config(dir.path(), "env").pass_env("CARGO_PKG_NAME");
    let text = delegate(inherited, "p").await;
    assert!(text.contains("CARGO_PKG_NAME"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_requests_are_answered_by_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let text = delegate(config(dir.path(), "permission"), "p").await;
    assert_eq!(text, "granted reject-1", "reject is the default");
    let allow = config(dir.path(), "permission").permission(PermissionPolicy::AllowFirst);
    assert_eq!(delegate(allow, "p").await, "granted allow-1");
    assert_group_gone(dir.path());
}
