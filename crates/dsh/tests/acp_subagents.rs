//! `dsh acp` as an agent of the Subagents RFD, seen by a client that
//! advertises `subagents`: a per-child cancel that leaves the parent's turn
//! going, a parent cancel that ends every child first (deepest first),
//! refusals of a child's id, a load after a crash whose next prompt
//! resumes the children the crash interrupted, and a background child
//! announced and ended before its prompt answers. Offline (scripted models).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{Peer, updates};
use serde_json::{Value, json};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `initialize` with `clientCapabilities.subagents`, then `session/new`.
fn open(peer: &mut Peer, dir: &Path) -> String {
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}}));
    let init = peer.until_response(1).pop().unwrap();
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["close"],
        json!({})
    );
    peer.new_session(dir)
}

/// Reads until the `subagent_update` that announces the child titled
/// `title`; returns what was read and the child's session id.
fn until_announced(peer: &Peer, title: &str) -> (Vec<Value>, String) {
    let mut seen = Vec::new();
    loop {
        let message = peer.next();
        let update = &message["params"]["update"];
        let found = update["sessionUpdate"] == "subagent_update" && update["title"] == title;
        let child = update["sessionId"].as_str().map(str::to_owned);
        seen.push(message);
        if found {
            return (seen, child.unwrap());
        }
    }
}

/// The `(session, update)` of each `session/update` among `messages`.
fn routed(messages: &[Value]) -> Vec<(String, Value)> {
    messages
        .iter()
        .filter(|message| message["method"] == "session/update")
        .map(|message| {
            let session = message["params"]["sessionId"].as_str().unwrap().to_owned();
            (session, message["params"]["update"].clone())
        })
        .collect()
}

/// The stop reason of `child`'s terminal state, and where it was sent.
fn terminal(messages: &[(String, Value)], child: &str) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|(_, update)| {
            update["sessionUpdate"] == "subagent_update"
                && update["sessionId"] == child
                && update["state"]["state"] == "idle"
        })
        .map(|(session, update)| {
            (
                session.clone(),
                update["state"]["stopReason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

const TWO_CHILDREN: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent", "last_user_contains": "slow"}, "reply": {"text": "slow answer", "delay_ms": 60000}},
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "fast answer", "delay_ms": 300}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "slow one", "prompt": "be slow"}},
    {"name": "subagent", "arguments": {"description": "fast one", "prompt": "be fast"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "the parent goes on"}}
]}"#;

#[test]
fn a_cancelled_child_ends_alone_and_its_parent_reads_it_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", TWO_CHILDREN);
    let mut peer = Peer::with_stderr(
        dir.path(),
        &["--quiet", "--script", &script],
        std::process::Stdio::piped(),
    );
    let session = open(&mut peer, dir.path());
    peer.prompt(3, &session, "Ask both.");
    let (mut seen, slow) = until_announced(&peer, "slow one");
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": slow}}));
    seen.extend(peer.until_response(3));
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn", "{seen:#?}");
    let messages = routed(&seen);
    assert_eq!(terminal(&messages, &slow), [(session.clone(), "cancelled".to_owned())]);
    let fast = messages
        .iter()
        .find(|(_, update)| update["sessionUpdate"] == "subagent_update" && update["title"] == "fast one")
        .map(|(_, update)| update["sessionId"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(terminal(&messages, &fast), [(session.clone(), "end_turn".to_owned())]);
    // The parent's model read the child's cancelled result, then answered.
    let results: Vec<String> = updates(&seen)
        .iter()
        .filter(|update| update["status"] == "completed" || update["status"] == "failed")
        .filter_map(|update| update["content"][0]["content"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(
        results.iter().any(|text| text == "Error: subagent run was cancelled"),
        "the reference's cancelled result: {results:#?}"
    );
    assert!(results.iter().any(|text| text.contains("fast answer")), "{results:#?}");
    assert!(
        updates(&seen)
            .iter()
            .any(|update| update["content"]["text"] == "the parent goes on")
    );

    // A child's id is no session a client drives: each refusal says why.
    for (id, method, params) in [
        (
            4,
            "session/prompt",
            json!({"sessionId": slow, "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (5, "session/close", json!({"sessionId": slow})),
        (
            6,
            "session/load",
            json!({"sessionId": slow, "cwd": dir.path(), "mcpServers": []}),
        ),
    ] {
        peer.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = peer.until_response(id).pop().unwrap();
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("is a subagent session"), "{method}: {message}");
    }
    // A cancel of a finished child or an unknown id: one line each on stderr.
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": slow}}));
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nobody"}}));
    peer.send(json!({"jsonrpc": "2.0", "id": 7, "method": "session/close", "params": {"sessionId": session}}));
    assert_eq!(peer.until_response(7).pop().unwrap()["result"], json!({}));
    drop(peer.stdin);
    let stderr = std::io::read_to_string(peer.child.stderr.take().unwrap()).unwrap();
    assert!(peer.child.wait().unwrap().success());
    let lines: Vec<&str> = stderr.lines().filter(|line| line.contains("session/cancel")).collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains("which has ended") && lines[1].contains("unknown session nobody"),
        "{stderr}"
    );
}

const NESTED: &str = r#"{"rules": [
  {"when": {"last_user_contains": "deepest"}, "reply": {"text": "deep", "delay_ms": 60000}},
  {"when": {"last_user_contains": "middle", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "grandkid", "prompt": "deepest"}}]}},
  {"when": {"last_user_contains": "top", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "kid", "prompt": "middle"}}]}},
  {"when": {}, "reply": {"text": "done"}}
]}"#;

/// Spawn children that may delegate once more.
fn nested_config(dir: &Path) -> String {
    write(
        dir,
        "nested.toml",
        "[[subagents]]\nprovider = \"spawn\"\nmax_depth = 2\n",
    )
}

#[test]
fn a_cancelled_parent_ends_every_child_deepest_first_before_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", NESTED);
    let config = nested_config(dir.path());
    let mut peer = Peer::start(dir.path(), &["--quiet", "--config", &config, "--script", &script]);
    let session = open(&mut peer, dir.path());
    peer.prompt(3, &session, "top");
    let (mut seen, grandkid) = until_announced(&peer, "grandkid");
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    seen.extend(peer.until_response(3));
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "cancelled", "{seen:#?}");
    let messages = routed(&seen);
    let kid = messages
        .iter()
        .find(|(_, update)| update["sessionUpdate"] == "subagent_update" && update["title"] == "kid")
        .map(|(_, update)| update["sessionId"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(terminal(&messages, &grandkid), [(kid.clone(), "cancelled".to_owned())]);
    assert_eq!(terminal(&messages, &kid), [(session.clone(), "cancelled".to_owned())]);
    let at = |child: &str| {
        messages
            .iter()
            .position(|(_, update)| update["sessionId"] == child && update["state"]["state"] == "idle")
            .unwrap()
    };
    assert!(at(&grandkid) < at(&kid), "descendants first");
}

/// [`NESTED`] with no delay: what the model answers once `dsh acp` is
/// started again.
const NESTED_FAST: &str = r#"{"rules": [
  {"when": {"last_user_contains": "deepest"}, "reply": {"text": "deep"}},
  {"when": {"last_user_contains": "middle", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "grandkid", "prompt": "deepest"}}]}},
  {"when": {"last_user_contains": "top", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "kid", "prompt": "middle"}}]}},
  {"when": {}, "reply": {"text": "done"}}
]}"#;

/// `dsh acp` dies while a child and its own child run. A `session/load`
/// replays the session with both announced and left running (their runs
/// are not over: the next prompt resumes them), the same at every load, and
/// revives nothing. The next `session/prompt` goes on with the interrupted
/// turn as `dsh run --resume` does: the grandchild resumes, each child ends
/// once (`end_turn`, deepest first), and the parent answers.
#[test]
fn a_load_after_a_crash_leaves_the_children_running_and_the_next_prompt_resumes_them() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", NESTED);
    let config = nested_config(dir.path());
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let args = [
        "--quiet",
        "--config",
        config.as_str(),
        "--script",
        script.as_str(),
        "--data-dir",
        data,
    ];
    let mut first = Peer::start(dir.path(), &args);
    let session = open(&mut first, dir.path());
    first.prompt(3, &session, "top");
    let (_, grandkid) = until_announced(&first, "grandkid");
    // The process dies while both children run.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    write(dir.path(), "script.json", NESTED_FAST);

    let load = || {
        let mut peer = Peer::start(dir.path(), &args);
        open(&mut peer, dir.path());
        peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/load",
            "params": {"sessionId": session, "cwd": dir.path(), "mcpServers": []}}));
        let loaded = peer.until_response(3);
        assert!(loaded.last().unwrap()["result"].is_object(), "{loaded:#?}");
        (peer, routed(&loaded))
    };
    let (_, replayed) = load();
    let kid = replayed
        .iter()
        .find(|(_, update)| update["sessionUpdate"] == "subagent_update" && update["title"] == "kid")
        .map(|(_, update)| update["sessionId"].as_str().unwrap().to_owned())
        .unwrap();
    assert_eq!(terminal(&replayed, &grandkid), []);
    assert_eq!(terminal(&replayed, &kid), []);
    assert!(
        replayed
            .iter()
            .any(|(id, update)| *id == grandkid && update["content"]["text"] == "deepest"),
        "the orphan's own history: {replayed:#?}"
    );
    let (mut peer, again) = load();
    assert_eq!(again, replayed, "a second load replays the same, and revives nothing");

    peer.prompt(4, &session, "go on");
    let answered = peer.until_response(4);
    assert_eq!(
        answered.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{answered:#?}"
    );
    let messages = routed(&answered);
    assert_eq!(terminal(&messages, &grandkid), [(kid.clone(), "end_turn".to_owned())]);
    assert_eq!(terminal(&messages, &kid), [(session.clone(), "end_turn".to_owned())]);
    let at = |child: &str| {
        messages
            .iter()
            .position(|(_, update)| update["sessionId"] == child && update["state"]["state"] == "idle")
            .unwrap()
    };
    assert!(at(&grandkid) < at(&kid), "descendants first");
    let said: String = messages
        .iter()
        .filter(|(id, update)| *id == session && update["sessionUpdate"] == "agent_message_chunk")
        .map(|(_, update)| update["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(said, "done", "{messages:#?}");
    // The kid went on from its last completed step: its call of the
    // grandkid was not asked for again.
    let record = std::fs::read_to_string(dir.path().join(format!("data/agents/{kid}.jsonl"))).unwrap();
    assert_eq!(record.matches("\"tool_calls\"").count(), 1, "{record}");
}

const BACKGROUND: &str = r#"{"rules": [
  {"when": {"last_user_contains": "work later"}, "reply": {"text": "background answer", "delay_ms": 300}},
  {"when": {"last_user_contains": "finished"}, "reply": {"text": "the parent read it"}},
  {"when": {"last_user_contains": "Start", "last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "in the background", "prompt": "work later",
      "run_in_background": true}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "started it"}}
]}"#;

/// A background child is announced as a foreground one is: its turn waits
/// for it, so its one terminal state comes before the prompt's answer, and
/// the parent's model reads its completion notice in the same turn.
#[test]
fn a_background_child_is_announced_and_ends_before_its_prompt_answers() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "script.json", BACKGROUND);
    let config = write(
        dir.path(),
        "background.toml",
        "[[subagents]]\nprovider = \"spawn\"\nmax_depth = 1\nenable_run_in_background = true\n",
    );
    // A background spawn child is continuable: it needs a data directory.
    let data = dir.path().join("data");
    let args = [
        "--quiet",
        "--config",
        &config,
        "--script",
        &script,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let mut peer = Peer::start(dir.path(), &args);
    let session = open(&mut peer, dir.path());
    peer.prompt(3, &session, "Start the work.");
    let (mut seen, child) = until_announced(&peer, "in the background");
    seen.extend(peer.until_response(3));
    assert_eq!(seen.last().unwrap()["result"]["stopReason"], "end_turn", "{seen:#?}");
    let messages = routed(&seen);
    assert_eq!(terminal(&messages, &child), [(session.clone(), "end_turn".to_owned())]);
    let said: String = messages
        .iter()
        .filter(|(id, _)| *id == child)
        .filter_map(|(_, update)| update["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "background answer", "the child's own text, under its own id");
    let texts: Vec<&str> = messages
        .iter()
        .filter(|(id, _)| *id == session)
        .filter_map(|(_, update)| update["content"]["text"].as_str())
        .collect();
    assert!(texts.contains(&"the parent read it"), "{texts:#?}");
}
