//! The agent loop: tools, limits, cancellation, filters, transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::transcript::{TranscriptEntry, read_transcript};
use dsh_agent::{Agent, AgentRuntime, AgentStop, SteerRefused};
use dsh_llm::{Message, ScriptedModel};
use dsh_subagent_api::ToolFilter;
use dsh_tools::{CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A tool that answers `value of <key>`.
struct Lookup(Value);

impl Tool for Lookup {
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Look a key up."
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let key = args["key"]
                .as_str()
                .ok_or_else(|| ToolError::new("lookup needs a key"))?;
            Ok(ToolOutput::text(format!("value of {key}")))
        })
    }
}

fn registry() -> ToolRegistry {
    let tools = ToolRegistry::new();
    let registration = tools
        .register(Arc::new(Lookup(
            json!({"type": "object", "properties": {"key": {"type": "string"}}}),
        )))
        .unwrap();
    std::mem::forget(registration); // lives as long as the test
    tools
}

fn runtime(script: Value, tools: ToolRegistry) -> Arc<AgentRuntime> {
    let model = ScriptedModel::from_json_str(&script.to_string()).unwrap();
    Arc::new(AgentRuntime::new(Arc::new(model), tools))
}

/// The agent's history as `role: content` lines.
fn conversation(agent: &Agent) -> Vec<String> {
    agent
        .history()
        .iter()
        .map(|m| format!("{}: {}", m.role().as_str(), m.content()))
        .collect()
}

fn lookup_then_answer() -> Value {
    json!({"rules": [
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [
            {"name": "lookup", "arguments": {"key": "a"}},
            {"name": "lookup", "arguments": {"key": "b"}}
        ]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "done: {{last_tool_result}}"}}
    ]})
}

#[tokio::test]
async fn a_run_calls_tools_and_answers_with_every_call_answered_in_order() {
    let agent = Agent::builder(runtime(lookup_then_answer(), registry()))
        .build()
        .unwrap();
    let outcome = agent.run("go", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(outcome.steps, 2);
    assert_eq!(outcome.text, "done: value of b");
    let history = agent.history();
    let roles: Vec<_> = history.iter().map(|m| m.role().as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "assistant"]);
    let Message::Assistant { tool_calls, .. } = &history[1] else {
        panic!()
    };
    let Message::Tool { tool_call_id, content } = &history[2] else {
        panic!()
    };
    assert_eq!(tool_call_id, &tool_calls[0].id);
    assert_eq!(content, "value of a");
    assert!(agent.usage().own.is_some_and(|own| own.total_tokens > 0));
}

#[tokio::test]
async fn the_model_call_limit_ends_the_run_without_success() {
    let script =
        json!({"rules": [{"when": {}, "reply": {"tool_calls": [{"name": "lookup", "arguments": {"key": "x"}}]}}]});
    let agent = Agent::builder(runtime(script, registry()))
        .max_turns(3)
        .build()
        .unwrap();
    let outcome = agent.run("loop", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::MaxTurns(3));
    assert_eq!(outcome.steps, 3);
    // Balanced: the last assistant call was answered.
    assert_eq!(agent.history().last().unwrap().role().as_str(), "tool");
}

#[tokio::test]
async fn length_and_content_filter_finishes_map_to_their_stops() {
    let length = json!({"rules": [{"when": {}, "reply": {"text": "half an ans", "finish_reason": "length"}}]});
    let agent = Agent::builder(runtime(length, registry())).build().unwrap();
    let outcome = agent.run("x", &CancellationToken::new()).await;
    assert_eq!(
        (outcome.stop, outcome.text.as_str()),
        (AgentStop::MaxTokens, "half an ans")
    );
    let filtered = json!({"rules": [{"when": {}, "reply": {"text": "", "finish_reason": "content_filter"}}]});
    let agent = Agent::builder(runtime(filtered, registry())).build().unwrap();
    assert_eq!(agent.run("x", &CancellationToken::new()).await.stop, AgentStop::Refusal);
}

#[tokio::test]
async fn a_model_error_ends_the_run_with_the_error() {
    let script = json!({"rules": [{"when": {}, "reply": {"error": "upstream exploded"}}]});
    let agent = Agent::builder(runtime(script, registry())).build().unwrap();
    let outcome = agent.run("x", &CancellationToken::new()).await;
    let AgentStop::Error(message) = outcome.stop else {
        panic!("{:?}", outcome.stop)
    };
    assert!(message.contains("upstream exploded"), "{message}");
}

/// A model whose every stream yields `text`, then ends without a finish
/// reason: a cut answer.
struct CutsItsAnswer(&'static str);

impl dsh_llm::ChatModel for CutsItsAnswer {
    fn model_name(&self) -> &str {
        "cuts"
    }

    fn stream_chat(&self, _request: dsh_llm::ChatRequest, _cancel: CancellationToken) -> dsh_llm::ChatStream {
        let events = [
            Ok(dsh_llm::ChatEvent::TextDelta(self.0.into())),
            Ok(dsh_llm::ChatEvent::ToolCall(dsh_llm::ToolCall::new(
                "call_0", "lookup", "{}",
            ))),
        ];
        Box::pin(futures::stream::iter(events))
    }
}

#[tokio::test]
async fn a_cut_answer_stops_the_run_answer_cut_its_text_kept_and_no_tool_run() {
    let runtime = Arc::new(AgentRuntime::new(Arc::new(CutsItsAnswer("I will look")), registry()));
    let agent = Agent::builder(runtime).build().unwrap();
    let outcome = agent.run("x", &CancellationToken::new()).await;
    assert_eq!(outcome.text, "I will look");
    insta::assert_snapshot!("answer_cut_stop_line", outcome.stop.to_string());
    assert!(matches!(outcome.stop, AgentStop::AnswerCut(_)), "{:?}", outcome.stop);
    // The text that streamed is in the conversation; the tool call that came
    // with it was never run, since the answer never finished.
    assert_eq!(conversation(&agent), ["user: x", "assistant: I will look"]);
}

#[tokio::test]
async fn cancellation_mid_stream_ends_the_run_promptly_and_keeps_the_turn_balanced() {
    let script = json!({"rules": [{"when": {}, "reply": {"text": "a very slow answer that streams word by word", "delay_ms": 200}}]});
    let agent = Agent::builder(runtime(script, registry())).build().unwrap();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            cancel.cancel();
        }
    };
    let (outcome, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(agent.run("x", &cancel), canceller)
    })
    .await
    .expect("the run ends after cancellation");
    assert_eq!(outcome.stop, AgentStop::Cancelled);
    assert_eq!(agent.history().len(), 1, "only the prompt: no half-streamed message");
}

#[tokio::test]
async fn a_filter_hides_and_refuses_and_an_unknown_name_fails_the_build() {
    let script = json!({"rules": [
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "{{last_tool_result}}"}}
    ]});
    let filter = ToolFilter::denying(vec!["lookup"]);
    let agent = Agent::builder(runtime(script.clone(), registry()))
        .tool_filter(filter)
        .build()
        .unwrap();
    assert!(agent.tools().definitions().is_empty(), "hidden from the schema");
    let outcome = agent.run("x", &CancellationToken::new()).await;
    assert_eq!(outcome.text, "Error: tool \"lookup\" is not available to this agent");

    let unknown = ToolFilter::allowing(vec!["lokup"]);
    let error = Agent::builder(runtime(script, registry()))
        .tool_filter(unknown)
        .build()
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "subagent toolFilter names unknown tool \"lokup\" (available: lookup)"
    );
}

#[tokio::test]
async fn malformed_tool_arguments_come_back_as_an_error_the_model_can_fix() {
    let tools = registry();
    let view = dsh_agent::ToolView::all(tools);
    let exec = ToolExecution::new(CancellationToken::new());
    let result = view.call("lookup", "{not json", exec).await;
    assert!(result.is_error);
    assert!(
        result
            .text
            .starts_with("Error: the arguments of tool \"lookup\" are not valid JSON")
    );
}

#[tokio::test]
async fn the_transcript_records_header_messages_and_turn_end() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::from_json_str(&lookup_then_answer().to_string()).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), registry()).with_data_dir(dir.path()));
    let agent = Agent::builder(runtime).label(Some("demo".into())).build().unwrap();
    agent.run("go", &CancellationToken::new()).await;
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    assert_eq!(transcript.diagnostic, None);
    assert!(matches!(&transcript.entries[0], TranscriptEntry::Header { label: Some(l), .. } if l == "demo"));
    assert!(
        matches!(transcript.entries.last().unwrap(), TranscriptEntry::TurnEnd { stop, steps: 2, .. } if stop == "completed")
    );
    assert_eq!(transcript.messages(), agent.history());
}

#[tokio::test]
async fn a_torn_last_line_is_reported_and_earlier_entries_survive() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::from_json_str(&lookup_then_answer().to_string()).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), registry()).with_data_dir(dir.path()));
    let agent = Agent::builder(runtime).build().unwrap();
    agent.run("go", &CancellationToken::new()).await;
    let path = agent.transcript_path().unwrap().to_owned();
    let full = std::fs::read(&path).unwrap();
    let entries = read_transcript(&path).unwrap().entries.len();
    // Cut the file in the middle of its last line.
    std::fs::write(&path, &full[..full.len() - 10]).unwrap();
    let torn = read_transcript(&path).unwrap();
    assert_eq!(torn.entries.len(), entries - 1);
    let diagnostic = torn.diagnostic.unwrap();
    assert!(diagnostic.contains("torn line"), "{diagnostic}");
    // A corrupt line in the middle is an error, not a silent drop.
    let mut corrupt = b"{\"type\":\"nonsense\"}\n".to_vec();
    corrupt.extend_from_slice(&full);
    std::fs::write(&path, corrupt).unwrap();
    assert!(
        read_transcript(&path)
            .unwrap_err()
            .to_string()
            .contains("line 1 is corrupt")
    );
}

#[tokio::test]
async fn pending_notices_reach_the_next_model_call_as_a_user_message_and_the_transcript() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"rules": [
        {"when": {"last_message": "user", "last_user_contains": "notice two"}, "reply": {"text": "saw: {{last_user}}"}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "no notice"}}
    ]});
    let model = ScriptedModel::from_json_str(&script.to_string()).unwrap();
    // Taken at the run's start: one notice; before the first model call:
    // none; before the second (after `lookup` ran): two.
    let takes = AtomicUsize::new(0);
    let source = move |agent: &dsh_tools::AgentId| {
        assert_eq!(agent.as_str(), "parent");
        match takes.fetch_add(1, Ordering::SeqCst) {
            0 => vec!["notice one".to_owned()],
            2 => vec!["notice two".to_owned(), "notice three".to_owned()],
            _ => Vec::new(),
        }
    };
    let runtime = Arc::new(
        AgentRuntime::new(Arc::new(model), registry())
            .with_data_dir(dir.path())
            .with_notices(Arc::new(source)),
    );
    let agent = Agent::builder(runtime).id("parent").build().unwrap();
    let outcome = agent.run("go", &CancellationToken::new()).await;
    let history = conversation(&agent);
    assert_eq!(
        history,
        [
            "user: notice one",
            "user: go",
            "assistant: ",
            "tool: value of a",
            "user: notice two\nnotice three",
            "assistant: saw: notice two\nnotice three",
        ]
    );
    assert_eq!(outcome.text, "saw: notice two\nnotice three");
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    assert_eq!(transcript.messages(), agent.history());
}

fn steering_script() -> Value {
    json!({"rules": [
        {"when": {"last_message": "user", "last_user_contains": "long work"},
         "reply": {"text": "working on it", "delay_ms": 150}},
        {"when": {"last_message": "user"}, "reply": {"text": "also did: {{last_user}}"}}
    ]})
}

/// A child on the steering script, keeping its transcript in `dir`.
fn steering_child(dir: &std::path::Path) -> Agent {
    let model = ScriptedModel::from_json_str(&steering_script().to_string()).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), registry()).with_data_dir(dir));
    Agent::builder(runtime).id("child").build().unwrap()
}

#[tokio::test]
async fn a_steered_message_joins_the_open_turn_and_the_answer_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = steering_child(dir.path());
    assert_eq!(agent.steer("too early"), Err(SteerRefused::NotRunning));
    let cancel = CancellationToken::new();
    let steer = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        agent.steer("also consider Y")
    };
    let (outcome, steered) = tokio::join!(agent.run("long work", &cancel), steer);
    assert_eq!(steered, Ok(()));
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(
        outcome.text, "also did: also consider Y",
        "the run's answer has seen the message"
    );
    let history = conversation(&agent);
    assert_eq!(
        history,
        [
            "user: long work",
            "assistant: working on it",
            "user: also consider Y",
            "assistant: also did: also consider Y",
        ]
    );
    assert_eq!(outcome.steps, 2);
    assert_eq!(agent.steer("too late"), Err(SteerRefused::TurnClosed));
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    assert_eq!(
        transcript.messages(),
        agent.history(),
        "refused messages are never recorded"
    );
}

#[tokio::test]
async fn a_message_that_joined_a_cancelled_turn_is_recorded_before_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let agent = steering_child(dir.path());
    let cancel = CancellationToken::new();
    let steer_then_cancel = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let steered = agent.steer("also consider Y");
        cancel.cancel();
        steered
    };
    let (outcome, steered) = tokio::join!(agent.run("long work", &cancel), steer_then_cancel);
    assert_eq!(steered, Ok(()));
    assert_eq!(outcome.stop, AgentStop::Cancelled);
    let history: Vec<_> = agent.history().iter().map(|m| m.content().to_owned()).collect();
    assert_eq!(history, ["long work", "also consider Y"], "accepted, so never lost");
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    assert_eq!(transcript.messages(), agent.history());
    assert!(matches!(
        transcript.entries.last(),
        Some(TranscriptEntry::TurnEnd { .. })
    ));
}

#[tokio::test]
async fn a_steered_message_never_outlives_the_turn_limit_unrecorded() {
    // One model call allowed: the message joins, the model cannot answer it,
    // the run ends at its limit and the message is still in the history.
    let model = ScriptedModel::from_json_str(&steering_script().to_string()).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), registry()));
    let agent = Agent::builder(runtime).max_turns(1).build().unwrap();
    let steer = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        agent.steer("also consider Y")
    };
    let cancel = CancellationToken::new();
    let (outcome, steered) = tokio::join!(agent.run("long work", &cancel), steer);
    assert_eq!(steered, Ok(()));
    assert_eq!(outcome.stop, AgentStop::MaxTurns(1));
    assert_eq!(outcome.text, "working on it");
    let last = agent.history().last().map(|m| m.content().to_owned());
    assert_eq!(last.as_deref(), Some("also consider Y"));
}
