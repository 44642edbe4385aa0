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
    // The task that keeps the cut result: the second call's id, reserved
    // when the call started. The short one's result was whole: no task.
    assert!(lines[2].ends_with(" · task subagent-2"), "{text}");
    assert!(!lines[1].contains(" · task "), "{text}");

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
    assert_eq!(children[0]["task_id"], serde_json::Value::Null);
    assert_eq!(children[1]["task_id"], "subagent-2");

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

/// A background child: its task's id, and its answer in full against what
/// the parent's model read of it through `task_output` (cut to the
/// default result budget).
#[test]
fn dsh_tree_shows_a_background_childs_task_and_what_was_read_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let long = "word ".repeat(10_000);
    let script = serde_json::json!({"rules": [
        {"when": {"tool_not_offered": "subagent"}, "reply": {"text": long}},
        {"when": {"last_tool": "task_output"}, "reply": {"text": "collected"}},
        {"when": {"last_tool": "subagent"},
         "reply": {"tool_calls": [{"name": "task_output", "arguments": {"task_id": "subagent-1", "wait": true}}]}},
        {"when": {"last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "in the background", "prompt": "work", "run_in_background": true}}]}}
    ]});
    std::fs::write(dir.path().join("bg.json"), script.to_string()).unwrap();
    let run = dsh(dir.path(), &["run", "--quiet", "--script", "bg.json", "go"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let json = dsh(dir.path(), &["tree", "--json"]);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let child = &json["root"]["children"][0];
    assert_eq!(child["task_id"], "subagent-1", "{child:#}");
    assert_eq!(child["result"]["full_bytes"], 50_000, "{child:#}");
    assert_eq!(child["result"]["cut"], true, "{child:#}");
    let shown = child["result"]["shown_bytes"].as_u64().unwrap();
    assert!(shown > 1_000 && shown < 50_000, "{child:#}");

    let text = dsh(dir.path(), &["tree"]);
    let text = String::from_utf8(text.stdout).unwrap();
    let line = text.lines().nth(1).unwrap();
    assert!(line.contains(" · result 50 KB, "), "{text}");
    assert!(line.ends_with(" shown (cut) · task subagent-1"), "{text}");
}

/// The parent asks two ACP children at once: `dsh acp` keeping transcripts
/// in its own data directory (its own parent delegates once there), and
/// `dsh acp` keeping none.
const ACP_PARENT: &str = r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}},
    {"name": "subagent_blind", "arguments": {"description": "ask the blind", "prompt": "hello blind"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "both answered"}}
]}"#;

const ACP_DELEGATING_CHILD: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "looked"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "look it up", "prompt": "look"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "remote done"}}
]}"#;

const ACP_PLAIN_CHILD: &str = r#"{"rules": [{"when": {}, "reply": {"text": "blind here"}}]}"#;

/// An ACP child shows its own subtree, read from the data directory it
/// named; one that keeps no transcripts says where it ran.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn dsh_tree_shows_an_acp_childs_own_tree_or_where_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let parent = write("parent.json", ACP_PARENT);
    let remote = write("remote.json", ACP_DELEGATING_CHILD);
    let blind = write("blind.json", ACP_PLAIN_CHILD);
    let dsh_path = common::DSH;
    // Not `dsh.toml`: the children run in the same directory and must not
    // mount themselves again.
    let config = write(
        "parent.toml",
        &format!(
            r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {dsh_path:?}
args = ["acp", "--quiet", "--data-dir", "remote-data", "--script", {remote:?}]
max_depth = "provider-managed"

[[subagents]]
tool_name = "subagent_blind"
provider = "acp"
command = {dsh_path:?}
args = ["acp", "--quiet", "--script", {blind:?}]
max_depth = "provider-managed"
"#
        ),
    );
    let run = dsh(
        dir.path(),
        &["run", "--quiet", "--config", &config, "--script", &parent, "go"],
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let json = dsh(dir.path(), &["tree", "--json"]);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let children = json["root"]["children"].as_array().unwrap();
    assert_eq!(children.len(), 2, "{json:#}");
    let by_tool = |tool: &str| {
        children
            .iter()
            .find(|child| child["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} in {json:#}"))
    };

    // Read from its own data directory: the session's agent, and below it
    // the child it started there.
    let remote = by_tool("subagent_remote");
    assert_eq!(remote["label"], "ask the remote");
    assert_eq!(remote["provider"], "acp:subagent_remote");
    assert_eq!(remote["depth"], 1);
    assert_eq!(remote["place"]["kind"], "transcript", "{remote:#}");
    let remote_data = dir.path().join("remote-data").canonicalize().unwrap();
    let path = std::path::PathBuf::from(remote["place"]["path"].as_str().unwrap());
    assert_eq!(
        path.parent().unwrap().parent().unwrap().canonicalize().unwrap(),
        remote_data
    );
    assert_eq!(
        path.file_stem().unwrap().to_str().unwrap(),
        remote["id"].as_str().unwrap()
    );
    assert_eq!(remote["turns"][0]["ending"]["state"], "completed");
    assert_eq!(remote["turns"][0]["model_calls"], 2);
    assert_eq!(remote["result"]["full_bytes"], "remote done".len());
    let deep = &remote["children"][0];
    assert_eq!(deep["label"], "look it up", "{remote:#}");
    assert_eq!(deep["tool"], "subagent");
    assert_eq!(deep["depth"], 2);
    assert_eq!(deep["turns"][0]["ending"]["state"], "completed");

    // Keeps no transcripts: what the parent recorded, and where it ran.
    let blind = by_tool("subagent_blind");
    assert_eq!(blind["label"], "ask the blind");
    assert_eq!(blind["place"]["kind"], "elsewhere", "{blind:#}");
    let ran = blind["place"]["ran"].as_str().unwrap();
    assert!(ran.starts_with("acp:subagent_blind, session "), "{ran}");
    assert!(blind["id"].as_str().unwrap().starts_with("acp-"), "{blind:#}");
    assert_eq!(blind["turns"][0]["ending"]["state"], "completed");
    assert_eq!(blind["result"]["full_bytes"], "blind here".len());
    assert!(blind["problems"].as_array().unwrap().is_empty(), "{blind:#}");

    let text = dsh(dir.path(), &["tree"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("subagent_remote \"ask the remote\" "), "{text}");
    assert!(text.contains("subagent \"look it up\" "), "{text}");
    assert!(
        text.lines().any(|line| line
            .trim_start_matches(['│', ' '])
            .starts_with("ran in acp:subagent_blind, session ")),
        "{text}"
    );
}

/// Records damaged after a run: one child's transcript gone, the other's
/// torn mid-line. Each is marked on its node and the rest of the tree is
/// shown, as text and as JSON; the command succeeds.
#[test]
fn dsh_tree_marks_damaged_records_and_shows_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    let run = dsh(dir.path(), &["run", "--quiet", "--script", &script, "PARENT task"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json = dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let path =
        |index: usize| std::path::PathBuf::from(json["root"]["children"][index]["place"]["path"].as_str().unwrap());
    let (short, long) = (dir.path().join(path(0)), dir.path().join(path(1)));
    std::fs::remove_file(&short).unwrap();
    let mut torn = std::fs::read_to_string(&long).unwrap();
    torn.push_str(r#"{"type":"message","mess"#);
    std::fs::write(&long, torn).unwrap();

    let text = dsh(dir.path(), &["tree"]);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("\"dsh run\" "), "{text}");
    // Without its transcript, what the parent's call says of it: its tool
    // and label.
    let short_id = short.file_stem().unwrap().to_str().unwrap();
    assert_eq!(lines[1], format!("├─ subagent \"short one\" {short_id}"), "{text}");
    assert!(lines[2].starts_with("│     ! no transcript at "), "{text}");
    assert!(lines[3].starts_with("└─ subagent \"long one\" "), "{text}");
    assert!(lines[3].contains(" · completed · "), "{text}");
    assert!(lines[4].starts_with("      ! torn transcript: "), "{text}");

    let json = dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let children = json["root"]["children"].as_array().unwrap();
    assert_eq!(children[0]["problems"][0]["kind"], "missing");
    assert_eq!(children[0]["depth"], 1);
    assert_eq!(children[0]["label"], "short one");
    assert_eq!(children[1]["problems"][0]["kind"], "torn");
    assert_eq!(children[1]["turns"][0]["ending"]["state"], "completed");
}

/// An ACP child that announces subagent sessions of its own (the fault
/// agent's `subagents` mode: `reader` with `helper` under it, and `writer`):
/// `dsh tree` shows them under it, with their titles, tasks and states.
#[test]
fn dsh_tree_shows_the_subagents_an_acp_child_announced() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.json");
    std::fs::write(
        &parent,
        r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_agent", "arguments": {"description": "ask the agent", "prompt": "go"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "answered"}}
]}"#,
    )
    .unwrap();
    let agent = dsh_test_programs::Program::AcpFaultAgent.path();
    let config = dir.path().join("parent.toml");
    std::fs::write(
        &config,
        format!(
            "[[subagents]]\ntool_name = \"subagent_agent\"\nprovider = \"acp\"\ncommand = {agent:?}\nargs = [\"subagents\"]\nmax_depth = \"provider-managed\"\n"
        ),
    )
    .unwrap();
    let (parent, config) = (parent.display().to_string(), config.display().to_string());
    let run = dsh(
        dir.path(),
        &["run", "--quiet", "--config", &config, "--script", &parent, "go"],
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let json = dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let acp = &json["root"]["children"][0];
    let shown: Vec<(String, String, String)> = acp["children"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|child| std::iter::once(child).chain(child["children"].as_array().unwrap()))
        .map(|node| {
            (
                node["label"].as_str().unwrap().to_owned(),
                node["task"].as_str().unwrap().to_owned(),
                node["turns"][0]["ending"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "reader".into(),
                "the reader's task".into(),
                r#"{"state":"completed"}"#.into()
            ),
            (
                "helper".into(),
                "the helper's task".into(),
                r#"{"state":"completed"}"#.into()
            ),
            (
                "writer".into(),
                "the writer's task".into(),
                r#"{"state":"stopped","reason":"error","detail":"disk full"}"#.into()
            ),
        ],
        "{acp:#}"
    );
    let text = dsh(dir.path(), &["tree"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("\"helper\""), "{text}");
    assert!(text.contains("asked: the writer's task"), "{text}");
}
