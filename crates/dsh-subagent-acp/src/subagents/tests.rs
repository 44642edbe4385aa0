//! The sessions a child announces: kept at every depth with their titles,
//! tasks and states, reported, recorded; what a child gets wrong changes
//! nothing; a flood is bounded; what is left running closes as disconnected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;

fn update(value: serde_json::Value) -> SubagentUpdate {
    serde_json::from_value(value).unwrap()
}

fn announce(session: &str, title: &str) -> SubagentUpdate {
    update(
        json!({"sessionId": session, "title": title, "description": format!("do {title}"),
        "capabilities": {"cancel": {}}, "state": {"state": "running"}}),
    )
}

fn idle(session: &str, stop: serde_json::Value) -> SubagentUpdate {
    let mut state = json!({"state": "idle"});
    if let serde_json::Value::Object(fields) = stop {
        state.as_object_mut().unwrap().extend(fields);
    }
    update(json!({"sessionId": session, "state": state}))
}

/// Sessions of child run `run`, whose reports are kept in order.
fn watched() -> (Announced, Arc<Mutex<Vec<ChildUpdate>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut announced = Announced::default();
    let progress: ProgressSink = Arc::new(move |run: &str, update: &ChildUpdate| {
        assert_eq!(run, "acp-1");
        sink.lock().unwrap().push(update.clone());
    });
    announced.configure(Some(("acp-1".to_owned(), progress)), None);
    announced.set_own("own");
    (announced, seen)
}

#[test]
fn sessions_are_kept_at_every_depth_and_what_is_left_running_closes_as_disconnected() {
    let (mut announced, seen) = watched();
    announced.take("own", Some(&announce("a", "first")));
    announced.take("own", Some(&announce("b", "second")));
    announced.take("a", Some(&announce("a1", "deeper")));
    announced.take("a", None);
    announced.take("a1", None);
    announced.take("a", Some(&idle("a1", json!({"stopReason": "end_turn"}))));
    announced.take(
        "own",
        Some(&idle(
            "b",
            json!({"stopReason": "error", "error": {"code": -32603, "message": "it broke"}}),
        )),
    );
    let records = announced.close();
    let stops: Vec<(String, Option<String>, Option<String>)> = records
        .iter()
        .map(|record| (record.session.clone(), record.parent.clone(), record.stop.clone()))
        .collect();
    assert_eq!(
        stops,
        [
            ("a".to_owned(), None, Some("disconnected".to_owned())),
            ("b".to_owned(), None, Some("error: it broke".to_owned())),
            ("a1".to_owned(), Some("a".to_owned()), Some("completed".to_owned())),
        ]
    );
    assert_eq!(records[0].task.as_deref(), Some("do first"));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "three announced, three ended: {seen:#?}");
    assert_eq!(
        seen[5],
        ChildUpdate::SubagentEnded {
            session: "a".to_owned(),
            stop: "disconnected".to_owned()
        }
    );
}

#[test]
fn what_a_child_gets_wrong_changes_nothing_and_a_flood_is_bounded() {
    let (mut announced, seen) = watched();
    // Updates for a session never announced, an announcement on one.
    announced.take("stranger", None);
    announced.take("stranger", Some(&announce("x", "nobody's")));
    assert!(seen.lock().unwrap().is_empty());
    announced.take("own", Some(&announce("a", "first")));
    announced.take("own", Some(&idle("a", json!({"stopReason": "cancelled"}))));
    // A second terminal state: the first stands.
    announced.take("own", Some(&idle("a", json!({"stopReason": "end_turn"}))));
    // Updates for it after its end.
    announced.take("a", None);
    for index in 0..MAX_SESSIONS + 500 {
        announced.take("own", Some(&announce(&format!("flood-{index}"), "f")));
    }
    let records = announced.close();
    assert_eq!(records.len(), MAX_SESSIONS);
    assert_eq!(records[0].stop.as_deref(), Some("cancelled"));
    assert!(
        records[1..]
            .iter()
            .all(|record| record.stop.as_deref() == Some("disconnected"))
    );
}

#[test]
fn a_custom_stop_reason_reads_without_its_underscore() {
    let (mut announced, _seen) = watched();
    announced.take("own", Some(&announce("a", "first")));
    announced.take("own", Some(&idle("a", json!({"stopReason": "_disconnected"}))));
    assert_eq!(announced.close()[0].stop.as_deref(), Some("disconnected"));
}
