//! End to end: the context fit with real delegations. Four children
//! started in one message each answer 2 MB, and the parent's next request
//! still fits a 24,000-token window; a child that cannot fit its own window
//! gives its parent the pinned `subagent` error with its partial output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime, AgentStop, ContextWindow};
use dsh_e2e::Harness;
use dsh_llm::openai::request_bytes;
use dsh_llm::{
    CancellationToken, ChatModel, ChatRequest, ChatStream, ContextRefusal, LlmError, Message, ScriptedModel,
};
use dsh_tools::budget::tokens_in;
use serde_json::{Value, json};

/// What each child answers: `HEAD`, 2 MB, `TAIL`.
fn two_megabytes() -> String {
    format!("HEAD{}TAIL", "x".repeat(2 * 1024 * 1024))
}

/// The parent starts four children in one message, then says how many of
/// their answers kept their heads and tails.
fn script() -> Value {
    let calls: Vec<Value> = (0..4)
        .map(|index| json!({"name": "subagent", "arguments": {"description": format!("part {index}"), "prompt": format!("Write part {index} at length.")}}))
        .collect();
    json!({"rules": [
        {"when": {"system_contains": "You are a delegated subagent"},
         "reply": {"text": two_megabytes(), "stream_by": "whole"}},
        {"when": {"system_contains": "You are the parent.", "last_message": "user"},
         "reply": {"tool_calls": calls}},
        {"when": {"system_contains": "You are the parent.", "last_message": "tool"},
         "reply": {"text": "All four parts are in."}}
    ]})
}

/// The tool results of `request`.
fn results(request: &ChatRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// The harness's model, reporting each request's prompt as a server that
/// counts four bytes of its body a token would (the scripted model counts
/// only the messages' text).
struct CountsBytes(Arc<dsh_e2e::Recording>);

impl ChatModel for CountsBytes {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        use futures::StreamExt;
        let tokens = tokens_in(request_bytes(self.model_name(), &request));
        Box::pin(self.0.stream_chat(request, cancel).map(move |event| match event {
            Ok(dsh_llm::ChatEvent::Usage(usage)) => Ok(dsh_llm::ChatEvent::Usage(dsh_llm::Usage {
                prompt_tokens: tokens,
                total_tokens: tokens + usage.completion_tokens,
                ..usage
            })),
            other => other,
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_parallel_children_of_2_mb_fit_the_parents_next_request_into_24_000_tokens() {
    let harness = Harness::new(script());
    let window = ContextWindow::new(24_000).unwrap();
    let runtime = Arc::new(
        AgentRuntime::new(Arc::new(CountsBytes(harness.model.clone())), harness.tools.clone())
            .with_data_dir(harness.data_dir.path())
            .with_context_window(window),
    );
    let parent = Agent::builder(runtime)
        .id("parent")
        .system_prompt("You are the parent.")
        .build()
        .unwrap();
    let outcome = parent
        .run("Have the report written in four parts.", &CancellationToken::new())
        .await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(outcome.text, "All four parts are in.");
    let requests = harness.model.requests.lock().unwrap().clone();
    let next = requests
        .iter()
        .rfind(|request| results(request).len() == 4)
        .expect("the parent's request after its children");
    let tokens = tokens_in(request_bytes(harness.model.model_name(), next));
    assert!(
        tokens + dsh_agent::answer_reserve(window.tokens(), next.max_tokens) <= window.tokens(),
        "the parent's next request is {tokens} tokens"
    );
    for result in results(next) {
        assert!(
            result.starts_with("HEAD") && result.ends_with("TAIL"),
            "{}",
            &result[..80]
        );
        assert!(result.contains("[output cut: "));
    }
    assert_eq!(harness.child_transcripts("parent").len(), 4);
}

/// A model that refuses, for its length and without naming a window, any
/// request of a child that carries a tool result; otherwise the script.
#[derive(Debug)]
struct RefusesLongChildren(ScriptedModel);

impl ChatModel for RefusesLongChildren {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let child = request
            .messages
            .iter()
            .any(|message| matches!(message, Message::System { content } if content.contains("You are a delegated subagent")));
        if child && !results(&request).is_empty() {
            let body = r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#;
            let refusal = ContextRefusal::recognise(Some(400), body).unwrap();
            let error = LlmError::ContextLength {
                url: "http://127.0.0.1:1/v1/chat/completions".into(),
                refusal,
            };
            return Box::pin(futures::stream::iter([Err(error)]));
        }
        self.0.stream_chat(request, cancel)
    }
}

#[tokio::test]
async fn a_child_stopped_at_its_context_window_gives_its_parent_the_pinned_error_with_its_partial_output() {
    let script = json!({"rules": [
        {"when": {"system_contains": "You are a delegated subagent", "last_message": "user"},
         "reply": {"text": "Looking it up.", "tool_calls": [{"name": "lookup", "arguments": {"key": "code"}}]}},
        {"when": {"system_contains": "You are the parent.", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "look it up", "prompt": "Find the code word with lookup."}}]}},
        {"when": {"system_contains": "You are the parent.", "last_message": "tool"},
         "reply": {"text": "Parent read: {{last_tool_result}}"}}
    ]});
    let harness = Harness::new(script.clone());
    let model = RefusesLongChildren(ScriptedModel::from_json_str(&script.to_string()).unwrap());
    let runtime =
        Arc::new(AgentRuntime::new(Arc::new(model), harness.tools.clone()).with_data_dir(harness.data_dir.path()));
    let parent = Agent::builder(runtime)
        .id("parent")
        .system_prompt("You are the parent.")
        .build()
        .unwrap();
    let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    let result = parent
        .history()
        .iter()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    insta::assert_snapshot!("child_context_stop", result);
    // The child's transcript is kept, its stop last.
    let transcripts = harness.child_transcripts("parent");
    let stop = transcripts[0]
        .entries
        .iter()
        .rev()
        .find_map(|entry| match entry {
            dsh_agent::transcript::TranscriptEntry::TurnEnd { stop, .. } => Some(stop.clone()),
            _ => None,
        })
        .unwrap();
    assert!(stop.starts_with("context-window: "), "{stop}");
}
