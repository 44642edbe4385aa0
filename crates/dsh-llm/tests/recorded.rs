//! Real traffic, replayed offline: the cassettes in `tests/cassettes` were
//! recorded from llama-cpp-python serving SmolLM2-135M-Instruct by
//! dsh-test-programs' `record-live-cassettes` (`scripts/record-cassettes.sh`
//! records them again). Each is answered through the client's own code, as it came.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use dsh_llm::cassette::{Cassette, Level, ReplayModel, Timing};
use dsh_llm::{CancellationToken, ChatModel, ChatRequest, ChatResponse, LlmError, Message, complete};

fn cassette(name: &str) -> Arc<Cassette> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cassettes")
        .join(name);
    let cassette = Cassette::load(&file).unwrap();
    assert_eq!(cassette.level(), Level::Http);
    cassette
}

/// As `record-live-cassettes` asks.
fn short(question: &str) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user(question)]).with_max_tokens(12);
    request.temperature = Some(0.0);
    request
}

const QUESTIONS: [&str; 3] = [
    "What is the capital of France? One word.",
    "What is the capital of Italy? One word.",
    "What is the capital of Spain? One word.",
];

/// What a call gave, in short: the text and finish reason, or the error.
fn outcome(result: Result<ChatResponse, LlmError>) -> String {
    match result {
        Ok(response) => format!("{:?} ({})", response.text, response.finish_reason),
        Err(error) => format!("error: {error}"),
    }
}

#[tokio::test]
async fn parallel_questions_are_answered_in_whatever_order_they_come() {
    let model = Arc::new(ReplayModel::new(cassette("parallel.jsonl"), Timing::Fast));
    assert_eq!(model.model_name(), "SmolLM2-135M-Instruct");
    let calls: Vec<_> = QUESTIONS
        .iter()
        .rev()
        .map(|question| {
            let model = Arc::clone(&model);
            tokio::spawn(async move { complete(&*model, short(question), &CancellationToken::new()).await })
        })
        .collect();
    let mut answers = Vec::new();
    for (question, call) in QUESTIONS.iter().rev().zip(calls) {
        answers.push(format!("{question} -> {}", outcome(call.await.unwrap())));
    }
    answers.reverse();
    insta::assert_snapshot!("parallel", answers.join("\n"));
}

#[tokio::test]
async fn a_request_over_the_window_is_refused_as_the_server_refused_it() {
    let model = ReplayModel::new(cassette("refused.jsonl"), Timing::Fast);
    let long = ChatRequest::new(vec![Message::user("a ".repeat(9000))]).with_max_tokens(8);
    let result = complete(&model, long, &CancellationToken::new()).await;
    assert!(result.is_err(), "a refusal is never an answer: {result:?}");
    insta::assert_snapshot!("refused", outcome(result));
}

#[tokio::test]
async fn a_stream_cut_part_way_fails_as_it_did() {
    let model = ReplayModel::new(cassette("cut.jsonl"), Timing::Fast);
    let story = ChatRequest::new(vec![Message::user("Tell me a short story about a cat.")]).with_max_tokens(64);
    let result = complete(&model, story, &CancellationToken::new()).await;
    assert!(matches!(result, Err(LlmError::StreamEnded { .. })), "{result:?}");
    insta::assert_snapshot!("cut", outcome(result));
}

#[test]
fn the_recordings_read_back_as_they_were_made() {
    let summaries: Vec<String> = ["parallel.jsonl", "refused.jsonl", "cut.jsonl"]
        .iter()
        .map(|name| format!("{name}: {}", cassette(name).summary()))
        .collect();
    insta::assert_snapshot!("summaries", summaries.join("\n"));
}
