#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_subagent_conformance::Status;
use serde_json::{Value, json};

use super::Trail;

fn fail(seen: &str) -> (Status, String) {
    (Status::Fail, seen.to_owned())
}

const ROOT: &str = "root";

/// What the agent does, in order: an update (session, update) or a prompt answer.
enum Did {
    Update(&'static str, Value),
    Answered(&'static str),
}

fn announce(parent: &'static str, child: &str) -> Did {
    Did::Update(
        parent,
        json!({"sessionUpdate": "subagent_update", "sessionId": child, "title": child, "state": {"state": "running"}}),
    )
}

fn end(parent: &'static str, child: &str, stop: &str) -> Did {
    Did::Update(
        parent,
        json!({"sessionUpdate": "subagent_update", "sessionId": child, "state": {"state": "idle", "stopReason": stop}}),
    )
}

fn chunk(session: &'static str) -> Did {
    Did::Update(
        session,
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}),
    )
}

fn judged(did: Vec<Did>) -> Result<Option<String>, (Status, String)> {
    let mut trail = Trail::default();
    for did in did {
        match did {
            Did::Update(session, update) => trail.update(&json!({"sessionId": session, "update": update})),
            Did::Answered(session) => trail.answered(session, &Ok(json!({"stopReason": "end_turn"}))),
        }
    }
    trail.judge(&[ROOT.to_owned()])
}

#[test]
fn children_announced_before_their_updates_and_ended_once_pass() {
    let step = judged(vec![
        chunk(ROOT),
        announce(ROOT, "a"),
        chunk("a"),
        announce("a", "b"),
        chunk("b"),
        end("a", "b", "end_turn"),
        end(ROOT, "a", "cancelled"),
        Did::Answered(ROOT),
        // A reusable child runs again, and ends again.
        Did::Update(
            ROOT,
            json!({"sessionUpdate": "subagent_update", "sessionId": "a", "state": {"state": "running"}}),
        ),
        chunk("a"),
        end(ROOT, "a", "end_turn"),
        Did::Answered(ROOT),
    ]);
    assert_eq!(
        step,
        Ok(Some(
            "2 subagents announced (3 runs), each on its parent's session before its own updates, each run ended once after its last update (idle: end_turn 2, cancelled 1)"
                .to_owned()
        ))
    );
}

#[test]
fn nothing_announced_is_skipped() {
    let step = judged(vec![chunk(ROOT), Did::Answered(ROOT)]);
    assert_eq!(step.unwrap_err().0, Status::Skipped);
}

#[test]
fn each_broken_rule_is_named() {
    let cases: Vec<(Vec<Did>, &str)> = vec![
        (
            vec![chunk("a"), announce(ROOT, "a"), end(ROOT, "a", "end_turn")],
            "agent_message_chunk on `a` came before its announcement: a subagent is announced on its parent's session before any update bearing its id",
        ),
        (
            vec![chunk("stranger")],
            "agent_message_chunk on `stranger`, a session neither opened by the client nor announced",
        ),
        (
            vec![
                announce(ROOT, "a"),
                end(ROOT, "a", "end_turn"),
                end(ROOT, "a", "cancelled"),
            ],
            "`a` ended twice: an idle state after its terminal one",
        ),
        (
            vec![announce(ROOT, "a"), end(ROOT, "a", "end_turn"), chunk("a")],
            "agent_message_chunk bearing `a`'s id came after its terminal state",
        ),
        (
            vec![
                announce(ROOT, "a"),
                chunk("a"),
                Did::Answered(ROOT),
                end(ROOT, "a", "end_turn"),
            ],
            "session/prompt answered end_turn while its subagent `a` had not ended: each announced subagent ends, with its terminal state, before its parent's prompt returns",
        ),
        (
            vec![announce("elsewhere", "a"), end("elsewhere", "a", "end_turn")],
            "`a` was announced on `elsewhere`, neither a session the client opened nor an announced subagent",
        ),
        (
            vec![announce(ROOT, ROOT)],
            "`root`, a session the client opened, was announced as a subagent",
        ),
    ];
    for (did, seen) in cases {
        assert_eq!(judged(did), Err(fail(seen)));
    }
}

#[test]
fn the_first_three_faults_are_named_and_the_rest_counted() {
    let step = judged(vec![chunk("s1"), chunk("s2"), chunk("s3"), chunk("s4"), chunk("s5")]);
    let (status, seen) = step.unwrap_err();
    assert_eq!(status, Status::Fail);
    assert!(seen.contains("`s3`") && !seen.contains("`s4`"), "{seen}");
    assert!(seen.ends_with("; and 2 more"), "{seen}");
}

#[test]
fn a_flood_past_the_bound_is_not_judged() {
    let mut trail = Trail::default();
    trail.update(&json!({"sessionId": ROOT, "update": {"sessionUpdate": "subagent_update", "sessionId": "a", "state": {"state": "idle", "stopReason": "end_turn"}}}));
    for _ in 0..super::MAX_TRAIL {
        trail.update(&json!({"sessionId": ROOT, "update": {"sessionUpdate": "agent_message_chunk"}}));
    }
    let (status, seen) = trail.judge(&[ROOT.to_owned()]).unwrap_err();
    assert_eq!(status, Status::Skipped);
    assert_eq!(seen, "more than 20000 session updates: their order was not judged");
}
