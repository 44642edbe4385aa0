//! Loading a tree from transcripts: the tree shown, and every kind of bad
//! record marked on its node while the rest is shown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use dsh_llm::{Message, ToolCall, Usage};
use dsh_subagent_api::AgentId;
use dsh_transcript::{TranscriptEntry, TranscriptWriter, TreeLock, transcript_path};
use dsh_tree::{Ending, LoadError, Place, Problem, load};

/// Writes a transcript's entries as lines.
fn write(dir: &Path, id: &str, entries: &[serde_json::Value]) {
    let path = transcript_path(dir, &AgentId::new(id));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = String::new();
    for entry in entries {
        text.push_str(&entry.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn header(id: &str, parent: Option<&str>, label: &str, start: serde_json::Value) -> serde_json::Value {
    let mut header = serde_json::json!({
        "type": "header", "version": 1, "id": id, "depth": u64::from(parent.is_some()),
        "label": label, "model": "m", "created_at_ms": 1_000,
    });
    if let Some(parent) = parent {
        header["parent"] = parent.into();
    }
    if !start.is_null() {
        header["start"] = start;
    }
    header
}

fn end(stop: &str, started: u64, ended: u64, answer: u64) -> serde_json::Value {
    serde_json::json!({
        "type": "turn_end", "stop": stop, "steps": 2,
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        "times": {"queued_ms": 50, "started_at_ms": started, "calls_at_ms": [started + 10, ended], "ended_at_ms": ended, "answer_bytes": answer},
    })
}

fn child(id: &str) -> serde_json::Value {
    serde_json::json!({"type": "child", "id": id})
}

/// A parent that called `subagent` (call `c1`, answered with `shown`
/// bytes) and named child `kid`.
fn parent_with_call(dir: &Path, shown: usize) {
    let call = Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "subagent".into(),
            arguments: r#"{"description":"look","prompt":"p"}"#.into(),
        }],
    };
    write(
        dir,
        "root",
        &[
            header("root", None, "dsh run", serde_json::Value::Null),
            serde_json::json!({"type": "message", "message": Message::user("go")}),
            serde_json::json!({"type": "message", "message": call}),
            child("kid"),
            serde_json::json!({"type": "message", "message": Message::tool("c1", "x".repeat(shown))}),
            end("completed", 2_000, 9_000, 5),
        ],
    );
}

#[test]
fn a_tree_follows_the_children_its_transcripts_name() {
    let dir = tempfile::tempdir().unwrap();
    parent_with_call(dir.path(), 300);
    write(
        dir.path(),
        "kid",
        &[
            header(
                "kid",
                Some("root"),
                "look",
                serde_json::json!({"tool": "subagent", "call_id": "c1", "provider": "spawn"}),
            ),
            serde_json::json!({"type": "message", "message": Message::user("p")}),
            end("completed", 3_000, 4_000, 1_000),
        ],
    );
    // Not in this tree: never read (it would be a problem if it were).
    std::fs::write(dir.path().join("agents/other.jsonl"), "not json\n").unwrap();
    let tree = load(dir.path(), Some("root")).unwrap();
    let root = &tree.root;
    assert_eq!(root.children.len(), 1);
    let kid = &root.children[0];
    assert_eq!(kid.tool.as_deref(), Some("subagent"));
    assert_eq!(kid.provider.as_deref(), Some("spawn"));
    assert_eq!(kid.turns[0].queued_ms, Some(50));
    assert_eq!(kid.running_ms(0), Some(1_000));
    let result = kid.result.unwrap();
    assert_eq!(
        (result.full_bytes, result.shown_bytes, result.cut),
        (Some(1_000), Some(300), true)
    );
    assert_eq!(root.subtree_tokens.unwrap().total(), 240);
    assert!(tree.walk().iter().all(|(_, node)| node.problems.is_empty()));
    // The JSON shape carries its version.
    let json = serde_json::to_value(&tree).unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["root"]["children"][0]["result"]["cut"], true);
}

#[test]
fn without_an_id_the_most_recent_top_level_agent_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "old", &[header("old", None, "a", serde_json::Value::Null)]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(dir.path(), "new", &[header("new", None, "b", serde_json::Value::Null)]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // A child written later is not top-level.
    write(
        dir.path(),
        "kid",
        &[header("kid", Some("new"), "c", serde_json::Value::Null)],
    );
    assert_eq!(load(dir.path(), None).unwrap().root.id, "new");
}

#[test]
fn an_unknown_id_an_empty_directory_and_a_path_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let error = load(dir.path(), None).unwrap_err();
    assert!(matches!(error, LoadError::NoAgents { .. }));
    assert!(
        error.to_string().starts_with("no top-level agent has a transcript in "),
        "{error}"
    );
    let error = load(dir.path(), Some("nobody")).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("no agent \"nobody\" has a transcript in "),
        "{error}"
    );
    let error = load(dir.path(), Some("../etc/passwd")).unwrap_err();
    assert!(matches!(error, LoadError::BadAgentId { .. }), "{error}");
    let missing = tempfile::tempdir().unwrap();
    let error = load(&missing.path().join("none"), None).unwrap_err();
    assert!(error.to_string().starts_with("cannot list "), "{error}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn bad_records_are_marked_on_their_nodes_and_the_rest_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "root",
        &[
            header("root", Some("ghost"), "r", serde_json::Value::Null),
            child("missing"),
            child("torn"),
            child("foreign"),
            child("corrupt"),
            child("loop"),
            child("../escape"),
            child("fine"),
            end("completed", 1, 2, 0),
        ],
    );
    write(
        dir.path(),
        "torn",
        &[header("torn", Some("root"), "t", serde_json::Value::Null)],
    );
    let torn = transcript_path(dir.path(), &AgentId::new("torn"));
    let mut text = std::fs::read_to_string(&torn).unwrap();
    text.push_str(r#"{"type":"message","mess"#);
    std::fs::write(&torn, text).unwrap();
    write(
        dir.path(),
        "foreign",
        &[header("someone", Some("root"), "f", serde_json::Value::Null)],
    );
    std::fs::write(transcript_path(dir.path(), &AgentId::new("corrupt")), "{}\n{}\n").unwrap();
    // A cycle: `loop` names `root` (above it) as its child.
    write(
        dir.path(),
        "loop",
        &[
            header("loop", Some("root"), "l", serde_json::Value::Null),
            child("root"),
            end("completed", 1, 2, 0),
        ],
    );
    write(
        dir.path(),
        "fine",
        &[
            header("fine", Some("root"), "ok", serde_json::Value::Null),
            end("error: boom", 1, 2, 0),
        ],
    );
    let tree = load(dir.path(), Some("root")).unwrap();
    let root = &tree.root;
    assert_eq!(
        root.problems,
        [
            Problem::ParentMissing { parent: "ghost".into() },
            Problem::Foreign {
                message: "\"../escape\" is not an agent id (letters, digits, '-', '_', '.' and ':' only)".into()
            }
        ]
    );
    let ids: Vec<&str> = root.children.iter().map(|child| child.id.as_str()).collect();
    assert_eq!(ids, ["missing", "torn", "foreign", "corrupt", "loop", "fine"]);
    let problem = |index: usize| root.children[index].problems[0].to_string();
    assert!(problem(0).starts_with("no transcript at "), "{}", problem(0));
    assert!(problem(1).starts_with("torn transcript: "), "{}", problem(1));
    assert_eq!(
        problem(2),
        "not this agent's transcript: its header names agent someone"
    );
    assert!(problem(3).starts_with("transcript unreadable: "), "{}", problem(3));
    assert_eq!(
        problem(4),
        "names root as its child, which is already above it; not followed"
    );
    let fine = &root.children[5];
    assert!(fine.problems.is_empty());
    assert_eq!(
        fine.ending(),
        Some(&Ending::Stopped {
            reason: "error".into(),
            detail: Some("boom".into())
        })
    );
}

#[test]
fn older_transcripts_that_name_no_children_are_found_by_their_headers() {
    let dir = tempfile::tempdir().unwrap();
    // As written before runs recorded their times and children.
    let old_end = serde_json::json!({"type": "turn_end", "stop": "completed", "steps": 1});
    write(
        dir.path(),
        "root",
        &[header("root", None, "r", serde_json::Value::Null), old_end.clone()],
    );
    write(
        dir.path(),
        "kid",
        &[header("kid", Some("root"), "k", serde_json::Value::Null), old_end],
    );
    let tree = load(dir.path(), Some("root")).unwrap();
    assert_eq!(tree.root.children.len(), 1);
    assert_eq!(tree.root.children[0].ending(), Some(&Ending::Completed));
    assert_eq!(tree.root.children[0].turns[0].started_at_ms, None);
}

#[test]
fn a_resumed_agent_shows_every_turn_and_an_interrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "root",
        &[
            header("root", None, "r", serde_json::Value::Null),
            serde_json::json!({"type": "message", "message": Message::user("one")}),
            end("completed", 1_000, 2_000, 3),
            serde_json::json!({"type": "message", "message": Message::user("two")}),
            serde_json::json!({"type": "repair", "diagnostic": "cut", "torn": ""}),
            serde_json::json!({"type": "message", "message": Message::user("three")}),
            end("cancelled", 5_000, 6_000, 0),
            serde_json::json!({"type": "message", "message": Message::user("four")}),
        ],
    );
    // No process runs the tree: its open turn was interrupted.
    let tree = load(dir.path(), None).unwrap();
    let endings: Vec<&Ending> = tree.root.turns.iter().map(|turn| &turn.ending).collect();
    let interrupted = Ending::Interrupted {
        detail: "its process ended before the turn did; `dsh run --resume` goes on with it".into(),
    };
    assert_eq!(
        endings,
        [
            &Ending::Completed,
            &Ending::Interrupted { detail: "cut".into() },
            &Ending::Stopped {
                reason: "cancelled".into(),
                detail: None
            },
            &interrupted,
        ]
    );
    assert_eq!(tree.root.tokens.unwrap().total(), 240);
    // While a process holds the tree's lock, the open turn runs.
    let _running = TreeLock::acquire(dir.path(), &AgentId::new("root")).unwrap();
    let tree = load(dir.path(), None).unwrap();
    assert_eq!(tree.root.turns.last().map(|turn| &turn.ending), Some(&Ending::Running));
}

#[test]
fn a_version_two_repair_keeps_the_turn_and_a_resumable_stop_reads_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let mut root = header("root", None, "r", serde_json::Value::Null);
    root["version"] = 2.into();
    write(
        dir.path(),
        "root",
        &[
            root,
            serde_json::json!({"type": "message", "message": Message::user("one")}),
            serde_json::json!({"type": "repair", "diagnostic": "cut", "torn": "{\"ty"}),
            end("interrupted", 1_000, 2_000, 0),
            serde_json::json!({"type": "message", "message": Message::assistant("goes on")}),
            end("completed", 3_000, 4_000, 1),
        ],
    );
    let tree = load(dir.path(), None).unwrap();
    let endings: Vec<&Ending> = tree.root.turns.iter().map(|turn| &turn.ending).collect();
    assert_eq!(
        endings,
        [
            &Ending::Interrupted {
                detail: "stopped resumably; `dsh run --resume` goes on with it".into()
            },
            &Ending::Completed,
        ]
    );
}

#[test]
fn a_transcript_the_agent_loop_writes_loads() {
    // The writer's own entries round-trip through the loader.
    let dir = tempfile::tempdir().unwrap();
    let writer = TranscriptWriter::open(transcript_path(dir.path(), &AgentId::new("w"))).unwrap();
    let entry: TranscriptEntry = serde_json::from_value(header("w", None, "w", serde_json::Value::Null)).unwrap();
    writer.append(&entry).unwrap();
    let end: TranscriptEntry = serde_json::from_value(end("completed", 1, 2, 3)).unwrap();
    writer.append(&end).unwrap();
    writer.flush().unwrap();
    let tree = load(dir.path(), Some("w")).unwrap();
    assert_eq!(tree.root.turns[0].answer_bytes, Some(3));
    assert_eq!(
        tree.root.tokens,
        Some(dsh_tree::Tokens::from_usage(&Usage::reported(100, 20)))
    );
}

/// A parent that called an ACP agent's tool (`remote`, call `c9`, answered
/// with 40 bytes) and recorded the child's start and end, naming its
/// session and, when given, the data directory where it keeps its own
/// transcripts.
fn parent_of_remote(dir: &Path, data_dir: Option<&Path>) {
    let call = Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: "c9".into(),
            name: "remote".into(),
            arguments: r#"{"description":"ask it","prompt":"p"}"#.into(),
        }],
    };
    let mut record = serde_json::json!({
        "provider": "acp:remote", "tool": "remote", "call_id": "c9", "label": "ask it",
        "session": "sess-1", "at_ms": 2_100,
    });
    if let Some(data_dir) = data_dir {
        record["data_dir"] = data_dir.display().to_string().into();
    }
    let mut ended = record.clone();
    ended["at_ms"] = 2_900.into();
    ended["ended"] = serde_json::json!({"stop": "completed", "answer_bytes": 40});
    write(
        dir,
        "root",
        &[
            header("root", None, "dsh run", serde_json::Value::Null),
            serde_json::json!({"type": "message", "message": Message::user("go")}),
            serde_json::json!({"type": "message", "message": call}),
            serde_json::json!({"type": "child", "id": "acp-1", "elsewhere": record}),
            serde_json::json!({"type": "child", "id": "acp-1", "elsewhere": ended}),
            serde_json::json!({"type": "message", "message": Message::tool("c9", "y".repeat(40))}),
            end("completed", 2_000, 3_000, 5),
        ],
    );
}

#[test]
fn an_acp_child_shows_its_own_tree_from_the_data_directory_it_named() {
    let dir = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    parent_of_remote(dir.path(), Some(remote.path()));
    // The other process's records: its session's agent, and a child of it.
    write(
        remote.path(),
        "sess-1",
        &[
            header("sess-1", None, "dsh acp", serde_json::Value::Null),
            child("deep"),
            end("completed", 2_200, 2_800, 40),
        ],
    );
    write(
        remote.path(),
        "deep",
        &[
            header(
                "deep",
                Some("sess-1"),
                "look",
                serde_json::json!({"tool": "subagent", "call_id": "x", "provider": "spawn"}),
            ),
            end("completed", 2_300, 2_400, 7),
        ],
    );
    let tree = load(dir.path(), Some("root")).unwrap();
    let acp = &tree.root.children[0];
    assert_eq!(acp.id, "sess-1");
    assert_eq!(acp.depth, 1);
    assert_eq!(acp.tool.as_deref(), Some("remote"));
    assert_eq!(acp.label.as_deref(), Some("ask it"));
    assert_eq!(acp.provider.as_deref(), Some("acp:remote"));
    assert_eq!(
        acp.place,
        Place::Transcript {
            path: transcript_path(remote.path(), &AgentId::new("sess-1"))
                .display()
                .to_string()
        }
    );
    assert_eq!(acp.ending(), Some(&Ending::Completed));
    let result = acp.result.unwrap();
    assert_eq!(
        (result.full_bytes, result.shown_bytes, result.cut),
        (Some(40), Some(40), false)
    );
    assert_eq!(acp.children.len(), 1);
    assert_eq!(acp.children[0].id, "deep");
    assert_eq!(acp.children[0].depth, 2);
    // Its tokens count in the parent's subtree.
    assert_eq!(tree.root.subtree_tokens.unwrap().total(), 360);
    assert!(tree.walk().iter().all(|(_, node)| node.problems.is_empty()));
}

#[test]
fn an_acp_child_whose_records_cannot_be_read_says_where_it_ran() {
    // No data directory named: what the parent recorded, run elsewhere.
    let dir = tempfile::tempdir().unwrap();
    parent_of_remote(dir.path(), None);
    let tree = load(dir.path(), Some("root")).unwrap();
    let acp = &tree.root.children[0];
    assert_eq!(acp.id, "acp-1");
    assert_eq!(
        acp.place,
        Place::Elsewhere {
            ran: "acp:remote, session sess-1".into()
        }
    );
    assert_eq!(acp.tool.as_deref(), Some("remote"));
    assert_eq!(acp.label.as_deref(), Some("ask it"));
    assert_eq!(acp.ending(), Some(&Ending::Completed));
    assert_eq!(acp.running_ms(0), Some(800));
    assert_eq!(acp.result.unwrap().full_bytes, Some(40));
    assert!(acp.problems.is_empty());

    // A data directory named, but not readable here (another host's).
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("elsewhere");
    parent_of_remote(dir.path(), Some(&gone));
    let tree = load(dir.path(), Some("root")).unwrap();
    let acp = &tree.root.children[0];
    assert!(matches!(acp.place, Place::Elsewhere { .. }), "{:?}", acp.place);
    assert_eq!(acp.problems.len(), 1);
    assert!(
        acp.problems[0].to_string().starts_with("no transcript at "),
        "{}",
        acp.problems[0]
    );
}

#[test]
fn a_background_child_shows_its_task_and_what_its_parent_read_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let start = Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "subagent".into(),
            arguments: r#"{"description":"bg","prompt":"p","run_in_background":true}"#.into(),
        }],
    };
    let read = |id: &str, arguments: &str| Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: "task_output".into(),
            arguments: arguments.into(),
        }],
    };
    let entries: Vec<serde_json::Value> = [
        Message::user("go"),
        start,
        Message::tool("c1", "started background subagent task subagent-1"),
        // Read while it ran, then once it had finished (cut), then a page.
        read("r1", r#"{"task_id":"subagent-1"}"#),
        Message::tool("r1", "(running)"),
        read("r2", r#"{"task_id":"subagent-1","wait_ms":1000}"#),
        Message::tool("r2", "z".repeat(700)),
        read("r3", r#"{"task_id":"subagent-1","offset":700}"#),
        Message::tool("r3", "page"),
    ]
    .into_iter()
    .map(|message| serde_json::json!({"type": "message", "message": message}))
    .collect();
    let mut root = vec![header("root", None, "r", serde_json::Value::Null)];
    root.extend(entries);
    root.insert(3, child("kid"));
    root.push(end("completed", 1_000, 5_000, 2));
    write(dir.path(), "root", &root);
    write(
        dir.path(),
        "kid",
        &[
            header(
                "kid",
                Some("root"),
                "bg",
                serde_json::json!({"tool": "subagent", "call_id": "c1", "provider": "spawn", "task_id": "subagent-1"}),
            ),
            end("completed", 1_100, 2_000, 5_000),
        ],
    );
    let tree = load(dir.path(), Some("root")).unwrap();
    let kid = &tree.root.children[0];
    assert_eq!(kid.task_id.as_deref(), Some("subagent-1"));
    let result = kid.result.unwrap();
    assert_eq!(
        (result.full_bytes, result.shown_bytes, result.cut),
        (Some(5_000), Some(700), true)
    );
    let json = serde_json::to_value(&tree).unwrap();
    assert_eq!(json["root"]["children"][0]["task_id"], "subagent-1");
}

#[test]
fn a_cycle_in_the_headers_and_a_file_without_a_header_are_marked() {
    // Older transcripts, found by their headers: `a` and `b` name each
    // other as parent; `c` under `a` has no header at all.
    let dir = tempfile::tempdir().unwrap();
    let old_end = serde_json::json!({"type": "turn_end", "stop": "completed", "steps": 1});
    write(
        dir.path(),
        "a",
        &[header("a", Some("b"), "a", serde_json::Value::Null), old_end.clone()],
    );
    write(
        dir.path(),
        "b",
        &[header("b", Some("a"), "b", serde_json::Value::Null), old_end.clone()],
    );
    write(
        dir.path(),
        "c",
        &[header("c", Some("a"), "c", serde_json::Value::Null), old_end.clone()],
    );
    let tree = load(dir.path(), Some("a")).unwrap();
    let ids: Vec<&str> = tree.root.children.iter().map(|child| child.id.as_str()).collect();
    assert_eq!(ids, ["b", "c"]);
    let b = &tree.root.children[0];
    assert_eq!(b.problems, [Problem::Cycle { child: "a".into() }], "{:?}", b.problems);
    assert!(tree.root.children[1].problems.is_empty());

    // A file whose first line is a message, not a header.
    write(
        dir.path(),
        "c",
        &[
            serde_json::json!({"type": "message", "message": Message::user("hi")}),
            old_end,
        ],
    );
    let tree = load(dir.path(), Some("a")).unwrap();
    // No longer found by its header; named by id, it is foreign.
    assert_eq!(tree.root.children.len(), 1);
    write(
        dir.path(),
        "p",
        &[
            header("p", None, "p", serde_json::Value::Null),
            child("c"),
            end("completed", 1, 2, 0),
        ],
    );
    let tree = load(dir.path(), Some("p")).unwrap();
    assert_eq!(
        tree.root.children[0].problems[0].to_string(),
        "not this agent's transcript: its first line is not a transcript header"
    );
}

#[test]
fn an_acp_childs_own_subagents_show_under_it_with_their_tasks_and_states() {
    let dir = tempfile::tempdir().unwrap();
    parent_of_remote(dir.path(), None);
    // The child's end, recorded again with the sessions it announced.
    let path = transcript_path(dir.path(), &AgentId::new("root"));
    let text = std::fs::read_to_string(&path).unwrap().replace(
        r#""ended":{"stop":"completed","answer_bytes":40}"#,
        r#""ended":{"stop":"completed","answer_bytes":40},"subagents":[
            {"session":"s-a","label":"reader","task":"read it","stop":"completed"},
            {"session":"s-b","label":"writer","stop":"disconnected"},
            {"session":"s-a1","parent":"s-a","label":"helper","task":"help","stop":"error: disk full"}]"#
            .replace('\n', "")
            .as_str(),
    );
    std::fs::write(&path, text).unwrap();
    let tree = load(dir.path(), Some("root")).unwrap();
    let acp = &tree.root.children[0];
    /// A node as the test reads it: its level, id, label, task and ending.
    type Shown = (usize, String, Option<String>, Option<String>, Option<Ending>);
    let shown: Vec<Shown> = tree
        .walk()
        .into_iter()
        .skip(2)
        .map(|(level, node)| {
            (
                level,
                node.id.clone(),
                node.label.clone(),
                node.task.clone(),
                node.ending().cloned(),
            )
        })
        .collect();
    assert_eq!(acp.children.len(), 2);
    assert_eq!(
        shown,
        [
            (
                2,
                "s-a".into(),
                Some("reader".into()),
                Some("read it".into()),
                Some(Ending::Completed)
            ),
            (
                3,
                "s-a1".into(),
                Some("helper".into()),
                Some("help".into()),
                Some(Ending::from_stop("error: disk full"))
            ),
            (
                2,
                "s-b".into(),
                Some("writer".into()),
                None,
                Some(Ending::from_stop("disconnected"))
            ),
        ]
    );
    assert_eq!(
        acp.children[0].place,
        Place::Elsewhere {
            ran: "a subagent session of acp-1".into()
        }
    );
    assert_eq!(acp.children[0].depth, 2);
}

/// A background child recorded only by its start (the process died before
/// its parent wrote the child's own entry) shows once it keeps a transcript
/// of its own; one that never began is not shown.
#[test]
fn a_background_child_known_only_by_its_start_record_shows_once_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let start = |id: &str, call: &str| {
        serde_json::json!({"type": "child_start", "id": id,
            "start": {"task_id": "subagent-1", "descriptor": {}, "prompt": "p", "call_id": call}})
    };
    write(
        dir.path(),
        "root",
        &[
            header("root", None, "dsh run", serde_json::Value::Null),
            serde_json::json!({"type": "message", "message": Message::user("go")}),
            start("ran", "c1"),
            start("never", "c2"),
        ],
    );
    write(
        dir.path(),
        "ran",
        &[
            header("ran", Some("root"), "bg", serde_json::Value::Null),
            end("completed", 1_100, 2_000, 5),
        ],
    );
    let tree = load(dir.path(), Some("root")).unwrap();
    let ids: Vec<&str> = tree.root.children.iter().map(|child| child.id.as_str()).collect();
    assert_eq!(ids, ["ran"]);
}
