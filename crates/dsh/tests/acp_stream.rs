//! What an ACP client sees of `dsh acp`: streamed text, tool calls and
//! their ends, a delegation's progress, a cancelled turn's partial text, and
//! a session loaded from its transcript. Offline (scripted models).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{DSH, Peer, updates};
use serde_json::{Value, json};

/// One script for every agent of the tree: the top parent (offered
/// `subagent_remote`), the `dsh acp` child's own parent agent (offered
/// `subagent_fork`, not `subagent_remote`) and the terse spawn child (its
/// persona in the system prompt).
const TREE_SCRIPT: &str = r#"{"rules": [
  {"when": {"system_contains": "You are Terse.", "tool_offered": "task_list", "tool_not_offered": "subagent"},
   "reply": {"text": "terse child, filtered"}},
  {"when": {"system_contains": "You are Terse."}, "reply": {"text": "terse child, unfiltered"}},
  {"when": {"tool_offered": "subagent_fork", "tool_not_offered": "subagent_remote"},
   "reply": {"text": "remote dsh acp here"}},
  {"when": {"tool_offered": "subagent_remote", "last_message": "user"},
   "reply": {"text": "Asking both.", "tool_calls": [
     {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}},
     {"name": "subagent", "arguments": {"description": "ask the terse one", "prompt": "hello terse"}}
   ]}},
  {"when": {"tool_offered": "subagent_remote", "last_message": "tool"}, "reply": {"text": "Both answered."}}
]}"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A configuration that mounts a terse, filtered spawn child as `subagent`
/// and `dsh acp` itself as the ACP child `subagent_remote`. Not `dsh.toml`:
/// the child runs in the same directory and must not mount itself again.
fn tree_config(dir: &Path, script: &str) -> String {
    let config = format!(
        r#"[[subagents]]
provider = "spawn"
persona = "You are Terse."
tool_filter = {{ allow = ["task_list"] }}
max_depth = 1

[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {dsh:?}
args = ["acp", "--quiet", "--script", {script:?}]
max_depth = "provider-managed"
"#,
        dsh = DSH,
    );
    write(dir, "parent.toml", &config)
}

fn position(updates: &[Value], wanted: impl Fn(&Value) -> bool) -> usize {
    updates
        .iter()
        .position(wanted)
        .unwrap_or_else(|| panic!("no such update in {updates:#?}"))
}

fn is(update: &Value, kind: &str, call: &str) -> bool {
    update["sessionUpdate"] == kind && update["toolCallId"] == call
}

#[test]
fn a_configured_tree_streams_in_order_through_an_acp_child_and_a_persona() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", TREE_SCRIPT);
    let config = tree_config(dir.path(), &script);
    let mut peer = Peer::start(dir.path(), &["--quiet", "--config", &config, "--script", &script]);
    peer.initialize();
    let session = peer.new_session(dir.path());
    peer.prompt(3, &session, "Ask both of them.");
    let turn = peer.until_response(3);
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn", "{turn:#?}");
    let updates = updates(&turn);

    // The text of each model call streams before the end of the turn; the
    // scripted model gives a call's words at once, so each call is one chunk.
    let chunks: Vec<&str> = updates
        .iter()
        .filter(|update| update["sessionUpdate"] == "agent_message_chunk")
        .map(|update| update["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(chunks, ["Asking both.", "Both answered."]);

    for (call, title, answer) in [
        ("call_1_0", "ask the remote", "remote dsh acp here"),
        ("call_1_1", "ask the terse one", "terse child, filtered"),
    ] {
        // Announced (title = the task description, kind, raw input), then
        // in progress, then completed with the child's answer.
        let announced = position(&updates, |update| is(update, "tool_call", call));
        assert_eq!(updates[announced]["title"], title);
        assert_eq!(updates[announced]["kind"], "think");
        assert_eq!(updates[announced]["rawInput"]["description"], title);
        let running = position(&updates, |update| {
            is(update, "tool_call_update", call) && update["status"] == "in_progress"
        });
        let completed = position(&updates, |update| {
            is(update, "tool_call_update", call) && update["status"] == "completed"
        });
        assert!(announced < running && running < completed, "{updates:#?}");
        let result = updates[completed]["content"][0]["content"]["text"].as_str().unwrap();
        assert!(result.contains(answer), "{call}: {result}");
        // The second model call's text follows every tool result.
        let second = position(&updates, |update| update["content"]["text"] == "Both answered.");
        assert!(completed < second);
    }

    // The in-process child's progress shows on its delegation call while it runs.
    let progress = position(&updates, |update| {
        is(update, "tool_call_update", "call_1_1")
            && update.get("status").is_none()
            && update["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with("ask the terse one: "))
    });
    let completed = position(&updates, |update| {
        is(update, "tool_call_update", "call_1_1") && update["status"] == "completed"
    });
    assert!(progress < completed);

    // The ACP child runs in another process: its start (with its provider)
    // and its end show on its delegation call too, from the run events.
    let lines_of = |call: &str| -> Vec<String> {
        updates
            .iter()
            .filter(|update| is(update, "tool_call_update", call) && update.get("status").is_none())
            .filter_map(|update| update["content"][0]["content"]["text"].as_str().map(str::to_owned))
            .collect()
    };
    // It streamed its answer, which its provider forwards: "answering".
    assert_eq!(
        lines_of("call_1_0"),
        [
            "ask the remote: started (acp:subagent_remote)",
            "ask the remote: answering",
            "ask the remote: completed"
        ],
        "{updates:#?}"
    );
}

/// The `dsh acp` child's own parent agent delegates once (in its process)
/// before it answers; its spawn child answers at once.
const DELEGATING_CHILD_SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "looked"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "look it up", "prompt": "look"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "remote done"}}
]}"#;

/// The top parent asks `subagent_remote`, then repeats what it heard.
const ASKING_PARENT_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "Parent heard: {{last_tool_result}}"}}
]}"#;

/// A configuration whose one tool, `subagent_remote`, runs `dsh acp` on `script`.
fn remote_config(dir: &Path, script: &str) -> String {
    let config = format!(
        r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {dsh:?}
args = ["acp", "--quiet", "--script", {script:?}]
max_depth = "provider-managed"
"#,
        dsh = DSH,
    );
    write(dir, "remote.toml", &config)
}

#[test]
fn an_acp_childs_tool_calls_show_on_the_delegation_call_that_started_it() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.json", ASKING_PARENT_SCRIPT);
    let child = write(dir.path(), "child.json", DELEGATING_CHILD_SCRIPT);
    let config = remote_config(dir.path(), &child);
    let mut peer = Peer::start(dir.path(), &["--quiet", "--config", &config, "--script", &parent]);
    peer.initialize();
    let session = peer.new_session(dir.path());
    peer.prompt(3, &session, "Ask the remote.");
    let turn = peer.until_response(3);
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn", "{turn:#?}");
    let updates = updates(&turn);
    let lines: Vec<String> = updates
        .iter()
        .filter(|update| is(update, "tool_call_update", "call_1_0") && update.get("status").is_none())
        .map(|update| {
            // One line per child: the child's line replaces the last one.
            let content = update["content"].as_array().unwrap();
            assert_eq!(content.len(), 1, "{update}");
            content[0]["content"]["text"].as_str().unwrap().to_owned()
        })
        .collect();
    // What the ACP child reported while it worked, in order: its own
    // delegation (by its title), that it ended, its answer streaming, then
    // its end with the tool calls it made. Each report replaces the line;
    // one that said the same again sent nothing.
    let expected = [
        "ask the remote: started (acp:subagent_remote)",
        "ask the remote: calling look it up",
        "ask the remote: look it up done",
        "ask the remote: answering",
        "ask the remote: completed · 1 tool call",
    ];
    assert_eq!(lines.first().map(String::as_str), Some(expected[0]), "{lines:#?}");
    assert_eq!(lines.last().map(String::as_str), Some(expected[4]), "{lines:#?}");
    assert!(lines.iter().any(|line| line == expected[2]), "{lines:#?}");
    // A report may come before the child's start is announced (then only
    // the latest shows after it), never out of order.
    let mut rest = expected.iter();
    for line in &lines {
        assert!(rest.any(|wanted| wanted == line), "{line} out of order in {lines:#?}");
    }
    let completed = position(&updates, |update| {
        is(update, "tool_call_update", "call_1_0") && update["status"] == "completed"
    });
    let result = updates[completed]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(result.contains("remote done"), "{result}");
}

#[test]
fn a_cancelled_turn_keeps_the_text_already_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "script.json",
        r#"{"rules": [{"when": {}, "reply": {"text": "first second third fourth", "delay_ms": 400}}]}"#,
    );
    let mut peer = Peer::start(dir.path(), &["--quiet", "--script", &script]);
    peer.initialize();
    let session = peer.new_session(dir.path());
    peer.prompt(3, &session, "Talk slowly.");
    // The first chunk arrives while the turn is still running.
    let first = peer.next();
    assert_eq!(first["params"]["update"]["content"]["text"], "first ", "{first}");
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let rest = peer.until_response(3);
    assert_eq!(rest.last().unwrap()["result"]["stopReason"], "cancelled");
    assert!(updates(&rest).len() <= 1, "cancelled promptly: {rest:#?}");
}

#[test]
fn session_load_replays_the_history_then_takes_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(
        dir.path(),
        "script.json",
        r#"{"rules": [{"when": {}, "reply": {"text": "answer {{assistant_turns}} to {{last_user}}"}}]}"#,
    );
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let args = ["--quiet", "--script", script.as_str(), "--data-dir", data];

    let mut first = Peer::start(dir.path(), &args);
    assert_eq!(first.initialize()["agentCapabilities"]["loadSession"], true);
    let session = first.new_session(dir.path());
    first.prompt(3, &session, "one");
    assert_eq!(
        first.until_response(3).last().unwrap()["result"]["stopReason"],
        "end_turn"
    );
    drop(first.stdin);
    assert!(first.child.wait().unwrap().success());

    let mut second = Peer::start(dir.path(), &args);
    second.initialize();
    second.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": {"sessionId": session, "cwd": dir.path(), "mcpServers": []}}));
    let loaded = second.until_response(2);
    assert!(loaded.last().unwrap()["result"].is_object(), "{loaded:#?}");
    assert_eq!(
        updates(&loaded),
        [
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "one"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "answer 0 to one"}}),
        ]
    );
    // The loaded session continues: the model sees the earlier turn.
    second.prompt(3, &session, "two");
    let turn = second.until_response(3);
    let text: String = updates(&turn)
        .iter()
        .map(|update| update["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "answer 1 to two");

    // An unknown session is refused without naming the other sessions or
    // where transcripts are kept: a client learns nothing but the refusal.
    second.send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/load",
        "params": {"sessionId": "nope", "cwd": dir.path(), "mcpServers": []}}));
    let refused = second.until_response(4);
    assert_eq!(refused[0]["error"]["code"], -32602);
    let message = refused[0]["error"]["message"].as_str().unwrap();
    assert_eq!(message, "unknown session nope");
    assert!(!refused[0].to_string().contains(&session), "{}", refused[0]);
    assert!(!refused[0].to_string().contains(data), "{}", refused[0]);
    drop(second.stdin);
    assert!(second.child.wait().unwrap().success());
}

/// The parent asks two spawn children at once; each takes a moment.
const TWO_AT_ONCE_SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "answered {{last_user}}", "delay_ms": 300}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "first", "prompt": "one"}},
    {"name": "subagent", "arguments": {"description": "second", "prompt": "two"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "both answered"}}
]}"#;

/// Under `--max-concurrent 1` the second delegation waits for the first's
/// slot: its `tool_call` turns `pending`, says it is queued, turns
/// `in_progress` again once admitted, and completes with its answer.
#[test]
fn a_delegation_that_waits_for_a_slot_is_pending_until_admitted() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", TWO_AT_ONCE_SCRIPT);
    let mut peer = Peer::start(dir.path(), &["--quiet", "--max-concurrent", "1", "--script", &script]);
    peer.initialize();
    let session = peer.new_session(dir.path());
    peer.prompt(3, &session, "Ask both.");
    let turn = peer.until_response(3);
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn", "{turn:#?}");
    let updates = updates(&turn);
    // Which call reserved the slot first is the agent loop's to decide.
    let waited: Vec<&str> = ["call_1_0", "call_1_1"]
        .into_iter()
        .filter(|call| {
            updates
                .iter()
                .any(|update| is(update, "tool_call_update", call) && update["status"] == "pending")
        })
        .collect();
    assert_eq!(waited.len(), 1, "{updates:#?}");
    let call = waited[0];
    let status = |wanted: &str, after: usize| {
        after
            + position(&updates[after..], |update| {
                is(update, "tool_call_update", call) && update["status"] == wanted
            })
    };
    let running = status("in_progress", 0);
    let pending = status("pending", running);
    let queued = position(&updates, |update| {
        is(update, "tool_call_update", call)
            && update["content"][0]["content"]["text"]
                .as_str()
                .is_some_and(|text| text.ends_with(": queued (0 ahead)"))
    });
    let admitted = status("in_progress", pending);
    let completed = status("completed", admitted);
    assert!(pending < queued && queued < admitted, "{updates:#?}");
    let result = updates[completed]["content"][0]["content"]["text"].as_str().unwrap();
    assert!(result.contains("answered"), "{result}");
}
