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
