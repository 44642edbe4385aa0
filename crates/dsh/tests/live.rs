//! `dsh run`'s live view: on a terminal (a pseudo-terminal, from
//! util-linux's `script`) the tree is redrawn in place while its children
//! run, and its last frame is the whole tree; `--plain` prints the lines a
//! pipe gets. Offline: the parent and its children run one script, the
//! children slowly enough to be seen running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

/// The parent delegates twice in one answer; each child streams its
/// answer a word every 300 ms.
fn script(dir: &Path) -> String {
    let script = serde_json::json!({"rules": [
        {"when": {"first_user_contains": "PARENT", "last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "short one", "prompt": "say hi"}},
            {"name": "subagent", "arguments": {"description": "other one", "prompt": "say hi too"}}]}},
        {"when": {"first_user_contains": "PARENT", "last_message": "tool"}, "reply": {"text": "all done"}},
        {"when": {}, "reply": {"text": "hi there my friend", "delay_ms": 300}}
    ]});
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// `dsh run` with `args` on a pseudo-terminal of 40 rows and 200 columns:
/// everything it wrote there (stdout and stderr together, line ends as
/// the terminal turns them).
fn on_terminal(dir: &Path, args: &[&str]) -> String {
    let mut line = format!("stty rows 40 cols 200; exec '{}' run", common::DSH);
    for arg in args {
        assert!(!arg.contains('\''), "{arg}");
        line.push_str(&format!(" '{arg}'"));
    }
    let mut command = Command::new("script");
    command
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .current_dir(dir)
        .stdin(Stdio::null());
    common::offline(&mut command);
    let output = command
        .output()
        .expect("util-linux's `script` runs dsh on a pseudo-terminal");
    let text = String::from_utf8_lossy(&output.stdout).replace("\r\n", "\n");
    assert!(output.status.success(), "{text}");
    text
}

/// Each frame the live view drew: what follows each clear to the end of
/// the screen, up to the next escape (the next frame) or the end.
fn frames(text: &str) -> Vec<&str> {
    text.split("\x1b[J")
        .skip(1)
        .map(|frame| frame.split('\x1b').next().unwrap_or_default())
        .collect()
}

#[test]
fn on_a_terminal_the_tree_is_redrawn_while_it_runs_and_ends_whole() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let text = on_terminal(dir.path(), &["--script", &script, "PARENT task"]);
    let frames = frames(&text);
    assert!(frames.len() >= 3, "{text:?}");
    // Each frame after the first goes back up over the one before.
    assert_eq!(text.matches("F\x1b[J").count(), frames.len() - 1, "{text:?}");
    // Seen running: a frame with a child not yet ended.
    assert!(
        frames.iter().any(|frame| frame
            .lines()
            .any(|line| line.starts_with("├─ \"short one\" ") && line.contains(" · running · "))),
        "{text:?}"
    );
    // The last frame: the whole tree, ended, with its tokens.
    let last: Vec<&str> = frames.last().unwrap().lines().collect();
    assert!(last[0].starts_with("\"dsh run\" "), "{text:?}");
    assert!(last[0].contains(" · completed · ran "), "{text:?}");
    assert!(last[0].contains(" · 2 model calls · tokens "), "{text:?}");
    for (line, label) in [(1, "├─ \"short one\" "), (2, "└─ \"other one\" ")] {
        assert!(last[line].starts_with(label), "{text:?}");
        assert!(last[line].contains(" · completed · ran "), "{text:?}");
        assert!(last[line].contains(" · 1 model call · tokens "), "{text:?}");
    }
    // The lines a pipe gets are not printed; the run's closing lines and
    // its answer follow the tree.
    assert!(!text.contains(" started ("), "{text:?}");
    let after = text.rsplit("\x1b[J").next().unwrap();
    assert!(after.contains("dsh: transcripts in .dsh/agents: "), "{text:?}");
    assert!(after.contains("dsh: own model calls: "), "{text:?}");
    assert!(after.ends_with("all done\n"), "{text:?}");
}

#[test]
fn with_plain_a_terminal_gets_the_lines_a_pipe_gets() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let text = on_terminal(dir.path(), &["--plain", "--script", &script, "PARENT task"]);
    assert!(!text.contains('\x1b'), "{text:?}");
    for label in ["short one", "other one"] {
        assert!(text.contains(&format!("↳ subagent \"{label}\" started (")), "{text:?}");
        assert!(
            text.contains(&format!("↳ subagent \"{label}\" completed · 1 model call · ")),
            "{text:?}"
        );
    }
    assert!(text.ends_with("all done\n"), "{text:?}");
}
