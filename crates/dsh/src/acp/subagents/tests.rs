//! Announcing children as subagent sessions: the order of what is sent,
//! whatever order the reports and starts come in, and what is held.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use dsh_subagent::{RunEndInfo, RunInfo, SubagentEvent, SubagentService};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest};
use dsh_subagent_testing::scripted::ScriptedProvider;

use super::*;

/// The start and end events of a child of `parent` labelled `label` (on a
/// scripted provider of that name), as the service announces them.
async fn run_events(parent: &str, label: &str) -> (RunInfo, RunEndInfo) {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(ScriptedProvider::builder(label).build())
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _sub = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        sink.lock().unwrap().push(event.clone());
        Ok(())
    }));
    let mut request = StartRequest::text("do the thing", AgentRef::new(parent), CancellationToken::new());
    request.label = Some(label.to_owned());
    let mut run = service.start(label, request).await.unwrap();
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let [SubagentEvent::RunStarted(start), SubagentEvent::RunEnded(end)] = &seen[..] else {
        panic!("{seen:?}")
    };
    (start.clone(), end.clone())
}

/// What an event says, in short: `session: what`.
fn said(sent: &[(AgentId, Event)]) -> Vec<String> {
    sent.iter()
        .map(|(root, event)| match event {
            Event::Subagent { parent, child, change } => format!("{root} {parent}: {child} {change:?}"),
            Event::InSession { session, event } => format!("{root} {session}: {event:?}"),
            other => format!("{root}: {other:?}"),
        })
        .collect()
}

fn text(subagents: &mut Subagents, agent: &str, words: &str) -> Option<(AgentId, Event)> {
    match subagents.route(&AgentId::new(agent), || Event::Text(words.to_owned())) {
        Route::Send(root, event) => Some((root, event)),
        Route::Nowhere => None,
    }
}

#[tokio::test]
async fn reports_before_a_start_and_a_grandchild_before_its_parent_wait_for_the_announcement() {
    let (kid, kid_end) = run_events("root", "kid").await;
    let (grandkid, grandkid_end) = run_events(&kid.id, "grandkid").await;
    let mut subagents = Subagents::default();
    subagents.open(&AgentId::new("root"), true);
    let mut sent = Vec::new();
    // The grandchild starts, reports and ends before its parent's start
    // is announced; the parent reported first.
    assert!(text(&mut subagents, &kid.id, "early").is_none());
    assert!(subagents.started(&grandkid).is_empty());
    assert!(text(&mut subagents, &grandkid.id, "deep").is_none());
    assert!(subagents.ended(&grandkid_end).is_empty());
    sent.extend(subagents.started(&kid));
    sent.extend(text(&mut subagents, &kid.id, "late"));
    sent.extend(subagents.ended(&kid_end));
    assert!(text(&mut subagents, &kid.id, "after its end").is_none());
    assert_eq!(subagents.known(&AgentId::new(kid.id.as_str())), Known::Ended);
    assert_eq!(subagents.known(&AgentId::new("nobody")), Known::Unknown);
    insta::assert_debug_snapshot!(said(&sent));
    assert_eq!(subagents.held_agents(), 0);
}

#[tokio::test]
async fn a_prompt_that_ends_first_closes_its_running_children_deepest_first() {
    let (kid, _) = run_events("root", "kid").await;
    let (grandkid, _) = run_events(&kid.id, "grandkid").await;
    let mut subagents = Subagents::default();
    let root = AgentId::new("root");
    subagents.open(&root, true);
    assert_eq!(subagents.started(&kid).len(), 1);
    assert_eq!(subagents.started(&grandkid).len(), 1);
    assert_eq!(subagents.known(&AgentId::new(kid.id.as_str())), Known::Running);
    let closing: Vec<(AgentId, Event)> = subagents
        .close(&root, true)
        .into_iter()
        .map(|event| (root.clone(), event))
        .collect();
    insta::assert_debug_snapshot!(said(&closing));
    assert_eq!(
        subagents.known(&AgentId::new(kid.id.as_str())),
        Known::Ended,
        "still a subagent session's id"
    );
    assert!(subagents.close(&root, false).is_empty(), "closed once");
}

#[tokio::test]
async fn children_of_a_session_that_did_not_ask_are_not_announced_nor_held() {
    let (kid, kid_end) = run_events("plain", "kid").await;
    let mut subagents = Subagents::default();
    subagents.open(&AgentId::new("plain"), false);
    subagents.open(&AgentId::new("asking"), true);
    assert!(text(&mut subagents, &kid.id, "early").is_none());
    assert_eq!(subagents.held_agents(), 1, "not known yet");
    assert!(subagents.started(&kid).is_empty());
    assert_eq!(subagents.held_agents(), 0);
    assert!(text(&mut subagents, &kid.id, "later").is_none());
    assert!(subagents.ended(&kid_end).is_empty());
    assert_eq!(subagents.held_agents(), 0);
}

#[test]
fn what_is_held_is_bounded() {
    let mut subagents = Subagents::default();
    subagents.open(&AgentId::new("root"), true);
    for agent in 0..MAX_HELD_AGENTS + 10 {
        for _ in 0..3 {
            text(&mut subagents, &format!("stranger-{agent}"), "x");
        }
    }
    for _ in 0..MAX_HELD_PER_AGENT + 10 {
        text(&mut subagents, "stranger-0", "x");
    }
    assert_eq!(subagents.held_agents(), MAX_HELD_AGENTS);
    assert_eq!(subagents.held[&AgentId::new("stranger-0")].len(), MAX_HELD_PER_AGENT);
    subagents.close(&AgentId::new("root"), false);
    assert_eq!(subagents.held_agents(), 0, "nothing held once no session asks");
}

#[test]
fn a_transcripts_stop_reads_as_the_same_runs_end_does_live() {
    assert_eq!(Ending::of_stop("completed"), Ending::EndTurn);
    assert_eq!(Ending::of_stop("cancelled"), Ending::Cancelled);
    assert_eq!(Ending::of_stop("refusal"), Ending::Refusal);
    assert_eq!(Ending::of_stop("max-tokens"), Ending::MaxTokens);
    assert_eq!(Ending::of_stop("token budget of 10 tokens spent"), Ending::MaxTokens);
    assert_eq!(
        Ending::of_stop("error: HTTP 500"),
        Ending::Failed("error: HTTP 500".to_owned())
    );
    assert_eq!(
        Ending::of_stop("max-turns (16)"),
        Ending::Failed("max-turns (16)".to_owned())
    );
}
