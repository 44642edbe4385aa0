//! `dsh check acp`: against `dsh acp` (every requirement passes, its
//! subagent sessions following the Subagents RFD), and against agents that
//! break at each step (`acp-fault-agent`): a command that does not exist,
//! one that exits at once, writes garbage or megabytes to stdout, or never
//! answers `initialize`, and subagent updates out of order. Each ends with
//! a clear report line, a non-zero exit, and no process left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{DSH, dsh};
use serde_json::Value;

fn agent() -> String {
    dsh_test_programs::Program::AcpFaultAgent
        .path()
        .into_os_string()
        .into_string()
        .unwrap()
}

/// `dsh check acp --json` of `command` in `dir`: its exit code and report.
fn check(dir: &Path, command: &[&str], flags: &[&str]) -> (i32, Value) {
    let mut args = vec!["check", "acp", "--json"];
    args.extend(flags);
    args.push("--");
    args.extend(command);
    let output = dsh(dir, &args);
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code().unwrap(), report)
}

/// The finding of requirement `id`: (status, detail).
fn finding<'a>(report: &'a Value, id: &str) -> (&'a str, &'a str) {
    let found = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"));
    (
        found["status"].as_str().unwrap(),
        found["detail"].as_str().unwrap_or_default(),
    )
}

#[test]
fn dsh_acp_passes_every_requirement_and_its_verdict_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report) = check(dir.path(), &[DSH, "acp", "--quiet"], &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        (report["version"].as_u64(), report["verdict"].as_str()),
        (Some(1), Some("PASS"))
    );
    for finding in report["findings"].as_array().unwrap() {
        let skipped = finding["id"] == "acp.authenticate";
        let expect = if skipped { "SKIPPED" } else { "PASS" };
        assert_eq!(finding["status"], expect, "{finding:#}");
    }
    // The table, as a person reads it.
    let table = dsh(dir.path(), &["check", "acp", "--", DSH, "acp", "--quiet"]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.ends_with("verdict: PASS\n"), "{text}");
    assert!(text.contains("MANDATORY  PASS    acp.cancel"), "{text}");
    // `dsh config check` names the saved verdict of a configured child.
    let toml = format!(
        "[[subagents]]\nprovider = \"acp\"\ntool_name = \"subagent_dsh\"\ncommand = {DSH:?}\nargs = [\"acp\", \"--quiet\"]\nmax_depth = \"provider-managed\"\n"
    );
    std::fs::write(dir.path().join("other.toml"), toml).unwrap();
    let checked = dsh(dir.path(), &["config", "check", "--config", "other.toml"]);
    let stderr = String::from_utf8(checked.stderr).unwrap();
    assert!(checked.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "dsh: ACP child of subagent_dsh ({DSH} acp --quiet): last check PASS ("
        )),
        "{stderr}"
    );
    let probed = dsh(dir.path(), &["config", "check", "--config", "other.toml", "--probe"]);
    let stderr = String::from_utf8(probed.stderr).unwrap();
    assert!(probed.status.success(), "{stderr}");
    assert!(
        stderr.contains("dsh: ACP child of subagent_dsh, checked now:\nconformance of"),
        "{stderr}"
    );
}

#[test]
fn a_configured_child_never_checked_is_named_so() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[[subagents]]\nprovider = \"acp\"\ntool_name = \"subagent_x\"\ncommand = \"x-agent\"\nmax_depth = \"provider-managed\"\n";
    std::fs::write(dir.path().join("other.toml"), toml).unwrap();
    let checked = dsh(dir.path(), &["config", "check", "--config", "other.toml"]);
    let stderr = String::from_utf8(checked.stderr).unwrap();
    assert!(
        stderr.contains("dsh: ACP child of subagent_x (x-agent): no saved check; `dsh check acp -- x-agent` or `dsh config check --probe` checks it"),
        "{stderr}"
    );
    let probed = dsh(dir.path(), &["config", "check", "--config", "other.toml", "--probe"]);
    assert_eq!(probed.status.code(), Some(1));
    let stderr = String::from_utf8(probed.stderr).unwrap();
    assert!(stderr.contains("cannot start `x-agent`"), "{stderr}");
    assert!(
        stderr.ends_with("dsh config check: the check of the ACP child of subagent_x failed\n"),
        "{stderr}"
    );
}

#[test]
fn each_bad_agent_is_one_clear_line_and_a_failing_exit() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let cases: [(&[&str], &[&str], &str, &str); 6] = [
        (
            &["/nonexistent/agent"],
            &[],
            "acp.start",
            "cannot start `/nonexistent/agent`: No such file or directory (os error 2)",
        ),
        (
            &[&agent, "exit-at-init"],
            &[],
            "acp.initialize",
            "the agent closed its stdout before answering initialize (it ended: exit code 7); its last stderr line: fault agent: cannot start (exit-at-init)",
        ),
        (
            &[&agent, "silent-init"],
            &["--timeout", "1s"],
            "acp.initialize",
            "initialize was not answered within 1 s",
        ),
        (
            &[&agent, "not-json"],
            &[],
            "acp.prompt",
            "the agent wrote a line to stdout that is not JSON before answering session/prompt: \"this line is not JSON\"",
        ),
        (
            &[&agent, "flood-line"],
            &[],
            "acp.prompt",
            "the agent wrote a line longer than 1 MiB to stdout before answering session/prompt",
        ),
        (
            &[&agent, "flood"],
            &[],
            "acp.prompt",
            "the agent wrote more than 8 MiB to stdout without answering session/prompt",
        ),
    ];
    for (command, flags, id, seen) in cases {
        let (code, report) = check(dir.path(), command, flags);
        assert_eq!(code, 1, "{command:?}: {report:#}");
        assert_eq!(report["verdict"], "FAIL");
        assert_eq!(finding(&report, id), ("FAIL", seen), "{command:?}");
        if id != "acp.start" {
            // Whatever it did, nothing of it is left.
            assert_eq!(finding(&report, "acp.teardown").0, "PASS", "{report:#}");
        }
    }
}

#[test]
fn an_agent_that_ignores_cancel_and_end_of_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let (code, report) = check(dir.path(), &[&agent, "ignore-cancel"], &["--timeout", "1s"]);
    assert_eq!(code, 1);
    assert_eq!(
        finding(&report, "acp.cancel"),
        (
            "FAIL",
            "the cancelled session/prompt was not answered within 5 s: a cancelled turn must end, with stopReason cancelled"
        )
    );
    assert_eq!(
        finding(&report, "acp.exit-at-eof"),
        ("FAIL", "still running 500 ms after its stdin closed; SIGTERM ended it")
    );
    assert_eq!(finding(&report, "acp.teardown"), ("PASS", "gone after SIGTERM"));
}

#[test]
fn the_table_of_an_agent_that_dies_at_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let output = dsh(dir.path(), &["check", "acp", "--", &agent, "exit-at-init"]);
    assert_eq!(output.status.code(), Some(1));
    let table = String::from_utf8(output.stdout)
        .unwrap()
        .replace(&agent, "<acp-fault-agent>");
    insta::assert_snapshot!(table);
    let stderr = String::from_utf8(output.stderr)
        .unwrap()
        .replace(&agent, "<acp-fault-agent>");
    assert_eq!(
        stderr,
        "dsh check acp: <acp-fault-agent> exit-at-init failed acp.initialize\n"
    );
}

/// A parent that asks two children at once, each of which asks one more.
const DELEGATING: &str = r#"{"rules": [
  {"when": {"last_user_contains": "deepest"}, "reply": {"text": "deep", "delay_ms": 200}},
  {"when": {"last_user_contains": "middle", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "grandkid", "prompt": "deepest"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "done"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "kid one", "prompt": "middle one"}},
    {"name": "subagent", "arguments": {"description": "kid two", "prompt": "middle two"}}]}}
]}"#;

#[test]
fn dsh_acp_that_delegates_announces_its_children_as_the_rfd_asks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), DELEGATING).unwrap();
    std::fs::write(
        dir.path().join("nested.toml"),
        "[[subagents]]\nprovider = \"spawn\"\nmax_depth = 2\n",
    )
    .unwrap();
    let command = [
        DSH,
        "acp",
        "--quiet",
        "--config",
        "nested.toml",
        "--script",
        "script.json",
    ];
    let (code, report) = check(dir.path(), &command, &[]);
    assert_eq!(code, 0, "{report:#}");
    let (status, detail) = finding(&report, "acp.subagents-rfd");
    assert_eq!(status, "PASS", "{report:#}");
    // Two kids and their two grandkids in the first prompt; the cancelled
    // one may start some before the cancel reaches them.
    let announced: usize = detail.split(' ').next().unwrap().parse().unwrap();
    assert!(announced >= 4, "{detail}");
    assert!(
        detail.contains("subagents announced, each on its parent's session before its own updates, each run ended once after its last update (idle: end_turn "),
        "{detail}"
    );
}

#[test]
fn subagent_updates_out_of_order_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let cases = [
        (
            "subagents",
            "`sub-writer` ended twice: an idle state after its terminal one; agent_message_chunk on `sub-stranger`, a session neither opened by the client nor announced",
        ),
        (
            "subagent-late",
            "agent_message_chunk on `sub-early` came before its announcement: a subagent is announced on its parent's session before any update bearing its id; session/prompt answered end_turn while its subagent `sub-open` had not ended: each announced subagent ends, with its terminal state, before its parent's prompt returns; agent_message_chunk bearing `sub-early`'s id came after its terminal state",
        ),
    ];
    for (mode, seen) in cases {
        let (code, report) = check(dir.path(), &[&agent, mode], &[]);
        assert_eq!(code, 1, "{mode}: {report:#}");
        assert_eq!(finding(&report, "acp.subagents-rfd"), ("FAIL", seen), "{mode}");
        assert_eq!(finding(&report, "acp.prompt").0, "PASS", "{mode}: {report:#}");
    }
    // Told apart from an agent that announces nothing.
    let (code, report) = check(dir.path(), &[&agent, "echo"], &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        finding(&report, "acp.subagents-rfd"),
        (
            "SKIPPED",
            "the agent announced no subagent (the check advertised clientCapabilities.subagents, as dsh does)"
        )
    );
}
