//! `dsh tree` after a real `dsh run`: the tree its transcripts record, as
//! text and as JSON. Offline: the parent and its children run one script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::dsh;

/// The parent delegates twice in one answer; the `long` child's answer is
/// cut to the default result budget.
fn script(dir: &Path) -> String {
    let long = "word ".repeat(10_000);
    let script = serde_json::json!({"rules": [
        {"when": {"first_user_contains": "PARENT", "last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "short one", "prompt": "say hi"}},
            {"name": "subagent", "arguments": {"description": "long one", "prompt": "long please"}}]}},
        {"when": {"first_user_contains": "PARENT", "last_message": "tool"}, "reply": {"text": "done"}},
        {"when": {"first_user_contains": "long"}, "reply": {"text": long}},
        {"when": {}, "reply": {"text": "hi"}}
    ]});
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn dsh_tree_shows_what_a_run_did_as_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let run = dsh(dir.path(), &["run", "--quiet", "--script", &script, "PARENT task"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let text = dsh(dir.path(), &["tree"]);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("\"dsh run\" "), "{text}");
    assert!(lines[0].contains(" · completed · ran "), "{text}");
    assert!(lines[0].contains(" · 2 model calls · tokens "), "{text}");
    assert!(lines[0].contains(" · subtree "), "{text}");
    assert!(lines[1].starts_with("├─ subagent \"short one\" "), "{text}");
    assert!(lines[1].contains(" (spawn, scripted) · completed · ran "), "{text}");
    assert!(lines[1].ends_with(" · result 2 B"), "{text}");
    assert!(lines[2].starts_with("└─ subagent \"long one\" "), "{text}");
    assert!(lines[2].contains(" · result 50 KB, 32 KB shown (cut)"), "{text}");

    let json = dsh(dir.path(), &["tree", "--json"]);
    assert!(json.status.success());
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["version"], 1);
    let root = &json["root"];
    assert_eq!(root["label"], "dsh run");
    assert_eq!(root["turns"][0]["ending"]["state"], "completed");
    let children = root["children"].as_array().unwrap();
    assert_eq!(children.len(), 2);
    for child in children {
        assert_eq!(child["tool"], "subagent");
        assert_eq!(child["provider"], "spawn");
        assert_eq!(child["depth"], 1);
        let turn = &child["turns"][0];
        assert!(turn["started_at_ms"].as_u64().unwrap() <= turn["ended_at_ms"].as_u64().unwrap());
        assert_eq!(turn["model_calls"], 1);
        assert_eq!(turn["calls_at_ms"].as_array().unwrap().len(), 1);
    }
    assert_eq!(children[1]["result"]["cut"], true);
    assert_eq!(children[1]["result"]["full_bytes"], 50_000);

    // The same tree, asked for by id.
    let id = root["id"].as_str().unwrap();
    let by_id = dsh(dir.path(), &["tree", id, "--json"]);
    let by_id: serde_json::Value = serde_json::from_slice(&by_id.stdout).unwrap();
    assert_eq!(by_id, json);
}

#[test]
fn dsh_tree_says_clearly_what_it_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let none = dsh(dir.path(), &["tree"]);
    assert_eq!(none.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(stderr.starts_with("dsh tree: cannot list .dsh/agents: "), "{stderr}");
    std::fs::create_dir_all(dir.path().join(".dsh/agents")).unwrap();
    let unknown = dsh(dir.path(), &["tree", "nobody"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&unknown.stderr),
        "dsh tree: no agent \"nobody\" has a transcript in .dsh/agents\n"
    );
    let both = dsh(dir.path(), &["tree", "--json", "--html", "x.html"]);
    assert_eq!(both.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&both.stderr),
        "dsh tree: --json and --html cannot be used together\n"
    );
}
