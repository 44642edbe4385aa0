//! The client half against the test server: listing, calling, cancellation
//! reaching the server, a crash mid-call, start failures and release.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_mcp::{ClientOptions, HandshakeStep, McpMount, McpServerSpec, StartFailure};
use dsh_tools::{CancellationToken, RegistryError, ToolExecution, ToolRegistry};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use serde_json::json;

/// The test MCP server, built by `dsh-test-programs`.
fn server() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        dsh_test_programs::Program::McpTestServer
            .path()
            .into_os_string()
            .into_string()
            .unwrap()
    })
}

fn spec(name: &str, log: &Path, extra: &[&str]) -> McpServerSpec {
    let mut words = vec![
        "env".to_owned(),
        format!("MCP_TEST_LOG={}", log.display()),
        server().to_owned(),
    ];
    words.extend(extra.iter().map(|word| (*word).to_owned()));
    McpServerSpec::new(name, &words[0], &words[1..]).unwrap()
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_for_line(log: &Path, line: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !log_lines(log).iter().any(|l| l == line) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no line {line:?} in {:?}",
            log_lines(log)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn server_pid(log: &Path) -> Pid {
    let line = log_lines(log).into_iter().find(|l| l.starts_with("pid ")).unwrap();
    Pid::from_raw(line[4..].parse().unwrap())
}

async fn wait_group_gone(pgid: Pid) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while killpg(pgid, None) != Err(Errno::ESRCH) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process group {pgid} still exists"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn exec() -> ToolExecution {
    ToolExecution::new(CancellationToken::new())
}

fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    (dir, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_mount_under_the_mcp_prefix_with_the_servers_text() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&spec("t", &log, &[]), &tools, &ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(mount.server(), "t");
    assert_eq!(
        mount.tool_names(),
        [
            "mcp__t__echo",
            "mcp__t__slow",
            "mcp__t__crash",
            "mcp__t__fail",
            "mcp__t__big"
        ],
        "the tool whose name no model may call is skipped"
    );
    let echo = tools.get("mcp__t__echo").unwrap();
    assert_eq!(echo.description(), "Echo the text back.");
    assert_eq!(
        echo.parameters(),
        &json!({"type": "object", "properties": {"text": {"type": "string", "description": "What to echo."}}, "required": ["text"]})
    );
    mount.release().await.unwrap();
    assert!(tools.names().is_empty(), "release unmounts every tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_return_text_and_is_error_results_become_errors() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&spec("t", &log, &[]), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let ok = tools.call("mcp__t__echo", json!({"text": "hi"}), exec()).await;
    assert_eq!((ok.text.as_str(), ok.is_error), ("echo: hi", false));
    let failed = tools.call("mcp__t__fail", json!({}), exec()).await;
    assert_eq!(failed.text, "Error: the tool failed on purpose");
    let error = failed.error.unwrap();
    assert!(error.has_code(dsh_mcp::ErrorCode::ToolError));
    assert_eq!(error.code(), Some("MCP_TOOL_ERROR"));
    let bad = tools.call("mcp__t__echo", json!([1]), exec()).await;
    assert_eq!(
        bad.text,
        "Error: the arguments of mcp__t__echo must be an object, got an array"
    );
    mount.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_reaches_the_server() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&spec("t", &log, &[]), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let call = tokio::spawn({
        let tools = tools.clone();
        let exec = ToolExecution::new(cancel.clone());
        async move { tools.call("mcp__t__slow", json!({}), exec).await }
    });
    wait_for_line(&log, "started slow").await;
    cancel.cancel();
    let result = call.await.unwrap();
    assert_eq!(
        result.text,
        "Error: the call to MCP tool \"slow\" of server \"t\" was cancelled"
    );
    wait_for_line(&log, "cancelled slow").await;
    // The connection is still good after a cancellation.
    let ok = tools.call("mcp__t__echo", json!({"text": "again"}), exec()).await;
    assert_eq!(ok.text, "echo: again");
    mount.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_fails_its_tools_and_nothing_else() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let options = ClientOptions::default();
    let crashing = McpMount::start(&spec("crashy", &log, &[]), &tools, &options)
        .await
        .unwrap();
    let healthy = McpMount::start(&spec("ok", &log, &[]), &tools, &options).await.unwrap();
    let crashed = tools.call("mcp__crashy__crash", json!({}), exec()).await;
    assert_eq!(
        crashed.text,
        "Error: MCP server \"crashy\" exited during the call to its tool \"crash\" (it exited with exit code 3; its last stderr line: test server: crashing on purpose)"
    );
    let after = tools.call("mcp__crashy__echo", json!({"text": "x"}), exec()).await;
    assert_eq!(
        after.text,
        "Error: MCP server \"crashy\" is not running (it exited with exit code 3; its last stderr line: test server: crashing on purpose), so its tool \"echo\" cannot be called"
    );
    let other = tools.call("mcp__ok__echo", json!({"text": "still here"}), exec()).await;
    assert_eq!(other.text, "echo: still here");
    crashing.release().await.unwrap();
    healthy.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_cannot_start_name_themselves_and_the_cause() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let options = ClientOptions::default();
    let missing = McpServerSpec::new("nope", "/nonexistent/mcp-server", Vec::<String>::new()).unwrap();
    let error = McpMount::start(&missing, &tools, &options).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "MCP server \"nope\" failed to start: cannot run \"/nonexistent/mcp-server\": No such file or directory (os error 2)"
    );
    // The cause is typed, and the system's own error is its source.
    assert!(matches!(&error.cause, StartFailure::CannotRun { program, .. } if program == "/nonexistent/mcp-server"));
    let system = std::error::Error::source(&error)
        .and_then(std::error::Error::source)
        .and_then(|cause| cause.downcast_ref::<std::io::Error>());
    assert_eq!(system.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
    let refusing = McpMount::start(&spec("early", &log, &["--exit-at-start"]), &tools, &options)
        .await
        .unwrap_err();
    assert_eq!(
        refusing.to_string(),
        "MCP server \"early\" failed to start: it exited with exit code 4; its last stderr line: test server: refusing to start before answering initialize"
    );
    assert!(matches!(
        refusing.cause,
        StartFailure::ExitedBeforeAnswering {
            step: HandshakeStep::Initialize,
            ..
        }
    ));
    // The SDK's error for the step stays reachable below it.
    assert!(std::error::Error::source(&refusing.cause).is_some());
    let first = McpMount::start(&spec("dup", &log, &[]), &tools, &options)
        .await
        .unwrap();
    let second = McpMount::start(&spec("dup", &log, &[]), &tools, &options)
        .await
        .unwrap_err();
    assert_eq!(
        second.to_string(),
        "MCP server \"dup\" failed to start: a tool named \"mcp__dup__echo\" is already registered"
    );
    assert!(matches!(
        second.cause,
        StartFailure::Register(RegistryError::DuplicateName { .. })
    ));
    first.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_mount_releases_the_whole_process_group() {
    let (_dir, log) = temp_log();
    let tools = ToolRegistry::new();
    let mut spec = spec("t", &log, &["--grandchild"]);
    if let Some(launch) = spec.launch_mut() {
        *launch = launch
            .clone()
            .eof_grace(Duration::from_millis(200))
            .term_grace(Duration::from_millis(200));
    }
    let mount = McpMount::start(&spec, &tools, &ClientOptions::default()).await.unwrap();
    let pgid = server_pid(&log);
    assert_eq!(killpg(pgid, None), Ok(()));
    drop(mount);
    assert!(tools.names().is_empty());
    // The server exits at EOF, its grandchild only at SIGTERM to the group.
    wait_group_gone(pgid).await;
}
