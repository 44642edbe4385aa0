//! `dsh run --resume` meets bad input with a clear error naming the file
//! (and the line, where there is one), and overwrites nothing: every other
//! agent's transcript keeps its bytes. Through the real binary and the
//! scripted tree of [`support::tree`], killed (SIGKILL) while its child
//! `F1` works.
//!
//! What is refused and what goes on:
//! - the parent's own transcript corrupt mid-file, a second resume of a
//!   busy tree, a read-only data directory, a configuration that no longer
//!   offers a pending call's tool: the resume is refused before any request
//!   is sent;
//! - a child's transcript corrupt mid-file, missing, or of a newer version:
//!   the parent goes on, and its model reads one result saying the child is
//!   disconnected and why, naming the file (and the line).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::tree::{GUARD, Ran, Tree, agent, task};

/// A tree whose parent delegated `F1` (foreground) and was killed while
/// `F1`'s first request was held: the parent's call and `F1`'s turn are
/// open.
fn interrupted() -> Tree {
    let tree = Tree::new("");
    tree.server.hold_first(|body| agent(body) == "F1");
    let ran = tree.run_to_hold(&[task(&["F1"])]);
    assert!(ran.killed, "the run ended before F1 began:\n{ran}");
    tree
}

/// Every transcript's bytes, by path.
fn transcripts(tree: &Tree) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(tree.path().join("data/agents"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

/// `text` with the tree's directory, the parent's id and `F1`'s id
/// replaced by placeholders.
fn placeheld(tree: &Tree, text: &str, child: Option<&Path>) -> String {
    let mut text = text
        .replace(&tree.path().display().to_string(), "[dir]")
        .replace(&tree.parent_id().unwrap(), "[parent]");
    if let Some(stem) = child.and_then(Path::file_stem) {
        text = text.replace(stem.to_str().unwrap(), "[F1]");
    }
    text
}

/// `dsh run --resume <parent>`, refused: it fails, sends no request, and
/// changes no transcript.
fn refused(tree: &Tree) -> Ran {
    let before = transcripts(tree);
    let requests = tree.server.log().len();
    let ran = tree.run(&["--resume".to_owned(), tree.parent_id().unwrap()]);
    assert!(!ran.status.success(), "{ran}");
    assert_eq!(
        tree.server.log().len(),
        requests,
        "a refused resume sent a request:\n{ran}"
    );
    assert_eq!(
        transcripts(tree),
        before,
        "a refused resume changed a transcript:\n{ran}"
    );
    ran
}

/// Rewrites the file at `path` line by line.
fn edit_lines(path: &Path, edit: impl FnOnce(&mut Vec<String>)) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    edit(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A garbage line in the middle of the parent's transcript, good lines
/// after it (not a torn tail, which a resume repairs): refused, naming the
/// file and the line; nothing written.
#[test]
fn a_parent_transcript_corrupt_mid_file_is_refused_naming_the_file_and_line() {
    let tree = interrupted();
    let path = tree.transcript_of("P");
    edit_lines(&path, |lines| {
        lines.insert(2, "{\"type\": \"message\", garbage".to_owned())
    });
    let ran = refused(&tree);
    assert_eq!(ran.status.code(), Some(1), "{ran}");
    insta::assert_snapshot!("corrupt_parent", placeheld(&tree, &ran.stderr, None));
}

/// The resume of a parent whose child's records cannot be read goes on:
/// its model reads one result saying the child is disconnected, why, and
/// which file (and line); the child's transcript is left as it was (none
/// is made for a missing one), and the parent answers.
fn child_disconnected(tree: &Tree, child: &Path) -> String {
    let before = std::fs::read(child).ok();
    let ran = tree.run(&["--resume".to_owned(), tree.parent_id().unwrap()]);
    assert!(ran.status.success(), "{ran}");
    assert_eq!(
        std::fs::read(child).ok(),
        before,
        "the child's transcript changed:\n{ran}"
    );
    assert!(ran.stderr.contains("↳ subagent \"part F1\" disconnected"), "{ran}");
    let log = tree.server.log();
    let last = &log.last().unwrap().body["messages"];
    let result = last
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .unwrap_or_else(|| panic!("the parent's model read no result:\n{ran}"));
    placeheld(tree, result["content"].as_str().unwrap(), Some(child))
}

#[test]
fn a_child_transcript_corrupt_mid_file_reads_disconnected_naming_the_file_and_line() {
    let tree = interrupted();
    let path = tree.transcript_of("F1");
    edit_lines(&path, |lines| lines.insert(1, "garbage {".to_owned()));
    insta::assert_snapshot!("corrupt_child", child_disconnected(&tree, &path));
}

#[test]
fn a_missing_child_transcript_reads_disconnected_naming_the_file() {
    let tree = interrupted();
    let path = tree.transcript_of("F1");
    std::fs::remove_file(&path).unwrap();
    insta::assert_snapshot!("missing_child", child_disconnected(&tree, &path));
}

#[test]
fn a_child_transcript_of_a_newer_version_reads_disconnected_naming_the_file() {
    let tree = interrupted();
    let path = tree.transcript_of("F1");
    edit_lines(&path, |lines| {
        let mut header: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        header["version"] = serde_json::json!(99);
        lines[0] = header.to_string();
    });
    insta::assert_snapshot!("newer_child", child_disconnected(&tree, &path));
}

/// Two resumes of one parent at once: while the first runs (held at `F1`'s
/// request), the second is refused, the tree busy, and touches nothing
/// (not even a torn tail it could have repaired).
#[test]
fn a_second_resume_of_a_busy_tree_is_refused() {
    let tree = interrupted();
    let id = tree.parent_id().unwrap();
    tree.server.hold_first(|body| agent(body) == "F1");
    let first = tree.start(&["--resume".to_owned(), id.clone()]);
    assert!(
        tree.server.wait_reached(GUARD),
        "the first resume never reached F1:\n{}",
        first.stderr()
    );
    // A torn tail the second resume must leave alone.
    let parent = tree.transcript_of("P");
    let mut bytes = std::fs::read(&parent).unwrap();
    bytes.extend_from_slice(b"{\"type\":\"mess");
    std::fs::write(&parent, &bytes).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let ran = refused(&tree);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    insta::assert_snapshot!("busy", placeheld(&tree, &ran.stderr, None));
    first.kill();
    tree.server.release();
}

/// A read-only data directory: refused, naming what could not be written,
/// before any request. Skipped where the test runs as root (chmod does not
/// stop root from writing, which a probe write finds).
#[test]
fn a_read_only_data_directory_is_refused_naming_the_file() {
    use std::os::unix::fs::PermissionsExt;
    let tree = interrupted();
    let data = tree.path().join("data");
    let modes: Vec<(PathBuf, u32)> = walk(&data)
        .into_iter()
        .map(|path| {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            (path, mode)
        })
        .collect();
    for (path, mode) in &modes {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o222)).unwrap();
    }
    let probe = data.join("agents/probe");
    if std::fs::write(&probe, b"probe").is_ok() {
        std::fs::remove_file(&probe).unwrap();
        for (path, mode) in &modes {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
        eprintln!("skipped: chmod does not stop this user (root) from writing");
        return;
    }
    let ran = refused(&tree);
    for (path, mode) in modes.iter().rev() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode)).unwrap();
    }
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    insta::assert_snapshot!("read_only", placeheld(&tree, &ran.stderr, None));
}

/// A directory and everything under it, the directory first.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![dir.to_owned()];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(walk(&path));
        } else {
            all.push(path);
        }
    }
    all
}

/// A resume with a `dsh.toml` that no longer offers the tool of a call
/// the interrupted turn runs again (its `[[subagents]]` entry renamed):
/// refused before any request is sent, naming the transcript and the tool.
#[test]
fn a_configuration_without_a_pending_calls_tool_is_refused_before_any_request() {
    let tree = interrupted();
    std::fs::write(
        tree.path().join("dsh.toml"),
        "[[subagents]]\ntool_name = \"helper\"\nprovider = \"spawn\"\n",
    )
    .unwrap();
    let ran = refused(&tree);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    insta::assert_snapshot!("tool_gone", placeheld(&tree, &ran.stderr, None));
}
