//! The task of `dsh run` from standard input (`dsh run -`) and from a file
//! (`--task-file`), through the real binary: the same task as an argument,
//! and each bad input refused with exit 2 before anything starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `dsh` in `dir` with `args`, on the embedded scripted model, fed `stdin`.
fn dsh(dir: &Path, args: &[&str], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    let mut child = command.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    // dsh may refuse before reading all of it (too large): a broken pipe is its answer.
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the embedded scripted model answers to `task`.
fn answer(task: &str) -> String {
    format!(
        "The subagent finished the task. Its report:\n\nScripted subagent here. I was asked: \"{task}\". In a real run I would do that work now; this demo model only reports back.\n"
    )
}

#[test]
fn echo_task_piped_into_dsh_run_dash_runs_that_task() {
    let dir = tempfile::tempdir().unwrap();
    // Exactly as a person types it, through a shell.
    let output = Command::new("sh")
        .arg("-c")
        .arg("echo \"Summarize the README.\" | \"$DSH\" run --quiet -")
        .env("DSH", env!("CARGO_BIN_EXE_dsh"))
        .env_remove("DSH_BASE_URL")
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_MODEL")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), answer("Summarize the README."));
}

#[test]
fn a_task_file_runs_the_same_task_as_the_argument() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("task.md"), "Summarize the README.\n").unwrap();
    let from_file = dsh(dir.path(), &["run", "--quiet", "--task-file", "task.md"], b"");
    assert!(from_file.status.success(), "{}", text(&from_file.stderr));
    let from_argument = dsh(dir.path(), &["run", "--quiet", "Summarize the README."], b"");
    assert_eq!(text(&from_file.stdout), text(&from_argument.stdout));
    assert_eq!(text(&from_file.stdout), answer("Summarize the README."));
}

#[test]
fn a_task_longer_than_an_argument_may_be_is_read_from_standard_input() {
    // Linux refuses a single argument over 128 KiB; standard input has no such limit.
    let dir = tempfile::tempdir().unwrap();
    let task = format!("{} and the end.", "word ".repeat(60_000));
    assert!(task.len() > 128 * 1024);
    let output = dsh(dir.path(), &["run", "--quiet", "-"], task.as_bytes());
    assert!(output.status.success(), "{}", text(&output.stderr));
    // The child's report is longer than the result budget: the parent read
    // its head and its tail.
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("The subagent finished the task."), "{stdout:.200}");
    assert!(
        stdout
            .ends_with(" and the end.\". In a real run I would do that work now; this demo model only reports back.\n")
    );
    // The parent's transcript holds the whole task, as given.
    let agents = dir.path().join(".dsh/agents");
    let whole = std::fs::read_dir(&agents)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .filter(|transcript| transcript.contains(&task))
        .count();
    assert!(whole >= 1, "no transcript in {} holds the whole task", agents.display());
}

#[test]
fn bad_task_input_exits_2_naming_what_was_wrong_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let over = vec![b'a'; 4 * 1024 * 1024 + 1];
    let cases: [(&[&str], &[u8], &str); 6] = [
        (
            &["run", "--task-file", "missing.md"],
            b"",
            "dsh: cannot read the task file missing.md: No such file or directory",
        ),
        (
            &["run", "-"],
            b"caf\xe9",
            "dsh: the task on standard input is not UTF-8 text (an invalid byte at offset 3)",
        ),
        (&["run", "-"], b"\n", "dsh: the task on standard input is empty"),
        (&["run", ""], b"", "dsh: the task argument is empty"),
        (
            &["run", "-"],
            &over,
            "dsh: the task on standard input is larger than 4 MiB (4194304 bytes)",
        ),
        (
            &["run", "--resume", "nobody", "-"],
            b"  ",
            "dsh: the task on standard input is empty",
        ),
    ];
    for (args, stdin, expected) in cases {
        let output = dsh(dir.path(), args, stdin);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
        assert_eq!(text(&output.stdout), "", "{args:?}");
    }
    // Nothing started: no transcript directory was made.
    assert!(!dir.path().join(".dsh").exists());
}

#[test]
fn a_task_comes_from_exactly_one_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("task.md"), "hi").unwrap();
    let both = dsh(dir.path(), &["run", "--task-file", "task.md", "hi"], b"");
    assert_eq!(both.status.code(), Some(2));
    assert!(
        text(&both.stderr).contains("cannot be used with"),
        "{}",
        text(&both.stderr)
    );
    let neither = dsh(dir.path(), &["run"], b"");
    assert_eq!(neither.status.code(), Some(2));
    assert!(
        text(&neither.stderr).contains("give the task as an argument"),
        "{}",
        text(&neither.stderr)
    );
}
