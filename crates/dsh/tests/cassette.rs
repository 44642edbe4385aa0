//! `dsh run --record` / `--replay` and `dsh cassette show` / `diff`, end to
//! end, on the embedded scripted model (recorded at the events level).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn dsh(dir: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command.args(args).current_dir(dir);
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const TASK: &str = "Summarize the README.";

#[test]
fn a_recorded_run_replays_offline_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let recorded = dsh(dir.path(), &["run", "--record", "run.jsonl", TASK]);
    let stderr = text(&recorded.stderr);
    assert!(recorded.status.success(), "{stderr}");
    assert!(
        stderr.contains("dsh: recorded 3 model exchanges into run.jsonl"),
        "parent twice, child once: {stderr}"
    );
    assert!(!dir.path().join("run.jsonl.recording").exists());

    // Replayed: the same answer, and the banner says where it came from.
    let replayed = dsh(dir.path(), &["run", "--replay", "run.jsonl", TASK]);
    let stderr = text(&replayed.stderr);
    assert!(replayed.status.success(), "{stderr}");
    assert_eq!(text(&replayed.stdout), text(&recorded.stdout));
    assert!(
        stderr.starts_with("dsh: replaying run.jsonl (3 recorded exchanges at the events level; no network)"),
        "{stderr}"
    );
    let paced = dsh(
        dir.path(),
        &["run", "--replay", "run.jsonl", "--replay-timing", "-q", TASK],
    );
    assert_eq!(text(&paced.stdout), text(&recorded.stdout), "{}", text(&paced.stderr));

    let show = dsh(dir.path(), &["cassette", "show", "run.jsonl"]);
    insta::assert_snapshot!("show", text(&show.stdout));

    // Another task: replay refuses it and names where it differs.
    let missed = dsh(
        dir.path(),
        &["run", "--replay", "run.jsonl", "-q", "Summarize the LICENSE."],
    );
    assert_eq!(missed.status.code(), Some(1));
    insta::assert_snapshot!("miss", text(&missed.stderr));

    // Two recordings of different tasks: the first divergence.
    let other = dsh(
        dir.path(),
        &["run", "-q", "--record", "other.jsonl", "Summarize the LICENSE."],
    );
    assert!(other.status.success(), "{}", text(&other.stderr));
    let same = dsh(dir.path(), &["cassette", "diff", "run.jsonl", "run.jsonl"]);
    assert!(same.status.success());
    assert_eq!(
        text(&same.stdout),
        "the two recordings agree: every agent asked the same and was answered the same\n"
    );
    let diff = dsh(dir.path(), &["cassette", "diff", "run.jsonl", "other.jsonl"]);
    assert_eq!(diff.status.code(), Some(1));
    insta::assert_snapshot!("diff", text(&diff.stderr));
}

#[test]
fn bad_cassettes_and_busy_files_are_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("busy.jsonl.recording"), "").unwrap();
    let busy = dsh(dir.path(), &["run", "--record", "busy.jsonl", TASK]);
    assert_eq!(busy.status.code(), Some(2));
    assert!(
        text(&busy.stderr).contains("busy.jsonl.recording exists"),
        "{}",
        text(&busy.stderr)
    );

    let missing = dsh(dir.path(), &["run", "--replay", "busy.jsonl", TASK]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr)
            .contains("the cassette is unfinished, so it is not replayed: only busy.jsonl.recording exists"),
        "{}",
        text(&missing.stderr)
    );
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let show = dsh(dir.path(), &["cassette", "show", "notes.txt"]);
    assert_eq!(show.status.code(), Some(2));
    assert_eq!(
        text(&show.stderr),
        "notes.txt:1: not a dsh cassette (its first line is not a header with \"format\":\"dsh-cassette\")\n"
    );
    let timing = dsh(dir.path(), &["run", "--replay-timing", TASK]);
    assert_eq!(timing.status.code(), Some(2), "--replay-timing needs --replay");
}
