//! `dsh run --resume`: a parent killed mid-turn continues from its
//! transcript, with every completed turn, and goes on with the interrupted
//! one: the user's task stays in its history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{DSH, GUARD};

/// Answers name how many assistant turns the model saw and the first and
/// last user messages; a prompt containing "slow" streams for a minute.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"last_user_contains": "slow"}, "reply": {"text": "this will never finish in time", "delay_ms": 60000}},
  {"when": {}, "reply": {"text": "seen {{assistant_turns}} answers; first: {{first_user}}; now: {{last_user}}"}}
]}"#;

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(DSH);
    command
        .args(["run", "--quiet", "--data-dir", "data", "--script", "script.json"])
        .args(args)
        .current_dir(dir);
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parents(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("data/agents"))
        .unwrap()
        .map(|entry| {
            entry
                .unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".jsonl")
                .to_owned()
        })
        .collect()
}

#[test]
fn a_parent_killed_mid_turn_resumes_with_its_completed_turns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();

    let first = run(dir.path(), &["first task"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert_eq!(
        text(&first.stdout),
        "seen 0 answers; first: first task; now: first task\n"
    );
    let [id] = parents(dir.path()).try_into().unwrap();
    let transcript = dir.path().join(format!("data/agents/{id}.jsonl"));

    // A second turn, killed (SIGKILL) while the model streams its answer.
    let mut killed = command(dir.path(), &["--resume", &id, "slow second task"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !std::fs::read_to_string(&transcript)
        .unwrap()
        .contains("slow second task")
    {
        assert!(started.elapsed() < GUARD, "the second turn never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().unwrap();
    assert!(!killed.wait().unwrap().success());

    // The resume goes on with the interrupted turn, which keeps the user's
    // second task; the message joins that turn.
    let third = run(dir.path(), &["--resume", &id, "third task"]);
    let stderr = text(&third.stderr);
    assert!(third.status.success(), "{stderr}");
    assert_eq!(
        text(&third.stdout),
        "seen 1 answers; first: first task; now: third task\n"
    );
    assert_eq!(stderr.trim_end(), "", "nothing was torn, nothing to repair");

    // The transcript keeps everything: the interrupted turn goes on, one end.
    let shown = Command::new(DSH)
        .args(["transcript", &id, "--data-dir", "data"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    assert_eq!(shown.matches("── run ended").count(), 2, "{shown}");
    let order: Vec<usize> = [
        "user: first task",
        "── run ended: completed",
        "user: slow second task",
        "user: third task",
        "assistant: seen 1 answers",
        "── run ended: completed",
    ]
    .iter()
    .scan(0, |from, wanted| {
        let at = *from
            + shown[*from..]
                .find(wanted)
                .unwrap_or_else(|| panic!("{wanted:?} missing after byte {from}:\n{shown}"));
        *from = at + wanted.len();
        Some(at)
    })
    .collect();
    assert_eq!(order.len(), 6);
    assert_eq!(parents(dir.path()), [id], "resuming adds no new parent");
}

#[test]
fn an_unknown_id_exits_2_and_lists_the_parents_that_can_be_resumed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();
    let none = run(dir.path(), &["--resume", "nope", "hello"]);
    assert_eq!(none.status.code(), Some(2));
    assert_eq!(
        text(&none.stderr),
        "dsh: no parent agent \"nope\" to resume in data/agents (parents that can be resumed: none)\n"
    );

    assert!(run(dir.path(), &["one"]).status.success());
    assert!(run(dir.path(), &["two"]).status.success());
    let mut ids = parents(dir.path());
    ids.sort();
    let unknown = run(dir.path(), &["--resume", "../etc/passwd", "hello"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        text(&unknown.stderr),
        format!(
            "dsh: no parent agent \"../etc/passwd\" to resume in data/agents (parents that can be resumed: {})\n",
            ids.join(", ")
        )
    );
}

#[test]
fn a_torn_tail_is_repaired_with_a_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();
    assert!(run(dir.path(), &["first task"]).status.success());
    let [id] = parents(dir.path()).try_into().unwrap();
    let transcript = dir.path().join(format!("data/agents/{id}.jsonl"));
    // A crash mid-write: half a line, no newline.
    let mut file = std::fs::OpenOptions::new().append(true).open(&transcript).unwrap();
    std::io::Write::write_all(&mut file, br#"{"type":"message","message":{"role":"user","con"#).unwrap();
    drop(file);

    let resumed = run(dir.path(), &["--resume", &id, "second task"]);
    let stderr = text(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert_eq!(
        text(&resumed.stdout),
        "seen 1 answers; first: first task; now: second task\n"
    );
    assert!(
        stderr.starts_with(&format!("dsh: resuming {id}: transcript ")),
        "{stderr}"
    );
    assert!(stderr.contains("ends with a torn line"), "{stderr}");
    // The file reads back whole again.
    let shown = Command::new(DSH)
        .args(["transcript", &id, "--data-dir", "data"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(shown.status.success());
    assert!(text(&shown.stdout).contains("user: second task"));
    assert!(text(&shown.stderr).is_empty(), "{}", text(&shown.stderr));
}
