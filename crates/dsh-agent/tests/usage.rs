//! Unknown usage is unknown, not zero: against a local OpenAI-compatible
//! server (plain HTTP/1.1 and server-sent events on loopback) that reports
//! no usage in its streams, or a usage without `prompt_tokens`, or zeros,
//! the agent loop counts its estimate instead, marks it estimated wherever
//! usage shows, and spends it from its token budget, so a budget stops the
//! run. A server that reports its counts is taken at its word.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_agent::transcript::{TranscriptEntry, read_transcript};
use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_llm::{CancellationToken, Counted, OpenAiChatModel, OpenAiConfig, Usage};
use dsh_subagent_api::{BudgetScope, Lineage, TokenBudget};
use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// What the server says of usage at the end of each stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reports {
    /// No usage at all (llama-cpp-python's streams).
    Nothing,
    /// A usage with `completion_tokens` only.
    NoPromptTokens,
    /// A usage whose counts are all zero.
    Zeros,
    /// Both counts, as most servers do.
    Counts,
}

/// The text of every answer: 40 bytes, ten tokens at four bytes a token.
const ANSWER: &str = "The answer is forty-two, as it was asked";

/// The server, on a port of its own; it lives as long as the test. It
/// answers with a call of `echo` while `loops` is set, else with
/// [`ANSWER`], and records every request's body.
struct Server {
    base_url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    fn start(reports: Reports, loops: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let log = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || serve(stream, reports, loops, &log));
            }
        });
        Self { base_url, bodies }
    }

    fn model(&self) -> Arc<OpenAiChatModel> {
        let config = OpenAiConfig::new()
            .with_base_url(&self.base_url)
            .with_api_key("sk-test")
            .with_model("test-model")
            .with_retry_base_delay(Duration::from_millis(1));
        Arc::new(OpenAiChatModel::new(config).unwrap())
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

fn serve(mut stream: TcpStream, reports: Reports, loops: bool, log: &Mutex<Vec<Value>>) {
    let Some(body) = read_request(&mut stream) else { return };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let step = {
        let mut log = log.lock().unwrap();
        log.push(request);
        log.len()
    };
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
    let (delta, finish) = if loops {
        let call = json!({"index": 0, "id": format!("call_{step}"), "type": "function",
                          "function": {"name": "echo", "arguments": "{\"text\": \"again\"}"}});
        (json!({"tool_calls": [call]}), "tool_calls")
    } else {
        (json!({"content": ANSWER}), "stop")
    };
    event(&mut stream, &json!({"choices": [{"index": 0, "delta": delta}]}));
    event(
        &mut stream,
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    );
    let usage = match reports {
        Reports::Nothing => None,
        Reports::NoPromptTokens => Some(json!({"completion_tokens": 12})),
        Reports::Zeros => Some(json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})),
        Reports::Counts => Some(json!({"prompt_tokens": 500, "completion_tokens": 12, "total_tokens": 512})),
    };
    if let Some(usage) = usage {
        event(&mut stream, &json!({"choices": [], "usage": usage}));
    }
    let _ = stream.write_all(b"data: [DONE]\n\n");
}

fn event(stream: &mut TcpStream, data: &Value) {
    let _ = write!(stream, "data: {data}\n\n");
}

/// The body of one HTTP/1.1 request (`content-length` framed).
fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// A tool that answers with its text.
struct Echo {
    parameters: Value,
}

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Say it back."
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move { Ok(ToolOutput::text(args["text"].as_str().unwrap_or_default().to_owned())) })
    }
}

fn runtime(server: &Server, data_dir: &std::path::Path) -> Arc<AgentRuntime> {
    let tools = ToolRegistry::new();
    let registration = tools
        .register(Arc::new(Echo {
            parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        }))
        .unwrap();
    std::mem::forget(registration); // lives as long as the test
    Arc::new(AgentRuntime::new(server.model(), tools).with_data_dir(data_dir))
}

/// The usage the last `TurnEnd` of `agent`'s transcript recorded.
fn recorded_usage(agent: &Agent) -> Option<Usage> {
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    transcript.entries.iter().rev().find_map(|entry| match entry {
        TranscriptEntry::TurnEnd { usage, .. } => Some(*usage),
        _ => None,
    })?
}

#[tokio::test]
async fn missing_partial_and_zero_usage_is_estimated_and_marked() {
    for reports in [Reports::Nothing, Reports::NoPromptTokens, Reports::Zeros] {
        let server = Server::start(reports, false);
        let dir = tempfile::tempdir().unwrap();
        let agent = Agent::builder(runtime(&server, dir.path()))
            .system_prompt("Answer in one line.")
            .build()
            .unwrap();
        let outcome = agent.run("What is the answer?", &CancellationToken::new()).await;
        assert_eq!(outcome.stop, AgentStop::Completed, "{reports:?}");
        let usage = outcome.usage.unwrap();
        assert_eq!(usage.counted, Counted::Estimated, "{reports:?}");
        // The prompt is the request's body at four bytes a token (plus
        // the estimate's slack); never zero.
        let body = serde_json::to_vec(&server.bodies()[0]).unwrap().len() as u64;
        assert!(
            usage.prompt_tokens >= body / 4 && usage.prompt_tokens <= body / 4 + 16,
            "{reports:?}: {usage:?} for a body of {body} bytes"
        );
        // The server's completion count stands where it gave one; else the
        // answer's text is counted.
        let completion = if reports == Reports::NoPromptTokens { 12 } else { 10 };
        assert_eq!(usage.completion_tokens, completion, "{reports:?}");
        assert_eq!(usage.total_tokens, usage.prompt_tokens + completion, "{reports:?}");
        // The transcript's turn end holds the same usage, marked.
        assert_eq!(recorded_usage(&agent), Some(usage), "{reports:?}");
        assert_eq!(agent.usage().own, Some(usage), "{reports:?}");
        let line = std::fs::read_to_string(agent.transcript_path().unwrap()).unwrap();
        assert!(line.contains(r#""counted":"estimated""#), "{reports:?}: {line}");
    }
}

#[tokio::test]
async fn reported_counts_are_taken_as_they_are() {
    let server = Server::start(Reports::Counts, false);
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder(runtime(&server, dir.path())).build().unwrap();
    let outcome = agent.run("What is the answer?", &CancellationToken::new()).await;
    assert_eq!(outcome.usage, Some(Usage::reported(500, 12)));
    assert_eq!(recorded_usage(&agent), Some(Usage::reported(500, 12)));
    let transcript = std::fs::read_to_string(agent.transcript_path().unwrap()).unwrap();
    assert!(!transcript.contains("counted"), "{transcript}");
}

/// A budget of 3,000 tokens over a server that never reports usage: each
/// request asks for no more than the estimate has left, and the run stops
/// on its budget long before its turns run out (unestimated, every request
/// asked for 3,000 tokens and the budget never stopped anything).
#[tokio::test]
async fn a_token_budget_spends_the_estimate_and_stops_the_run() {
    for reports in [Reports::Nothing, Reports::NoPromptTokens, Reports::Zeros] {
        let server = Server::start(reports, true);
        let dir = tempfile::tempdir().unwrap();
        let budget = TokenBudget::new(BudgetScope::Child, 3_000, None);
        let agent = Agent::builder(runtime(&server, dir.path()))
            .system_prompt("Call echo until told to stop.")
            .max_turns(50)
            .lineage(Lineage::new().with_token_budget(budget.clone()))
            .build()
            .unwrap();
        let outcome = agent.run("Go.", &CancellationToken::new()).await;
        assert_eq!(outcome.stop, AgentStop::TokenBudget(3_000), "{reports:?}");
        let usage = outcome.usage.unwrap();
        assert!(usage.is_estimated(), "{reports:?}");
        assert!(budget.spent() >= 3_000, "{reports:?}: spent {}", budget.spent());
        assert_eq!(budget.spent(), usage.total_tokens, "{reports:?}");
        let asked: Vec<u64> = server
            .bodies()
            .iter()
            .map(|body| body["max_tokens"].as_u64().unwrap())
            .collect();
        assert!(asked.len() > 1 && asked.len() < 20, "{reports:?}: {asked:?}");
        assert_eq!(asked[0], 3_000, "{reports:?}");
        assert!(
            asked.windows(2).all(|pair| pair[1] < pair[0]),
            "{reports:?}: each request asks for what is left: {asked:?}"
        );
    }
}
