//! Log lines on stderr carry colour codes only when stderr is a terminal: a
//! parent that reads a `dsh acp` child's stderr (to quote its tail in a
//! diagnostic) gets plain text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["acp", "--quiet"])
        .env("DSH_LOG", "warn")
        .env_remove("NO_COLOR")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A line that is not JSON-RPC: the protocol layer logs a warning.
    child.stdin.take().unwrap().write_all(b"not json\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("WARN"), "a warning was logged: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "no escape sequences: {stderr:?}");
}

/// `dsh acp --quiet` answering `requests`, then stdin closed; its stderr.
fn quiet_acp_stderr(requests: &[serde_json::Value], log: Option<&str>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(["acp", "--quiet"])
        .env_remove("DSH_LOG")
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(log) = log {
        command.env("DSH_LOG", log);
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    // Let the answers go out before EOF ends the server.
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_quiet_acp_agent_that_answers_with_an_error_writes_nothing_on_stderr() {
    let requests = [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
            "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}}),
    ];
    assert_eq!(quiet_acp_stderr(&requests, None), "");
    // What the default filter hides: the SDK's warning about the error
    // response dsh sent on purpose.
    let shown = quiet_acp_stderr(&requests, Some("warn"));
    assert!(shown.contains("Sending error response"), "{shown}");
}
