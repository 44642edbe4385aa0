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

    // A file that cannot be written: refused before the run, named.
    let unwritable = dsh(dir.path(), &["run", "--record", "no-such-dir/run.jsonl", TASK]);
    assert_eq!(unwritable.status.code(), Some(2));
    assert!(
        text(&unwritable.stderr).contains("no-such-dir/run.jsonl.recording"),
        "{}",
        text(&unwritable.stderr)
    );
    assert!(text(&unwritable.stdout).is_empty(), "nothing ran");

    // A torn cassette: its name and line.
    let whole = dsh(dir.path(), &["run", "-q", "--record", "whole.jsonl", TASK]);
    assert!(whole.status.success(), "{}", text(&whole.stderr));
    let recorded = std::fs::read_to_string(dir.path().join("whole.jsonl")).unwrap();
    std::fs::write(dir.path().join("torn.jsonl"), &recorded[..recorded.len() - 5]).unwrap();
    let torn = dsh(dir.path(), &["run", "--replay", "torn.jsonl", TASK]);
    assert_eq!(torn.status.code(), Some(2));
    let lines = recorded.lines().count();
    assert_eq!(
        text(&torn.stderr),
        format!("torn.jsonl:{lines}: the cassette is torn (it ends in the middle of this line): record it again\n")
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

/// The parent delegates at once; its child answers slowly (a minute a word).
const SLOW_CHILD: &str = r#"{"rules": [
  {"when": {"tool_offered": "subagent", "last_message": "user"},
   "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "slow", "prompt": "take your time"}}]}},
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "never finished in time", "delay_ms": 60000}},
  {"when": {}, "reply": {"text": "done"}}
]}"#;

/// Waits (a minute at most) until `ready` holds.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, signal).unwrap();
}

#[test]
fn a_run_stopped_by_a_signal_keeps_its_recording_marked_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.json"), SLOW_CHILD).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(["run", "--script", "script.json", "--record", "run.jsonl", "go"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    let child = command.spawn().unwrap();
    // The parent's first exchange is on disk (whole exchanges are written
    // within milliseconds of their end); its child's starts about now.
    let partial = dir.path().join("run.jsonl.recording");
    wait_for("the parent's exchange", || {
        std::fs::read_to_string(&partial).is_ok_and(|text| text.contains(r#""kind":"end""#))
    });
    signal(&child, nix::sys::signal::Signal::SIGINT);
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(!partial.exists());
    // The parent's whole exchange, and the child's cut short (as dropped)
    // when the signal found it under way.
    let recorded = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let exchanges = if recorded.contains(r#""outcome":"dropped""#) {
        2
    } else {
        1
    };
    assert_eq!(
        recorded.lines().last().unwrap(),
        format!(r#"{{"kind":"interrupted","exchanges":{exchanges},"reason":"SIGINT"}}"#)
    );
    assert!(
        stderr.contains(&format!(
            "dsh: recorded {exchanges} model exchanges into run.jsonl, interrupted by SIGINT: replay refuses it"
        )),
        "{stderr}"
    );

    let replay = dsh(dir.path(), &["run", "--replay", "run.jsonl", "go"]);
    assert_eq!(replay.status.code(), Some(2));
    assert_eq!(
        text(&replay.stderr),
        format!(
            "run.jsonl: the cassette is unfinished, so it is not replayed: the run that recorded it was interrupted (SIGINT) after {exchanges} exchanges; record it again\n"
        )
    );
    let show = dsh(dir.path(), &["cassette", "show", "run.jsonl"]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(
        text(&show.stdout).starts_with(&format!(
            "run.jsonl (events level; interrupted by SIGINT, so replay refuses it): {exchanges} exchanges, {exchanges} agents;"
        )),
        "{}",
        text(&show.stdout)
    );
    // Recording into the same name again is not refused.
    let again = dsh(dir.path(), &["run", "-q", "--record", "run.jsonl", TASK]);
    assert!(again.status.success(), "{}", text(&again.stderr));
}

#[test]
fn acp_and_mcp_stopped_by_a_signal_close_their_recordings_as_interrupted() {
    use std::io::{BufRead, BufReader};
    for (command, stop) in [
        ("acp", nix::sys::signal::Signal::SIGTERM),
        ("mcp", nix::sys::signal::Signal::SIGINT),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut process = Command::new(env!("CARGO_BIN_EXE_dsh"));
        process
            .args([command, "--record", "served.jsonl"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if command == "mcp" {
            process.args(["--data-dir", "data"]);
        }
        for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
            process.env_remove(key);
        }
        let mut child = process.spawn().unwrap();
        // The banner: the model (and its recording) is ready.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        stderr.read_line(&mut banner).unwrap();
        assert!(banner.starts_with("dsh: using"), "{command}: {banner}");
        signal(&child, stop);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{command}: {rest}");
        let name = if command == "acp" { "SIGTERM" } else { "SIGINT" };
        assert!(
            rest.contains(&format!(
                "dsh: recorded 0 model exchanges into served.jsonl, interrupted by {name}"
            )),
            "{command}: {rest}"
        );
        let recorded = std::fs::read_to_string(dir.path().join("served.jsonl")).unwrap();
        assert_eq!(
            recorded.lines().last().unwrap(),
            format!(r#"{{"kind":"interrupted","exchanges":0,"reason":"{name}"}}"#),
            "{command}"
        );
        assert!(!dir.path().join("served.jsonl.recording").exists(), "{command}");
    }
}

/// The parent asks its ACP child (`subagent_remote`), then repeats what it heard.
const ASKING_PARENT: &str = r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "Parent heard: {{last_tool_result}}"}}
]}"#;

/// The ACP child (a `dsh acp` on its own script) answers at once.
const REMOTE_CHILD: &str = r#"{"rules": [{"when": {}, "reply": {"text": "remote says {{last_user}}"}}]}"#;

#[test]
fn an_acp_child_records_its_part_and_one_name_replays_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("parent.json"), ASKING_PARENT).unwrap();
    std::fs::write(dir.path().join("child.json"), REMOTE_CHILD).unwrap();
    let config = format!(
        r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {dsh:?}
args = ["acp", "--quiet", "--script", "child.json"]
max_depth = "provider-managed"
"#,
        dsh = env!("CARGO_BIN_EXE_dsh"),
    );
    std::fs::write(dir.path().join("remote.toml"), config).unwrap();
    let args = |tape: &[&'static str]| {
        let mut args = vec!["run", "--config", "remote.toml"];
        args.extend_from_slice(tape);
        args.push("Ask the remote.");
        args
    };

    let recorded = dsh(dir.path(), &args(&["--script", "parent.json", "--record", "run.jsonl"]));
    let stderr = text(&recorded.stderr);
    assert!(recorded.status.success(), "{stderr}");
    let answer = text(&recorded.stdout);
    assert!(answer.contains("remote says hello remote"), "{answer}");
    assert!(
        stderr.contains("dsh: recorded 2 model exchanges into run.jsonl"),
        "the parent's two; the child's are in its part: {stderr}"
    );
    // The child's part, beside the cassette, listed by its closing line.
    let part = std::fs::read_to_string(dir.path().join("run.jsonl.part-1")).unwrap();
    assert!(
        part.contains(r#""content":"hello remote""#),
        "the child's request: {part}"
    );
    assert!(part.ends_with("{\"kind\":\"finish\",\"exchanges\":1}\n"), "{part}");
    let whole = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    assert_eq!(
        whole.lines().last().unwrap(),
        r#"{"kind":"finish","exchanges":2,"parts":["run.jsonl.part-1"]}"#
    );
    let show = dsh(dir.path(), &["cassette", "show", "run.jsonl"]);
    assert!(
        text(&show.stdout).starts_with("run.jsonl (events level): 3 exchanges, 2 agents;"),
        "{}",
        text(&show.stdout)
    );

    // Replayed by name: the parent from the cassette, its ACP child too
    // (its own script is not read: the parent's cassette answers it).
    std::fs::write(dir.path().join("child.json"), r#"{"rules": []}"#).unwrap();
    let replayed = dsh(dir.path(), &args(&["--replay", "run.jsonl"]));
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    assert_eq!(text(&replayed.stdout), answer);

    // Without its part, the cassette is not whole.
    std::fs::remove_file(dir.path().join("run.jsonl.part-1")).unwrap();
    let missing = dsh(dir.path(), &args(&["--replay", "run.jsonl"]));
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("its part ") && text(&missing.stderr).contains("run.jsonl.part-1 is missing"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn a_record_section_records_every_run_and_the_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("runs")).unwrap();
    std::fs::write(dir.path().join("dsh.toml"), "[record]\nfile = \"runs/last.jsonl\"\n").unwrap();
    let run = dsh(dir.path(), &["run", TASK]);
    let stderr = text(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("dsh: recorded 3 model exchanges into "), "{stderr}");
    assert!(dir.path().join("runs/last.jsonl").is_file());
    // --replay wins over the section: the run records nothing.
    let replayed = dsh(dir.path(), &["run", "-q", "--replay", "runs/last.jsonl", TASK]);
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    assert_eq!(text(&replayed.stdout), text(&run.stdout));
    assert!(!dir.path().join("runs/last.jsonl.recording").exists());
    let check = dsh(dir.path(), &["config", "check"]);
    assert!(
        text(&check.stderr).contains("recording: every run's model traffic into "),
        "{}",
        text(&check.stderr)
    );
    // A directory is refused where it is written.
    std::fs::write(dir.path().join("dsh.toml"), "[record]\nfile = \"runs\"\n").unwrap();
    let bad = dsh(dir.path(), &["run", TASK]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("record.file"), "{}", text(&bad.stderr));
}

/// Two children started together whose answers are both cut: the first
/// call's child answers last when recorded. Ids follow the calls, so every
/// replay, its children finishing in whatever order, asks what was recorded.
#[test]
fn parallel_cut_children_replay_the_same_requests_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let long = |name: &str| format!("{name} says: {}", "word ".repeat(2_000));
    let script = serde_json::json!({"rules": [
        {"when": {"first_user_contains": "PARENT", "last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "slow one", "prompt": "SLOW work"}},
            {"name": "subagent", "arguments": {"description": "fast one", "prompt": "FAST work"}}]}},
        {"when": {"first_user_contains": "PARENT", "last_message": "tool"},
         "reply": {"text": "done; the last result: {{last_tool_result}}"}},
        {"when": {"first_user_contains": "SLOW"}, "reply": {"text": long("slow"), "stream_by": "whole", "delay_ms": 300}},
        {"when": {"first_user_contains": "FAST"}, "reply": {"text": long("fast"), "stream_by": "whole"}}
    ]});
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    let budget = ["--result-limit", "256"];
    let task = "PARENT task";
    let mut record = vec!["run", "-q", "--script", "script.json", "--record", "run.jsonl"];
    record.extend(budget);
    record.push(task);
    let recorded = dsh(dir.path(), &record);
    assert!(recorded.status.success(), "{}", text(&recorded.stderr));
    let answer = text(&recorded.stdout);
    // The fast one, called second, is kept as subagent-2 though it
    // finished first.
    assert!(
        answer.contains(r#"call task_output {"task_id": "subagent-2", "offset": "#),
        "{answer}"
    );

    // Each cut child names the task that keeps its result.
    let tree = dsh(dir.path(), &["tree", "--json"]);
    let tree: serde_json::Value = serde_json::from_slice(&tree.stdout).unwrap();
    let named: Vec<(&str, &str)> = tree["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|child| (child["label"].as_str().unwrap(), child["task_id"].as_str().unwrap()))
        .collect();
    assert!(named.contains(&("slow one", "subagent-1")), "{named:?}");
    assert!(named.contains(&("fast one", "subagent-2")), "{named:?}");

    let mut replay = vec!["run", "-q", "--replay", "run.jsonl"];
    replay.extend(budget);
    replay.push(task);
    for round in 1..=20 {
        let replayed = dsh(dir.path(), &replay);
        assert!(replayed.status.success(), "replay {round}: {}", text(&replayed.stderr));
        assert_eq!(text(&replayed.stdout), answer, "replay {round}");
    }
}
