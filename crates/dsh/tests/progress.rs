//! What `dsh run` shows of its children on stderr: every child's start and
//! end, whatever its provider, an ACP child's included. Offline: the parent
//! and the `dsh acp` child run scripted models.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{DSH, dsh};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The parent asks the ACP child `subagent_remote`, then repeats its answer.
const PARENT_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "Parent heard: {{last_tool_result}}"}}
]}"#;

const CHILD_SCRIPT: &str = r#"{"rules": [{"when": {}, "reply": {"text": "remote dsh acp here"}}]}"#;

#[test]
fn dsh_run_shows_an_acp_childs_start_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.json", PARENT_SCRIPT);
    let child = write(dir.path(), "child.json", CHILD_SCRIPT);
    // Not `dsh.toml`: the child runs in the same directory and must not
    // mount itself again.
    let config = write(
        dir.path(),
        "parent.toml",
        &format!(
            r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {DSH:?}
args = ["acp", "--quiet", "--script", {child:?}]
max_depth = "provider-managed"
"#
        ),
    );
    let output = dsh(dir.path(), &["run", "--config", &config, "--script", &parent, "go"]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Parent heard: remote dsh acp here\n"
    );

    let lines: Vec<&str> = stderr.lines().collect();
    let started = lines
        .iter()
        .position(|line| {
            line.starts_with("↳ subagent \"ask the remote\" started (acp-") && line.ends_with(", acp:subagent_remote)")
        })
        .unwrap_or_else(|| panic!("no start line:\n{stderr}"));
    let ended = lines
        .iter()
        .position(|line| line.starts_with("↳ subagent \"ask the remote\" completed · "))
        .unwrap_or_else(|| panic!("no end line:\n{stderr}"));
    assert!(started < ended, "{stderr}");
    // Its model calls happened in another process: the line claims none, only
    // the stop reason and the time.
    let seconds = lines[ended]
        .strip_prefix("↳ subagent \"ask the remote\" completed · ")
        .and_then(|rest| rest.strip_suffix('s'))
        .unwrap();
    assert!(seconds.parse::<f64>().is_ok(), "{}", lines[ended]);

    // Its transcript is not in this data directory, so the summary names
    // only the parent's.
    let summary = lines
        .iter()
        .find(|line| line.starts_with("dsh: transcripts in "))
        .unwrap();
    assert!(summary.contains(" (parent); read one with"), "{summary}");
    assert!(!summary.contains("acp-"), "{summary}");
}

/// The `dsh acp` child's own parent agent delegates once before it answers.
const DELEGATING_CHILD_SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "looked"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "look it up", "prompt": "look"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "remote done"}}
]}"#;

#[test]
fn dsh_run_counts_the_tool_calls_an_acp_child_reported() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.json", PARENT_SCRIPT);
    let child = write(dir.path(), "child.json", DELEGATING_CHILD_SCRIPT);
    let config = write(
        dir.path(),
        "parent.toml",
        &format!(
            r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {DSH:?}
args = ["acp", "--quiet", "--script", {child:?}]
max_depth = "provider-managed"
"#
        ),
    );
    let output = dsh(dir.path(), &["run", "--config", &config, "--script", &parent, "go"]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Parent heard: remote done\n");
    // Its model calls happened in another process; the tool call it made
    // there, its provider forwarded.
    let ended = stderr
        .lines()
        .find(|line| line.starts_with("↳ subagent \"ask the remote\" completed"))
        .unwrap_or_else(|| panic!("no end line:\n{stderr}"));
    assert!(
        ended.starts_with("↳ subagent \"ask the remote\" completed · 1 tool call · "),
        "{ended}"
    );
}
