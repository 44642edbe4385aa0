//! Bounded delegation through the real binary: a parent that delegates 20
//! tasks at once under `--max-concurrent 3` sees every child answer, while
//! stderr shows the calls that waited for a slot. Offline: scripted models.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::dsh;

const CALLS: usize = 20;

/// The parent asks for `CALLS` tasks in one reply; each child (which is not
/// offered `subagent`) takes a moment, then answers with its prompt.
fn script() -> String {
    let calls: Vec<String> = (1..=CALLS)
        .map(|n| format!(r#"{{"name": "subagent", "arguments": {{"description": "task {n}", "prompt": "job {n}"}}}}"#))
        .collect();
    format!(
        r#"{{"rules": [
  {{"when": {{"tool_not_offered": "subagent"}}, "reply": {{"text": "answered {{{{last_user}}}}", "delay_ms": 150}}}},
  {{"when": {{"last_message": "user"}}, "reply": {{"tool_calls": [{}]}}}},
  {{"when": {{"last_message": "tool"}}, "reply": {{"text": "all answered"}}}}
]}}"#,
        calls.join(", ")
    )
}

/// Runs `dsh run` on [`script`] with `flags` in a fresh directory: the
/// directory, whether it succeeded (its exit code), stdout and stderr.
fn run_with(flags: &[&str], prompt: &str) -> (tempfile::TempDir, Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("parent.json");
    std::fs::write(&script_path, script()).unwrap();
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--script", script_path.to_str().unwrap(), prompt]);
    let output = dsh(dir.path(), &args);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (dir, output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// The parent's transcript, found through the transcripts line on stderr.
fn parent_transcript(dir: &std::path::Path, stderr: &str) -> String {
    let parent_id = stderr
        .lines()
        .find_map(|line| line.strip_prefix("dsh: transcripts in .dsh/agents: "))
        .and_then(|rest| rest.split(" (parent)").next())
        .unwrap_or_else(|| panic!("no transcripts line:\n{stderr}"));
    std::fs::read_to_string(dir.join(".dsh/agents").join(format!("{parent_id}.jsonl"))).unwrap()
}

#[test]
fn twenty_parallel_delegations_under_max_concurrent_3_all_answer_after_queueing() {
    let (dir, code, stdout, stderr) = run_with(&["--max-concurrent", "3"], "delegate them all");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "all answered\n");

    // Past the first three, calls waited: each said how many were ahead.
    let queued: Vec<&str> = stderr.lines().filter(|line| line.contains(" queued (")).collect();
    assert!(queued.len() >= CALLS - 3, "{stderr}");
    assert!(
        queued
            .iter()
            .all(|line| line.starts_with("↳ subagent \"task ") && line.ends_with(" ahead)")),
        "{stderr}"
    );
    // Every child started and completed once.
    for n in 1..=CALLS {
        let started = format!("↳ subagent \"task {n}\" started (");
        let completed = format!("↳ subagent \"task {n}\" completed");
        assert_eq!(stderr.matches(&started).count(), 1, "task {n}:\n{stderr}");
        assert_eq!(stderr.matches(&completed).count(), 1, "task {n}:\n{stderr}");
    }
    // The summary says how many calls waited, and how long in all.
    let summary = stderr
        .lines()
        .find(|line| line.starts_with("dsh: own model calls: "))
        .unwrap_or_else(|| panic!("no summary:\n{stderr}"));
    assert!(summary.contains(" calls waited for a slot, "), "{summary}");
    assert!(summary.ends_with("s in all"), "{summary}");

    // Every child's answer reached the parent, each as its call's result.
    let transcript = parent_transcript(dir.path(), &stderr);
    for n in 1..=CALLS {
        let result = format!(
            r#""role":"tool","tool_call_id":"call_1_{}","content":"answered job {n}""#,
            n - 1
        );
        assert!(transcript.contains(&result), "job {n} unanswered:\n{transcript}");
    }
}

/// Without queueing nothing is said of it: the summary has no wait.
#[test]
fn a_run_whose_calls_never_wait_says_nothing_of_waiting() {
    let (_dir, code, _, stderr) = run_with(&["--max-concurrent", "20"], "go");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("queued ("), "{stderr}");
    assert!(!stderr.contains("waited for a slot"), "{stderr}");
}

/// A tree's token budget counts the parent's own model calls: once the
/// parent's first call spent it, every delegation is refused with the
/// reason, and the run stops unfinished (exit 1) saying so.
#[test]
fn a_spent_tree_budget_refuses_the_delegations_and_stops_the_run() {
    let (dir, code, _, stderr) = run_with(&["--token-limit", "100"], "go");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.ends_with("dsh: the run did not finish: token budget of 100 tokens spent\n"),
        "{stderr}"
    );
    assert!(!stderr.contains(" started ("), "no child started:\n{stderr}");
    let transcript = parent_transcript(dir.path(), &stderr);
    assert_eq!(
        transcript
            .matches("subagent not started: this delegation tree's token budget is spent")
            .count(),
        CALLS,
        "{transcript}"
    );
}
