//! The habits of real ACP product adapters, reproduced by `acp-fault-agent`
//! flags: authentication, children that ignore end-of-input, grandchildren
//! left behind, JSON-RPC errors with `data`, coloured stderr. Each case pins
//! the exact text and bounds the time with a generous margin (the real
//! figures are in `docs/benchmarks.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_subagent_acp::{AcpAuth, AcpConfig};
use dsh_subagent_api::CancellationToken;

/// A hang guard, far above any wait of the default configuration.
const GUARD: Duration = Duration::from_secs(40);

mod common;

use common::{Mounted, agent};

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
    let mounted = Mounted::new(config);
    let cancel = CancellationToken::new();
    if let Some(after) = cancel_after {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            cancel.cancel();
        });
    }
    let began = Instant::now();
    let call = mounted.call("adapter", "p", cancel);
    let text = tokio::time::timeout(GUARD, call)
        .await
        .expect("the delegation settled")
        .text;
    (text, began.elapsed())
}

/// The members of process group `pgid` that still run (zombies excluded),
/// per `/proc`.
fn running_members(pgid: i32) -> Vec<i32> {
    let mut running = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = tail.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && !["Z", "X"].contains(&fields[0]) {
            running.push(head.split_once(" (").unwrap().0.parse().unwrap());
        }
    }
    running
}

/// Asserts that the child ran and that nothing of its process group still runs.
fn assert_nothing_runs(dir: &Path) {
    let pgid: i32 = std::fs::read_to_string(pid_file(dir))
        .expect("the child wrote its pid")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        running_members(pgid),
        Vec::<i32>::new(),
        "process group {pgid} still runs"
    );
}

/// Prints a case's time (`-- --nocapture` shows them; `docs/benchmarks.md` quotes them).
fn report(case: &str, took: Duration) {
    eprintln!("[timing] {case}: {} ms", took.as_millis());
}

/// Generous bounds (the machine may be busy); the real figures are in
/// `docs/benchmarks.md`. Before these fixes the same cases took 5–8 s.
const FAILURE_BOUND: Duration = Duration::from_millis(2500);
const CANCEL_BOUND: Duration = Duration::from_millis(2000);

#[test]
fn the_default_ladder_fits_inside_the_tools_release_grace() {
    let config = AcpConfig::new("agent");
    assert!(
        config.longest_release() + Duration::from_millis(500) < dsh_tool_subagent::RELEASE_GRACE,
        "{:?}",
        config.longest_release()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_requires_authentication_lists_its_methods() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(config(dir.path(), "echo", &["--auth", "--ignore-eof"]), None).await;
    insta::assert_snapshot!("auth_required_unconfigured", text);
    assert!(took < FAILURE_BOUND, "{took:?}");
    report("failed start, auth required, child ignores EOF", took);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_by_env_var_or_by_id_opens_the_session() {
    for auth in [AcpAuth::FirstEnvVar, AcpAuth::Method("fault-key".into())] {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), "echo", &["--auth", "--ignore-eof"])
            .env("FAULT_AGENT_KEY", "k")
            .auth(auth.clone());
        let (text, _) = delegate(config, None).await;
        assert_eq!(text, "echo: p", "{auth:?}");
        assert_nothing_runs(dir.path());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_var_choice_without_its_variable_says_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "echo", &["--auth", "--ignore-eof"]).auth(AcpAuth::FirstEnvVar);
    let (text, _) = delegate(config, None).await;
    insta::assert_snapshot!("auth_required_env_var_unset", text);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_the_child_does_not_offer_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "echo", &["--auth", "--ignore-eof"]).auth(AcpAuth::Method("sso".into()));
    let (text, _) = delegate(config, None).await;
    insta::assert_snapshot!("auth_method_not_offered", text);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_authentication_reports_the_childs_error() {
    let dir = tempfile::tempdir().unwrap();
    // The method is offered, but its variable is not set: the child refuses `authenticate`.
    let config = config(dir.path(), "echo", &["--auth", "--ignore-eof"]).auth(AcpAuth::Method("agent-login".into()));
    let (text, _) = delegate(config, None).await;
    insta::assert_snapshot!("auth_refused", text);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_data_is_quoted_and_stderr_loses_its_colours() {
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(
        config(dir.path(), "error-data", &["--ignore-eof", "--color-stderr"]),
        None,
    )
    .await;
    insta::assert_snapshot!("error_data_coloured_stderr", text);
    report("failed run, error with data, child ignores EOF", took);
    assert!(!text.contains('\u{1b}'));
    assert!(took < FAILURE_BOUND, "{took:?}");
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_reply_invents_no_exit_and_waits_for_none() {
    // `refuse` exits at once when its stdin closes, which we do after the
    // error: the exit is ours, not the cause, and is not reported.
    let dir = tempfile::tempdir().unwrap();
    let (text, took) = delegate(config(dir.path(), "refuse", &[]), None).await;
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the request failed: error -32603: Internal error"
    );
    assert!(took < Duration::from_millis(1000), "{took:?}");
    report("failed run, error reply, child exits at EOF", took);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_grandchild_left_as_a_zombie_does_not_hold_up_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let grandchild = dir.path().join("grandchild.pid");
    let config = config(dir.path(), "refuse", &["--ignore-eof", "--grandchild"])
        .env("FAULT_AGENT_GRANDCHILD_FILE", grandchild.display().to_string());
    let (text, took) = delegate(config, None).await;
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the request failed: error -32603: Internal error"
    );
    assert!(took < FAILURE_BOUND, "{took:?}");
    assert!(
        std::fs::read_to_string(&grandchild).is_ok(),
        "the grandchild was started"
    );
    report("failed run, grandchild left as a zombie, child ignores EOF", took);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_honoured_by_a_child_that_ignores_eof_returns_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let cancel_at = Duration::from_millis(300);
    let (text, took) = delegate(config(dir.path(), "cancel-ok", &["--ignore-eof"]), Some(cancel_at)).await;
    assert_eq!(
        text,
        "Error: subagent run was cancelled\nPartial output before the run ended:\nstarted"
    );
    assert!(took - cancel_at < CANCEL_BOUND, "{took:?}");
    report("cancel honoured, child ignores EOF (from the cancel)", took - cancel_at);
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_after_a_failed_start_keeps_the_starts_error() {
    let dir = tempfile::tempdir().unwrap();
    // The start fails within milliseconds; its release then waits for the
    // child, which ignores EOF, when the cancel arrives.
    let cancel_at = Duration::from_millis(150);
    let (text, took) = delegate(config(dir.path(), "echo", &["--auth", "--ignore-eof"]), Some(cancel_at)).await;
    insta::assert_snapshot!("auth_required_unconfigured", text);
    // Zero when the release was done before the cancel came (a loaded
    // machine can make the child go sooner): the start's error all the same.
    let after_cancel = took.saturating_sub(cancel_at);
    assert!(after_cancel < Duration::from_millis(500), "{took:?}");
    report("cancel during a failed start (from the cancel)", after_cancel);
    // The group was SIGKILLed at the cancellation; give the kernel a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_nothing_runs(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_outlives_its_timeout_is_cancelled_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let timed = config(dir.path(), "cancel-ok", &["--ignore-eof"]).turn_timeout(Duration::from_millis(300));
    let (text, took) = delegate(timed, None).await;
    insta::assert_snapshot!("turn_timeout_acknowledged", text);
    assert!(took < FAILURE_BOUND, "{took:?}");
    report("turn timeout 300 ms, child honours the cancel, ignores EOF", took);
    assert_nothing_runs(dir.path());

    let dir = tempfile::tempdir().unwrap();
    let ignoring = config(dir.path(), "ignore-cancel", &[])
        .turn_timeout(Duration::from_millis(300))
        .cancel_grace(Duration::from_millis(200));
    let (text, _) = delegate(ignoring, None).await;
    insta::assert_snapshot!("turn_timeout_ignored", text);
    assert_nothing_runs(dir.path());
}
