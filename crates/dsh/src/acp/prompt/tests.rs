//! Every way out of a prompt ends its turn: a failure injected at each
//! step (each update, the answer, the task dropped after each poll, a
//! panic, a failed run) leaves the session idle, its stream closed, and
//! the next prompt answered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use acp::v1::schema::{PromptResponse, SessionUpdate, StopReason};
use agent_client_protocol as acp;
use dsh_agent::AgentStop;
use dsh_subagent_api::SpanOrigin;
use futures::FutureExt;

use super::{PromptClient, run, stop_reason};
use crate::acp::session::{NextTurn, Session, Sessions};
use crate::acp::session_tools::SessionTools;
use crate::acp::stream::Streams;
use crate::cli::AgentArgs;
use crate::harness::Surface;
use crate::runtime::SharedRuntime;

/// A parent that delegates once to `subagent` (whose child answers "child
/// ok"), then repeats what the child said, a word at a time: a turn of a
/// dozen updates, each sent on its own.
const DELEGATING: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "child ok"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "d", "prompt": "p"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "the child said {{last_tool_result}}", "delay_ms": 1}}
]}"#;

/// A parent whose model call fails.
const FAILING: &str = r#"{"rules": [{"when": {}, "reply": {"error": "boom"}}]}"#;

/// Where a failure is injected.
#[derive(Clone, Copy, Debug)]
enum Fail {
    Never,
    /// The update of this index (from 0) cannot be sent.
    Update(usize),
    /// The update of this index panics.
    PanicAt(usize),
    /// The answer cannot be sent.
    Answer,
}

/// What a test client was sent.
#[derive(Default)]
struct Log {
    updates: usize,
    /// Each update: its session (`None`: the prompt's) and its JSON.
    sent: Vec<(Option<String>, serde_json::Value)>,
    answer: Option<Result<StopReason, acp::Error>>,
}

/// A prompt's client that records what it is sent and fails where told.
struct Client {
    fail: Fail,
    log: Arc<Mutex<Log>>,
}

fn refused() -> acp::Error {
    acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, "the client is gone")
}

impl PromptClient for Client {
    fn update(&self, session: Option<&str>, update: SessionUpdate) -> Result<(), acp::Error> {
        let mut log = self.log.lock().unwrap();
        let index = log.updates;
        log.updates += 1;
        log.sent
            .push((session.map(str::to_owned), serde_json::to_value(&update).unwrap()));
        match self.fail {
            Fail::Update(at) if at == index => Err(refused()),
            Fail::PanicAt(at) if at == index => {
                drop(log);
                panic!("an update panicked")
            }
            _ => Ok(()),
        }
    }

    fn answer(self, answer: Result<PromptResponse, acp::Error>) -> Result<(), acp::Error> {
        self.log.lock().unwrap().answer = Some(answer.map(|response| response.stop_reason));
        match self.fail {
            Fail::Answer => Err(refused()),
            _ => Ok(()),
        }
    }
}

/// One session of a `dsh acp` connection, on a scripted model.
struct Fixture {
    shared: SharedRuntime,
    sessions: Arc<Sessions>,
    streams: Arc<Streams>,
    id: String,
}

impl Fixture {
    async fn new(script: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script).unwrap();
        let args = AgentArgs {
            script: Some(script_path),
            ..AgentArgs::plain()
        };
        let streams = Arc::new(Streams::new(vec!["subagent".to_owned()]));
        let Ok(shared) = SharedRuntime::new(&args, None, None, streams.clone(), Surface::Agent) else {
            panic!("no shared runtime")
        };
        let tools = SessionTools::mount(&shared, &[], dir.path()).await.unwrap();
        let Ok(agent) = shared.parent_on(shared.runtime_with(tools.registry().clone()), "dsh acp") else {
            panic!("no parent")
        };
        let id = agent.id().to_string();
        let sessions = Arc::new(Sessions::default());
        sessions.insert(
            id.clone(),
            Session {
                agent,
                tools,
                _hold: None,
                next: NextTurn::New,
                lock: None,
            },
        );
        Self {
            shared,
            sessions,
            streams,
            id,
        }
    }

    /// One prompt's turn, its client failing where told: what the turn
    /// returned, and what the client was sent.
    async fn prompt(&self, fail: Fail) -> (Result<(), acp::Error>, Log) {
        self.prompt_as(fail, false).await
    }

    /// [`Fixture::prompt`], for a client that advertised `subagents` or not.
    async fn prompt_as(&self, fail: Fail, subagents: bool) -> (Result<(), acp::Error>, Log) {
        let log = Arc::new(Mutex::new(Log::default()));
        let client = Client { fail, log: log.clone() };
        let turn = self.sessions.begin_turn(&self.id).unwrap();
        let ended = run(
            turn,
            "go".to_owned(),
            SpanOrigin::current(),
            &self.streams,
            subagents,
            client,
        )
        .await;
        let log = std::mem::take(&mut *log.lock().unwrap());
        (ended, log)
    }

    /// The turn has ended: the session is idle, its stream closed, and
    /// its next prompt runs to an answer.
    async fn assert_turn_ended(&self, step: &str) {
        assert!(!self.sessions.running(&self.id), "{step}: the session is still running");
        let agent = dsh_tools::AgentId::from(self.id.as_str());
        assert!(!self.streams.is_open(&agent), "{step}: the stream is still open");
        let (ended, log) = self.prompt(Fail::Never).await;
        assert!(ended.is_ok(), "{step}: the next prompt failed: {ended:?}");
        assert!(
            matches!(log.answer, Some(Ok(StopReason::EndTurn))),
            "{step}: the next prompt was not answered"
        );
    }
}

#[tokio::test]
async fn a_failed_update_at_each_step_ends_the_turn() {
    let fixture = Fixture::new(DELEGATING).await;
    let (ended, clean) = fixture.prompt(Fail::Never).await;
    assert!(ended.is_ok());
    assert!(matches!(clean.answer, Some(Ok(StopReason::EndTurn))));
    assert!(
        clean.updates >= 8,
        "a delegating turn sends a dozen updates, not {}",
        clean.updates
    );
    for at in 0..clean.updates {
        let (ended, log) = fixture.prompt(Fail::Update(at)).await;
        assert_eq!(ended.unwrap_err().message, "the client is gone", "update {at}");
        assert_eq!(log.updates, at + 1, "nothing is sent after the failed update {at}");
        assert!(log.answer.is_none(), "a client that cannot be told is not answered");
        fixture.assert_turn_ended(&format!("update {at}")).await;
    }
}

#[tokio::test]
async fn a_failed_answer_ends_the_turn() {
    let fixture = Fixture::new(DELEGATING).await;
    let (ended, log) = fixture.prompt(Fail::Answer).await;
    assert_eq!(ended.unwrap_err().message, "the client is gone");
    assert!(matches!(log.answer, Some(Ok(StopReason::EndTurn))));
    fixture.assert_turn_ended("answer").await;
}

#[tokio::test]
async fn a_panic_in_an_update_ends_the_turn() {
    let fixture = Fixture::new(DELEGATING).await;
    let panicked = AssertUnwindSafe(fixture.prompt(Fail::PanicAt(0))).catch_unwind().await;
    assert!(panicked.is_err());
    fixture.assert_turn_ended("panic").await;
}

/// The connection's end drops the prompt's task wherever it is: before its
/// first poll (a task that never ran), and after each update it sent but
/// the last (which it sends as it answers, in the same poll).
#[tokio::test]
async fn a_turn_dropped_at_each_step_ends() {
    let fixture = Fixture::new(DELEGATING).await;
    let (_, clean) = fixture.prompt(Fail::Never).await;
    for sent in 0..clean.updates {
        let log = Arc::new(Mutex::new(Log::default()));
        let client = Client {
            fail: Fail::Never,
            log: log.clone(),
        };
        let turn = fixture.sessions.begin_turn(&fixture.id).unwrap();
        let mut task = Box::pin(run(
            turn,
            "go".to_owned(),
            SpanOrigin::current(),
            &fixture.streams,
            false,
            client,
        ));
        while log.lock().unwrap().updates < sent {
            assert!(
                futures::poll!(task.as_mut()).is_pending(),
                "the turn ended before {sent} updates"
            );
            tokio::task::yield_now().await;
        }
        drop(task);
        assert!(log.lock().unwrap().answer.is_none(), "dropped before its answer");
        fixture
            .assert_turn_ended(&format!("dropped after {sent} updates"))
            .await;
    }
}

#[tokio::test]
async fn a_run_that_fails_is_answered_with_its_error_and_ends_the_turn() {
    let fixture = Fixture::new(FAILING).await;
    let log = Arc::new(Mutex::new(Log::default()));
    let client = Client {
        fail: Fail::Never,
        log: log.clone(),
    };
    let turn = fixture.sessions.begin_turn(&fixture.id).unwrap();
    run(
        turn,
        "go".to_owned(),
        SpanOrigin::current(),
        &fixture.streams,
        false,
        client,
    )
    .await
    .unwrap();
    let answer = log.lock().unwrap().answer.take().unwrap();
    let error = answer.unwrap_err();
    assert_eq!(error.code, acp::ErrorCode::INTERNAL_ERROR);
    assert!(
        error.message.starts_with("the dsh agent run failed: "),
        "{}",
        error.message
    );
    assert!(!fixture.sessions.running(&fixture.id));
    assert!(fixture.sessions.begin_turn(&fixture.id).is_ok());
    drop(fixture.shared);
}

#[tokio::test]
async fn a_second_prompt_while_one_runs_and_an_unknown_session_are_refused() {
    let fixture = Fixture::new(DELEGATING).await;
    let turn = fixture.sessions.begin_turn(&fixture.id).unwrap();
    let again = fixture.sessions.begin_turn(&fixture.id).err().unwrap();
    assert_eq!(again.code, acp::ErrorCode::INVALID_REQUEST);
    assert_eq!(again.message, "a prompt is already running in this session");
    assert!(
        fixture.sessions.take_idle(&fixture.id).is_err(),
        "a running session is not loaded anew"
    );
    drop(turn);
    assert!(!fixture.sessions.running(&fixture.id));
    let unknown = fixture.sessions.begin_turn("no-such-session").err().unwrap();
    assert_eq!(unknown.code, acp::ErrorCode::INVALID_PARAMS);
}

#[test]
fn agent_stops_map_to_acp_stop_reasons() {
    assert_eq!(stop_reason(&AgentStop::Completed).ok(), Some(StopReason::EndTurn));
    assert_eq!(stop_reason(&AgentStop::MaxTokens).ok(), Some(StopReason::MaxTokens));
    assert_eq!(
        stop_reason(&AgentStop::MaxTurns(3)).ok(),
        Some(StopReason::MaxTurnRequests)
    );
    assert_eq!(stop_reason(&AgentStop::Refusal).ok(), Some(StopReason::Refusal));
    assert_eq!(stop_reason(&AgentStop::Cancelled).ok(), Some(StopReason::Cancelled));
    let error = stop_reason(&AgentStop::Error("boom".into())).err().map(|e| e.message);
    assert_eq!(error.as_deref(), Some("the dsh agent run failed: boom"));
}

#[test]
fn a_context_stop_fails_the_turn_with_its_own_line_and_says_which_stop_in_its_data() {
    let stop = AgentStop::ContextWindow(dsh_agent::ContextStop::new(
        Some(24_000),
        4_096,
        31_250,
        dsh_agent::FoundBy::Estimate,
    ));
    let error = stop_reason(&stop).unwrap_err();
    assert_eq!(error.message, stop.to_string());
    assert!(
        error
            .message
            .starts_with("context-window: the next request needs about 31250 tokens")
    );
    assert_eq!(
        error.data,
        Some(serde_json::json!({"stopReason": "context-window", "contextWindow": 24_000, "requestTokens": 31_250}))
    );
}

/// With a client that advertised `subagents`, the child is announced on
/// the parent's session before any update of its own, streams under its
/// own id, and its one terminal state follows its last update and comes
/// before the delegation call's end; without it, nothing of the child
/// leaves the parent's session.
#[tokio::test]
async fn a_child_is_announced_streams_under_its_own_id_and_ends_once() {
    let fixture = Fixture::new(DELEGATING).await;
    let (_, plain) = fixture.prompt_as(Fail::Never, false).await;
    assert!(
        plain.sent.iter().all(|(session, _)| session.is_none()),
        "{:?}",
        plain.sent
    );

    let (ended, log) = fixture.prompt_as(Fail::Never, true).await;
    ended.unwrap();
    assert!(matches!(log.answer, Some(Ok(StopReason::EndTurn))));
    let parent = Some(fixture.id.clone());
    let kind = |update: &serde_json::Value| update["sessionUpdate"].as_str().unwrap().to_owned();
    let announce = log
        .sent
        .iter()
        .position(|(session, update)| *session == parent && kind(update) == "subagent_update")
        .unwrap();
    let child = log.sent[announce].1["sessionId"].as_str().unwrap().to_owned();
    let child_updates: Vec<usize> = (0..log.sent.len())
        .filter(|&index| log.sent[index].0.as_deref() == Some(child.as_str()))
        .collect();
    let terminal: Vec<usize> = (0..log.sent.len())
        .filter(|&index| index != announce && log.sent[index].0 == parent)
        .collect();
    let delegation_done = log
        .sent
        .iter()
        .position(|(session, update)| session.is_none() && update["status"] == "completed")
        .unwrap();
    assert!(!child_updates.is_empty());
    assert!(
        child_updates
            .iter()
            .all(|&index| index > announce && index < terminal[0])
    );
    assert_eq!(terminal.len(), 1, "exactly one terminal state");
    assert!(terminal[0] < delegation_done, "the child ends before its call does");
    let shown: Vec<serde_json::Value> = std::iter::once(announce)
        .chain(child_updates)
        .chain(terminal)
        .map(|index| serde_json::json!([log.sent[index].0, log.sent[index].1]))
        .collect();
    let text = serde_json::to_string(&shown)
        .unwrap()
        .replace(&child, "CHILD")
        .replace(&fixture.id, "PARENT");
    let shown: serde_json::Value = serde_json::from_str(&text).unwrap();
    insta::assert_json_snapshot!(shown);
}
