//! `dsh check acp`: against `dsh acp` (every requirement passes), and
//! against agents that break at each step (`acp-fault-agent`): a command
//! that does not exist, one that exits at once, writes garbage or
//! megabytes to stdout, or never answers `initialize`. Each ends with a
//! clear report line, a non-zero exit, and no process left.
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
        let skipped = ["acp.authenticate", "acp.subagents-rfd"].contains(&finding["id"].as_str().unwrap());
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
            &["--timeout", "1"],
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
    let (code, report) = check(dir.path(), &[&agent, "ignore-cancel"], &["--timeout", "1"]);
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
