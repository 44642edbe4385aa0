//! The context fit in the agent loop: a window configured or learned from
//! a refusal, one turn's results fitted into it, and the typed stop when
//! nothing fits. The model here counts a request's tokens at four bytes of
//! its body, as sent, and refuses one over its window the way OpenAI does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use dsh_agent::transcript::{TranscriptEntry, read_transcript};
use dsh_agent::{Agent, AgentRuntime, AgentStop, ContextStop, ContextWindow, CountedBy, FoundBy};
use dsh_llm::openai::{request_bytes, tools_bytes};
use dsh_llm::{
    CancellationToken, ChatEvent, ChatModel, ChatRequest, ChatStream, ContextRefusal, FinishReason, LlmError, Message,
    PromptCount, ToolCall, Usage,
};
use dsh_subagent_api::{BudgetScope, Lineage, TokenBudget};
use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// How a refusal names the window, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Refuses {
    /// OpenAI's message, with the window and the prompt's tokens.
    NamingTheWindow,
    /// The window, but not how many tokens the prompt was.
    WindowOnly,
    /// OpenAI's message that names no window.
    Unnamed,
    /// A message that counts the prompt but names no window.
    CountOnly,
}

/// What the model reports of a request's tokens in its answer's usage.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reports {
    /// Its count of the prompt.
    Prompt,
    /// A usage object whose `prompt_tokens` is 0.
    Zero,
    /// No usage at all (llama-cpp-python's stream).
    Nothing,
    /// No usage in its answers, its count when asked (llama-cpp-python).
    WhenAsked,
}

/// A model over a window of `window` tokens: a request of more (its body's
/// bytes over four, plus its `max_tokens`) is refused. It asks for
/// `calls` calls of `big` in each of its first `rounds` answers, then
/// reports how many tool results kept their heads and tails.
struct WindowedModel {
    window: u64,
    /// How many bytes of the body its tokenizer counts as one token.
    bytes_per_token: u64,
    /// Whether its chat template leaves the tool definitions out, so that
    /// it does not count them.
    skips_tools: bool,
    refuses: Refuses,
    reports: Reports,
    calls: usize,
    rounds: usize,
    /// Every request as (its tokens, whether it was refused), and the requests.
    seen: Mutex<Vec<(u64, bool)>>,
    requests: Mutex<Vec<ChatRequest>>,
    /// The tokens of every request it was asked to count.
    counted: Mutex<Vec<u64>>,
}

impl WindowedModel {
    fn new(window: u64, refuses: Refuses, calls: usize) -> Arc<Self> {
        Self::denser(window, 4, refuses, calls)
    }

    fn denser(window: u64, bytes_per_token: u64, refuses: Refuses, calls: usize) -> Arc<Self> {
        Arc::new(Self::of(window, bytes_per_token, refuses, calls))
    }

    fn of(window: u64, bytes_per_token: u64, refuses: Refuses, calls: usize) -> Self {
        Self {
            window,
            bytes_per_token,
            skips_tools: false,
            refuses,
            reports: Reports::Prompt,
            calls,
            rounds: 1,
            seen: Mutex::default(),
            requests: Mutex::default(),
            counted: Mutex::default(),
        }
    }

    /// `request`'s tokens as it counts them.
    fn tokens(&self, request: &ChatRequest) -> u64 {
        let mut bytes = request_bytes(self.model_name(), request);
        if self.skips_tools {
            bytes -= tools_bytes(&request.tools);
        }
        bytes.div_ceil(self.bytes_per_token)
    }

    fn refusals(&self) -> usize {
        self.seen.lock().unwrap().iter().filter(|(_, refused)| *refused).count()
    }

    fn seen(&self) -> Vec<(u64, bool)> {
        self.seen.lock().unwrap().clone()
    }

    fn last_request(&self) -> ChatRequest {
        self.requests.lock().unwrap().last().cloned().unwrap()
    }

    /// The largest request it took, as a share of the window less the
    /// reserve `reserve`.
    fn largest_share(&self, reserve: u64) -> f64 {
        let largest = self
            .seen()
            .iter()
            .filter(|(_, refused)| !refused)
            .map(|(tokens, _)| *tokens)
            .max()
            .unwrap();
        largest as f64 / (self.window - reserve) as f64
    }
}

impl ChatModel for WindowedModel {
    fn model_name(&self) -> &str {
        "windowed"
    }

    fn count_prompt(&self, request: ChatRequest, _cancel: CancellationToken) -> PromptCount {
        let tokens = self.tokens(&request);
        self.counted.lock().unwrap().push(tokens);
        let count = (self.reports == Reports::WhenAsked).then_some(tokens);
        Box::pin(std::future::ready(Ok(count)))
    }

    fn stream_chat(&self, request: ChatRequest, _cancel: CancellationToken) -> ChatStream {
        let tokens = self.tokens(&request);
        let refused = tokens + request.max_tokens.unwrap_or(0) > self.window;
        self.seen.lock().unwrap().push((tokens, refused));
        self.requests.lock().unwrap().push(request.clone());
        if refused {
            let body = match self.refuses {
                Refuses::NamingTheWindow => json!({"error": {
                    "message": format!("This model's maximum context length is {} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages.", self.window),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
                Refuses::WindowOnly => json!({"error": {
                    "message": format!("This model's maximum context length is {} tokens.", self.window),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
                Refuses::Unnamed => json!({"error": {
                    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                    "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}),
                Refuses::CountOnly => json!({"error": {
                    "message": format!("Your messages resulted in {tokens} tokens, too many for this model."),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            };
            let refusal = ContextRefusal::recognise(Some(400), &body.to_string()).unwrap();
            let error = LlmError::ContextLength {
                url: "http://127.0.0.1:1/v1/chat/completions".into(),
                refusal,
            };
            return Box::pin(futures::stream::iter([Err(error)]));
        }
        let results: Vec<&str> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                Message::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let round = results.len() / self.calls.max(1);
        let asks = round < self.rounds && self.calls > 0;
        let mut events = if asks {
            (0..self.calls)
                .map(|index| {
                    Ok(ChatEvent::ToolCall(ToolCall::new(
                        format!("call_{round}_{index}"),
                        "big",
                        "{}",
                    )))
                })
                .collect::<Vec<_>>()
        } else {
            let heads = results.iter().filter(|text| text.starts_with("HEAD")).count();
            let tails = results.iter().filter(|text| text.ends_with("TAIL")).count();
            vec![Ok(ChatEvent::TextDelta(format!("heads {heads}, tails {tails}")))]
        };
        let finish = if asks {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let prompt_tokens = match self.reports {
            Reports::Prompt => Some(tokens),
            Reports::Zero => Some(0),
            Reports::Nothing | Reports::WhenAsked => None,
        };
        if let Some(prompt_tokens) = prompt_tokens {
            events.push(Ok(ChatEvent::Usage(Usage::reported(prompt_tokens, 10))));
        }
        events.push(Ok(ChatEvent::Finish(finish)));
        Box::pin(futures::stream::iter(events))
    }
}

/// A tool whose text is `HEAD`, `bytes` bytes, then `TAIL`; the first
/// call steers a message into `steers`' agent, once one is set.
struct Big {
    bytes: usize,
    parameters: Value,
    steers: Arc<OnceLock<Agent>>,
    steered: AtomicBool,
}

impl Tool for Big {
    fn name(&self) -> &str {
        "big"
    }
    fn description(&self) -> &str {
        "Answer at length."
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute(&self, _args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        if let Some(agent) = self.steers.get()
            && !self.steered.swap(true, Ordering::SeqCst)
        {
            agent.steer(STEERED).unwrap();
        }
        let text = format!("HEAD{}TAIL", "x".repeat(self.bytes));
        Box::pin(async move { Ok(ToolOutput::text(text)) })
    }
}

/// The message the `big` tool steers in.
const STEERED: &str = "Also mention the weather; this message arrived while the tools ran.";

fn runtime(model: Arc<WindowedModel>, bytes: usize, data_dir: &std::path::Path) -> Arc<AgentRuntime> {
    Arc::new(
        runtime_of(
            model,
            bytes,
            json!({"type": "object", "properties": {}}),
            Arc::default(),
        )
        .with_data_dir(data_dir),
    )
}

/// The runtime of `model` with a `big` tool of `bytes` whose parameters are
/// `parameters`, and that steers into `steers`' agent.
fn runtime_of(
    model: Arc<WindowedModel>,
    bytes: usize,
    parameters: Value,
    steers: Arc<OnceLock<Agent>>,
) -> AgentRuntime {
    let tools = ToolRegistry::new();
    let registration = tools
        .register(Arc::new(Big {
            bytes,
            parameters,
            steers,
            steered: AtomicBool::new(false),
        }))
        .unwrap();
    std::mem::forget(registration); // lives as long as the test
    AgentRuntime::new(model, tools)
}

fn turn_end(agent: &Agent) -> String {
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    transcript
        .entries
        .iter()
        .rev()
        .find_map(|entry| match entry {
            TranscriptEntry::TurnEnd { stop, .. } => Some(stop.clone()),
            _ => None,
        })
        .unwrap()
}

/// The tool results the transcript holds, as the model was given them
/// (each recorded whole when its call returned, then as the fit cut it).
fn recorded_results(agent: &Agent) -> Vec<String> {
    let transcript = read_transcript(agent.transcript_path().unwrap()).unwrap();
    transcript
        .committed_messages()
        .into_iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content),
            _ => None,
        })
        .collect()
}

const TWO_MB: usize = 2 * 1024 * 1024;

#[tokio::test]
async fn four_large_results_are_fitted_into_a_configured_window_and_nothing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(24_000, Refuses::NamingTheWindow, 4);
    let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
        .context_window(Some(ContextWindow::new(24_000).unwrap()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(
        outcome.text, "heads 4, tails 4",
        "every result keeps its head and its tail"
    );
    assert_eq!(model.refusals(), 0, "{:?}", model.seen());
    let (tokens, _) = model.seen()[1];
    assert!(
        tokens + 4_096 <= 24_000,
        "the request after the results fits: {tokens} tokens"
    );
    // Every call has its one result, in order, and the transcript holds what
    // the model was given.
    let request = model.last_request();
    let answered: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["call_0_0", "call_0_1", "call_0_2", "call_0_3"]);
    let sent: Vec<String> = request
        .messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(recorded_results(&agent), sent);
    assert!(sent.iter().all(|text| text.contains("[output cut: ")));
}

#[tokio::test]
async fn a_window_learned_from_one_refusal_fits_the_retry_and_the_run_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(24_000, Refuses::NamingTheWindow, 4);
    let runtime = runtime(model.clone(), TWO_MB, dir.path());
    let agent = Agent::builder(runtime.clone()).build().unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(outcome.text, "heads 4, tails 4");
    assert_eq!(model.refusals(), 1, "{:?}", model.seen());
    assert_eq!(runtime.learned_window("windowed"), Some(24_000));
    assert_eq!(agent.effective_context_window(), Some(24_000));
    // The refused request was not recorded; the fitted one was.
    let recorded = recorded_results(&agent);
    assert_eq!(recorded.len(), 4);
    assert!(recorded.iter().all(|text| text.len() < 32_000));
    // A new agent on the runtime knows the window before its first request.
    let model_calls = model.seen().len();
    let sibling = Agent::builder(runtime).build().unwrap();
    let outcome = sibling.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(model.refusals(), 1, "the sibling was never refused");
    assert_eq!(model.seen().len(), model_calls + 2);
}

#[tokio::test]
async fn a_refusal_that_names_no_window_stops_the_run_typed_and_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(24_000, Refuses::Unnamed, 4);
    let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    let AgentStop::ContextWindow(context) = &outcome.stop else {
        panic!("not a context stop: {:?}", outcome.stop);
    };
    assert_eq!((context.window, context.found_by), (None, FoundBy::Refusal));
    assert!(context.request > 2_000_000, "{context:?}");
    assert_eq!(model.seen().len(), 2, "refused once, never sent again");
    // The transcript is kept: the results the model never took, and the stop.
    assert_eq!(recorded_results(&agent).len(), 4);
    assert!(turn_end(&agent).starts_with("context-window: the model's server refused a request of about "));
    // Every call is answered in the history too.
    let answered = agent
        .history()
        .iter()
        .filter(|message| matches!(message, Message::Tool { .. }))
        .count();
    assert_eq!(answered, 4);
}

#[tokio::test]
async fn a_prompt_longer_than_the_window_is_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(8_000, Refuses::NamingTheWindow, 0);
    let agent = Agent::builder(runtime(model.clone(), 0, dir.path()))
        .context_window(Some(ContextWindow::new(8_000).unwrap()))
        .max_tokens(Some(1_000))
        .build()
        .unwrap();
    let outcome = agent.run("y".repeat(40_000), &CancellationToken::new()).await;
    let AgentStop::ContextWindow(context) = &outcome.stop else {
        panic!("not a context stop: {:?}", outcome.stop);
    };
    assert_eq!(
        (context.window, context.reserve, context.found_by),
        (Some(8_000), 1_000, FoundBy::Estimate)
    );
    assert!(model.seen().is_empty(), "nothing was sent");
    assert_eq!(turn_end(&agent), outcome.stop.to_string());
}

#[tokio::test]
async fn a_window_that_cannot_hold_even_the_notices_stops_before_sending() {
    let dir = tempfile::tempdir().unwrap();
    // 40 results: a fair share of what is left is smaller than a notice.
    let model = WindowedModel::new(1_024, Refuses::NamingTheWindow, 40);
    let agent = Agent::builder(runtime(model.clone(), 10_000, dir.path()))
        .context_window(Some(ContextWindow::new(1_024).unwrap()))
        .build()
        .unwrap();
    let outcome = agent.run("Do forty things.", &CancellationToken::new()).await;
    assert!(matches!(
        &outcome.stop,
        AgentStop::ContextWindow(ContextStop {
            found_by: FoundBy::Estimate,
            ..
        })
    ));
    assert_eq!(model.seen().len(), 1, "only the first request was sent");
    assert_eq!(model.refusals(), 0);
}

#[tokio::test]
async fn a_token_budget_caps_each_requests_max_tokens_at_what_it_has_left() {
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(1_000_000, Refuses::NamingTheWindow, 1);
    let tree = TokenBudget::new(BudgetScope::Tree, 100_000, None);
    let child = TokenBudget::new(BudgetScope::Child, 50_000, Some(tree.clone()));
    tree.spend(70_000);
    let agent = Agent::builder(runtime(model.clone(), 10, dir.path()))
        .max_tokens(Some(40_000))
        .lineage(Lineage::new().with_token_budget(child))
        .build()
        .unwrap();
    agent.run("Do one thing.", &CancellationToken::new()).await;
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests[0].max_tokens, Some(30_000), "the tree has 30,000 left");
    let (first, _) = model.seen()[0];
    assert_eq!(
        requests[1].max_tokens,
        Some(30_000 - first - 10),
        "the first call's tokens are spent"
    );
    // Without a cap of its own, what is left is asked for once it is at
    // most the default answer reserve; a larger remainder is not sent,
    // since servers refuse a max_tokens past their model's output limit.
    for (budget, asked) in [(3_000, Some(3_000)), (500_000, None)] {
        let dir = tempfile::tempdir().unwrap();
        let model = WindowedModel::new(1_000_000, Refuses::NamingTheWindow, 0);
        let agent = Agent::builder(runtime(model.clone(), 10, dir.path()))
            .lineage(Lineage::new().with_token_budget(TokenBudget::new(BudgetScope::Child, budget, None)))
            .build()
            .unwrap();
        agent.run("Answer.", &CancellationToken::new()).await;
        assert_eq!(model.last_request().max_tokens, asked, "{budget}");
    }
}

#[tokio::test]
async fn a_denser_tokenizer_is_learned_from_the_refusal_and_the_retry_fits() {
    let dir = tempfile::tempdir().unwrap();
    // The server counts two bytes a token and reports no usage: the first
    // fit, at four, is refused.
    let model = Arc::new(WindowedModel {
        reports: Reports::Nothing,
        ..WindowedModel::of(24_000, 2, Refuses::NamingTheWindow, 4)
    });
    let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
        .context_window(Some(ContextWindow::new(24_000).unwrap()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
    assert_eq!(outcome.text, "heads 4, tails 4");
    assert_eq!(model.refusals(), 1, "{:?}", model.seen());
}

#[tokio::test]
async fn a_second_refusal_stops_the_run_with_the_window_it_named() {
    let dir = tempfile::tempdir().unwrap();
    // Denser than the estimate, with no usage reported, and the refusal
    // does not say by how much: a quarter more than it proves is not enough.
    let model = Arc::new(WindowedModel {
        reports: Reports::Nothing,
        ..WindowedModel::of(24_000, 2, Refuses::WindowOnly, 4)
    });
    let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
        .context_window(Some(ContextWindow::new(24_000).unwrap()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    let AgentStop::ContextWindow(context) = &outcome.stop else {
        panic!("not a context stop: {:?}", outcome.stop);
    };
    assert_eq!(
        (context.window, context.found_by, context.counted_by),
        (Some(24_000), FoundBy::SecondRefusal, CountedBy::Estimate)
    );
    assert_eq!(model.refusals(), 2, "refused, fitted once more, refused: stopped");
    assert_eq!(model.seen().len(), 3);
}

/// What a notice that arrives while the tools run says.
const LATE_NOTICE: &str =
    "Background task 7 finished: the build passed on every platform, and its log is kept for task_output.";

/// Whether `request` holds a user message that contains `text`.
fn asks(request: &ChatRequest, text: &str) -> bool {
    request
        .messages
        .iter()
        .any(|message| matches!(message, Message::User { content } if content.contains(text)))
}

#[tokio::test]
async fn a_notice_or_a_steered_message_after_a_tight_fit_is_fitted_with_the_results() {
    for late in [LATE_NOTICE, STEERED] {
        let dir = tempfile::tempdir().unwrap();
        let model = WindowedModel::new(24_000, Refuses::NamingTheWindow, 4);
        let steers: Arc<OnceLock<Agent>> = Arc::default();
        let mut runtime = runtime_of(
            model.clone(),
            TWO_MB,
            json!({"type": "object", "properties": {}}),
            if late == STEERED {
                steers.clone()
            } else {
                Arc::default()
            },
        )
        .with_data_dir(dir.path());
        if late == LATE_NOTICE {
            // One notice, handed out once the tools' round has been asked for.
            let seen = model.clone();
            let handed = AtomicBool::new(false);
            runtime = runtime.with_notices(Arc::new(move |_: &dsh_tools::AgentId| {
                if seen.seen().len() == 1 && !handed.swap(true, Ordering::SeqCst) {
                    vec![LATE_NOTICE.to_owned()]
                } else {
                    Vec::new()
                }
            }));
        }
        let agent = Agent::builder(Arc::new(runtime))
            .context_window(Some(ContextWindow::new(24_000).unwrap()))
            .build()
            .unwrap();
        steers.set(agent.clone()).unwrap();
        let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
        assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
        assert_eq!(model.refusals(), 0, "{:?}", model.seen());
        let request = model.last_request();
        assert!(asks(&request, late), "the late message was sent");
        let (tokens, _) = *model.seen().last().unwrap();
        assert!(tokens + 4_096 <= 24_000, "{tokens}");
        // The round's results were cut to make room, not dropped.
        assert_eq!(outcome.text, "heads 4, tails 4");
    }
}

#[tokio::test]
async fn a_zero_or_missing_prompt_count_never_leaves_the_conversation_out() {
    for reports in [Reports::Zero, Reports::Nothing] {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(WindowedModel {
            reports,
            ..WindowedModel::of(24_000, 4, Refuses::NamingTheWindow, 4)
        });
        let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
            .context_window(Some(ContextWindow::new(24_000).unwrap()))
            .build()
            .unwrap();
        // A prompt of some 10,000 tokens: an estimate that left it out would
        // give the results room the window does not have.
        let prompt = format!("Do four things. {}", "y".repeat(40_000));
        let outcome = agent.run(prompt, &CancellationToken::new()).await;
        assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
        assert_eq!(model.refusals(), 0, "{:?}", model.seen());
        assert_eq!(outcome.text, "heads 4, tails 4");
    }
}

#[tokio::test]
async fn the_estimate_follows_a_server_that_counts_differently() {
    // Denser (three bytes a token: the first count teaches it, before any
    // result is fitted); sparser (six: a sparser first count may be tool
    // definitions the server leaves out, so the first round is fitted at
    // four bytes a token; the results' count teaches it, and the second
    // round fills what the first left); a chat template that leaves the
    // tools' definitions out (the count anchors them). Nothing is refused,
    // and the largest request fills the window less its reserve.
    for (bytes_per_token, skips_tools, rounds) in [(3, false, 1), (6, false, 2), (4, true, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(WindowedModel {
            rounds,
            skips_tools,
            ..WindowedModel::of(24_000, bytes_per_token, Refuses::NamingTheWindow, 4)
        });
        let schema = json!({"type": "object", "properties": {"topic": {"type": "string", "description": "What to write about. ".repeat(500)}}});
        let runtime = Arc::new(runtime_of(model.clone(), TWO_MB, schema, Arc::default()).with_data_dir(dir.path()));
        let agent = Agent::builder(runtime)
            .context_window(Some(ContextWindow::new(24_000).unwrap()))
            .build()
            .unwrap();
        let prompt = format!("Do four things. {}", "Be thorough. ".repeat(100));
        let outcome = agent.run(prompt, &CancellationToken::new()).await;
        let case = (bytes_per_token, skips_tools, rounds);
        assert_eq!(outcome.stop, AgentStop::Completed, "{case:?}: {:?}", model.seen());
        assert_eq!(model.refusals(), 0, "{case:?}: {:?}", model.seen());
        let share = model.largest_share(4_096);
        assert!((0.9..=1.0).contains(&share), "{case:?}: {share} {:?}", model.seen());
    }
}

#[tokio::test]
async fn a_server_whose_answers_count_nothing_is_asked_to_count_twice_for_each_round_it_cuts() {
    // llama-cpp-python: no usage in its answers, a template that leaves the
    // tool definitions out, text at five bytes a token; it counts when
    // asked. Two rounds of four large results: before each is cut, the
    // request without the results and then the results cut to fit are
    // counted, and each fitted request fills the window less its reserve.
    // A server that gives no count when asked is asked once, then never,
    // and its one round is cut on the estimate alone.
    for (reports, rounds) in [(Reports::WhenAsked, 2), (Reports::Nothing, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(WindowedModel {
            rounds,
            skips_tools: true,
            reports,
            ..WindowedModel::of(24_000, 5, Refuses::NamingTheWindow, 4)
        });
        let schema = json!({"type": "object", "properties": {"topic": {"type": "string", "description": "What to write about. ".repeat(500)}}});
        let runtime = Arc::new(runtime_of(model.clone(), TWO_MB, schema, Arc::default()).with_data_dir(dir.path()));
        let agent = Agent::builder(runtime)
            .context_window(Some(ContextWindow::new(24_000).unwrap()))
            .build()
            .unwrap();
        let outcome = agent.run("Do four things, twice.", &CancellationToken::new()).await;
        assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
        assert_eq!(model.refusals(), 0, "{:?}", model.seen());
        let asked = model.counted.lock().unwrap().clone();
        let share = model.largest_share(4_096);
        if reports == Reports::WhenAsked {
            assert_eq!(asked.len(), 4, "two asks a round: {asked:?}");
            let taken: Vec<u64> = model.seen().iter().map(|(tokens, _)| *tokens).collect();
            for fitted in &taken[1..] {
                let share = *fitted as f64 / (24_000 - 4_096) as f64;
                assert!((0.9..=1.0).contains(&share), "{share}: {taken:?}");
            }
        } else {
            assert_eq!(asked.len(), 1, "asked once, then never: {asked:?}");
            assert!(share < 0.9, "{share}: {:?}", model.seen());
        }
    }
}

#[tokio::test]
async fn a_refusals_count_calibrates_a_server_that_reports_no_usage() {
    // llama-cpp-python's stream: no usage ever; a chat template that leaves
    // the tools' definitions out; a tokenizer that counts six bytes a
    // token; a refusal that names the window and counts the prompt. The
    // one refusal teaches both: the request fitted after it uses most of
    // the window (two thirds at four bytes a token) and is not refused.
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(WindowedModel {
        reports: Reports::Nothing,
        skips_tools: true,
        ..WindowedModel::of(8_192, 6, Refuses::NamingTheWindow, 4)
    });
    let agent = Agent::builder(runtime(model.clone(), 200_000, dir.path()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
    assert_eq!(model.refusals(), 1, "{:?}", model.seen());
    let share = model.largest_share(2_048);
    assert!((0.9..=1.0).contains(&share), "{share} {:?}", model.seen());
}

#[tokio::test]
async fn a_refusal_without_a_window_is_fitted_again_to_a_configured_one() {
    // The server counts three bytes a token, reports no usage and says
    // nothing but that the request is too long: the configured window is
    // fitted again, with a larger estimate, and the run finishes.
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(WindowedModel {
        reports: Reports::Nothing,
        ..WindowedModel::of(24_000, 3, Refuses::Unnamed, 4)
    });
    let agent = Agent::builder(runtime(model.clone(), TWO_MB, dir.path()))
        .context_window(Some(ContextWindow::new(24_000).unwrap()))
        .build()
        .unwrap();
    let outcome = agent.run("Do four things.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed, "{:?}", model.seen());
    assert_eq!(outcome.text, "heads 4, tails 4");
    assert_eq!(model.refusals(), 1, "refused once, fitted again: {:?}", model.seen());
}

#[tokio::test]
async fn a_learned_window_is_its_models_alone_in_every_session() {
    // Two sessions' agents (one runtime, as `dsh mcp --listen` shares it),
    // on two models of one server.
    let dir = tempfile::tempdir().unwrap();
    let model = WindowedModel::new(24_000, Refuses::NamingTheWindow, 4);
    let runtime = runtime(model.clone(), TWO_MB, dir.path());
    let session = Arc::new(runtime.as_ref().clone().with_tools(runtime.tools().clone()));
    let first = Agent::builder(runtime.clone()).build().unwrap();
    let other = Agent::builder(session)
        .model(Some("other-model".into()))
        .build()
        .unwrap();
    assert_eq!(
        first.run("Do four things.", &CancellationToken::new()).await.stop,
        AgentStop::Completed
    );
    assert_eq!(runtime.learned_window("windowed"), Some(24_000));
    assert_eq!(
        runtime.learned_window("other-model"),
        None,
        "another model's window is not touched"
    );
    assert_eq!(other.effective_context_window(), None);
    assert_eq!(first.effective_context_window(), Some(24_000));
    // Another endpoint (another client, so another runtime) serving a model
    // of the same name learns its own window and changes nothing here.
    let elsewhere = WindowedModel::new(16_000, Refuses::NamingTheWindow, 4);
    let elsewhere_dir = tempfile::tempdir().unwrap();
    let there = self::runtime(elsewhere, TWO_MB, elsewhere_dir.path());
    let agent = Agent::builder(there.clone()).build().unwrap();
    assert_eq!(
        agent.run("Do four things.", &CancellationToken::new()).await.stop,
        AgentStop::Completed
    );
    assert_eq!(there.learned_window("windowed"), Some(16_000));
    assert_eq!(runtime.learned_window("windowed"), Some(24_000));
}

/// The lines a context stop can show: from real runs, and the ones a run
/// of this model cannot reach built directly.
#[tokio::test]
async fn the_stop_lines_are_pinned() {
    async fn stop_of(model: Arc<WindowedModel>, window: Option<u64>, prompt: String) -> String {
        let dir = tempfile::tempdir().unwrap();
        let agent = Agent::builder(runtime(model, TWO_MB, dir.path()))
            .context_window(window.map(|window| ContextWindow::new(window).unwrap()))
            .build()
            .unwrap();
        agent.run(prompt, &CancellationToken::new()).await.stop.to_string()
    }
    let silent = |window, bytes_per_token, refuses| {
        Arc::new(WindowedModel {
            reports: Reports::Nothing,
            ..WindowedModel::of(window, bytes_per_token, refuses, 4)
        })
    };
    let mut lines = vec![
        stop_of(
            WindowedModel::new(8_000, Refuses::NamingTheWindow, 0),
            Some(8_000),
            "y".repeat(40_000),
        )
        .await,
        stop_of(
            silent(24_000, 2, Refuses::WindowOnly),
            Some(24_000),
            "Do four things.".into(),
        )
        .await,
        stop_of(silent(24_000, 4, Refuses::Unnamed), None, "Do four things.".into()).await,
        stop_of(silent(24_000, 4, Refuses::CountOnly), None, "Do four things.".into()).await,
    ];
    lines.extend(
        [
            ContextStop::new(Some(24_000), 4_096, 25_002, FoundBy::SecondRefusal).counted_by(CountedBy::Server),
            ContextStop::new(Some(24_000), 4_096, 25_002, FoundBy::Refusal).counted_by(CountedBy::Server),
        ]
        .iter()
        .map(|stop| AgentStop::ContextWindow(stop.clone()).to_string()),
    );
    insta::assert_snapshot!("context_stop_lines", lines.join("\n"));
}
