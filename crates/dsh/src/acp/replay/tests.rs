//! A loaded session replayed with its children: each announced where its
//! parent's record names it, replayed under its own id, closed with its
//! terminal state (an orphan as disconnected, descendants first); a torn,
//! missing or background child's record; and the same updates on every load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use dsh_agent::transcript::{StartRecord, TranscriptEntry, TranscriptWriter, read_transcript, transcript_path};
use dsh_llm::{Message, ToolCall};
use serde_json::Value;

use super::*;

fn header(id: &str, parent: Option<&str>, label: &str, task_id: Option<&str>) -> TranscriptEntry {
    TranscriptEntry::Header {
        version: 1,
        id: AgentId::new(id),
        parent: parent.map(AgentId::new),
        depth: u64::from(parent.is_some()),
        label: Some(label.to_owned()),
        model: "scripted".to_owned(),
        system_prompt: None,
        created_at_ms: 1,
        start: task_id.map(|task| StartRecord::new(None, None, None).with_task_id(Some(task.to_owned()))),
    }
}

fn message(message: Message) -> TranscriptEntry {
    TranscriptEntry::Message {
        message,
        notices: Vec::new(),
    }
}

fn delegate(call: &str, description: &str, prompt: &str) -> TranscriptEntry {
    let arguments = serde_json::json!({"description": description, "prompt": prompt}).to_string();
    message(Message::assistant_with_tool_calls(
        "",
        vec![ToolCall {
            id: call.to_owned(),
            name: "subagent".to_owned(),
            arguments,
        }],
    ))
}

fn child(id: &str) -> TranscriptEntry {
    TranscriptEntry::Child {
        id: AgentId::new(id),
        call_id: None,
        elsewhere: None,
    }
}

fn end(stop: &str) -> TranscriptEntry {
    serde_json::from_value(serde_json::json!({"type": "turn_end", "stop": stop, "steps": 1})).unwrap()
}

fn write(dir: &Path, id: &str, entries: Vec<TranscriptEntry>) {
    let writer = TranscriptWriter::open(transcript_path(dir, &AgentId::new(id))).unwrap();
    for entry in entries {
        writer.append(&entry).unwrap();
    }
    writer.flush().unwrap();
}

/// Each update in short: `session: what`.
fn said(replayed: &[Replayed]) -> Vec<String> {
    replayed
        .iter()
        .map(|(session, update)| {
            let json = serde_json::to_value(update).unwrap();
            let what = match json["sessionUpdate"].as_str().unwrap() {
                "subagent_update" => format!(
                    "subagent {} {}",
                    json["sessionId"].as_str().unwrap(),
                    serde_json::to_string(&json["state"]).unwrap()
                ),
                "tool_call_update" => format!(
                    "{} {}",
                    json["toolCallId"].as_str().unwrap(),
                    json["status"].as_str().unwrap_or("-")
                ),
                "tool_call" => format!("call {}", json["toolCallId"].as_str().unwrap()),
                kind => format!("{kind} {}", json["content"]["text"].as_str().unwrap_or_default()),
            };
            format!("{session}: {what}")
        })
        .collect()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn a_session_replays_with_its_children_and_closes_its_orphans_deepest_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    write(
        data,
        "parent",
        vec![
            header("parent", None, "dsh acp", None),
            message(Message::user("top")),
            delegate("call_1", "kid", "middle"),
            child("kid"),
            message(Message::tool("call_1", "kid said hi")),
            message(Message::assistant("done")),
            end("completed"),
            message(Message::user("again")),
            delegate("call_2", "orphan", "be slow"),
            child("orphan"),
            delegate("call_3", "missing", "gone"),
            child("missing"),
            message(Message::assistant_with_tool_calls(
                "",
                vec![ToolCall {
                    id: "call_4".to_owned(),
                    name: "subagent".to_owned(),
                    arguments: serde_json::json!({"description": "in the background", "prompt": "later",
                        "run_in_background": true})
                    .to_string(),
                }],
            )),
            TranscriptEntry::Child {
                id: AgentId::new("background"),
                call_id: Some("call_4".to_owned()),
                elsewhere: None,
            },
            TranscriptEntry::Repair {
                diagnostic: "interrupted".to_owned(),
                torn: String::new(),
            },
        ],
    );
    write(
        data,
        "kid",
        vec![
            // A foreground child records the task id reserved for its result.
            header("kid", Some("parent"), "kid", Some("subagent-2")),
            message(Message::user("middle")),
            delegate("call_k", "grandkid", "deepest"),
            child("grandkid"),
            message(Message::tool("call_k", "deep")),
            message(Message::assistant("hi")),
            end("completed"),
        ],
    );
    write(
        data,
        "grandkid",
        vec![
            header("grandkid", Some("kid"), "grandkid", None),
            message(Message::user("deepest")),
            message(Message::assistant("deep")),
            end("error: HTTP 500"),
        ],
    );
    // The orphan: a grandchild running, and its own record torn mid-line.
    write(
        data,
        "orphan",
        vec![
            header("orphan", Some("parent"), "orphan", None),
            message(Message::user("be slow")),
            delegate("call_o", "orphan's own", "deeper"),
            child("orphans-own"),
        ],
    );
    let path = transcript_path(data, &AgentId::new("orphan"));
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"type":"mess"#).unwrap();
    write(
        data,
        "orphans-own",
        vec![
            header("orphans-own", Some("orphan"), "orphan's own", None),
            message(Message::user("deeper")),
        ],
    );
    write(
        data,
        "background",
        vec![
            header("background", Some("parent"), "in the background", Some("subagent-1")),
            message(Message::user("later")),
            end("completed"),
        ],
    );
    let root = AgentId::new("parent");
    let load = || {
        let transcript = read_transcript(&transcript_path(data, &root)).unwrap();
        replay(data, &root, &transcript, &["subagent".to_owned()], false)
    };
    let first = load();
    insta::assert_debug_snapshot!(said(&first));
    assert_eq!(said(&load()), said(&first), "a second load replays the same");
    // When the next prompt resumes the tree, the child whose run was left
    // open (not torn, not missing) is left running: only its end goes.
    let transcript = read_transcript(&transcript_path(data, &root)).unwrap();
    let resumed = said(&replay(data, &root, &transcript, &["subagent".to_owned()], true));
    let mut without = said(&first);
    let ended = "orphan: subagent orphans-own {\"state\":\"idle\",\"stopReason\":\"_disconnected\"}";
    without.retain(|line| line != ended);
    assert_eq!(resumed, without);
    let announce = first
        .iter()
        .map(|(_, update)| serde_json::to_value(update).unwrap())
        .find(|update| update["sessionUpdate"] == "subagent_update")
        .unwrap();
    assert_eq!(announce["title"], "kid");
    assert_eq!(announce["description"], "middle");
    assert_eq!(
        announce["capabilities"],
        Value::Object(Default::default()),
        "not cancellable: it is not running"
    );
}
