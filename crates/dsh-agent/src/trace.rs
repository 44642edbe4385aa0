//! The `invoke_agent` and `chat` spans of an agent, after the OpenTelemetry
//! GenAI semantic conventions (see `docs/observability.md`).
//!
//! Prompt and answer text are recorded only when the user opts in with
//! [`CAPTURE_CONTENT_ENV`] set to `true`, as the conventions advise.

use std::sync::OnceLock;

use dsh_llm::{ChatResponse, LlmError, Usage};
use tracing::Span;
use tracing::field::Empty;

use crate::{AgentInfo, AgentStop, ContextStop};

/// Set to `true` to record prompt and answer text on `invoke_agent` spans.
pub const CAPTURE_CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The agent name of an agent without a label.
const UNNAMED: &str = "agent";

/// Whether the user opted in to recording message text (read once).
pub(crate) fn capture_content() -> bool {
    static CAPTURE: OnceLock<bool> = OnceLock::new();
    *CAPTURE
        .get_or_init(|| std::env::var(CAPTURE_CONTENT_ENV).is_ok_and(|value| value.trim().eq_ignore_ascii_case("true")))
}

/// The `invoke_agent <name>` span of one run, under `parent` (`None`: a new root).
pub(crate) fn invoke_agent(parent: Option<&Span>, info: &AgentInfo, provider: &str) -> Span {
    let name = info.label.as_deref().unwrap_or(UNNAMED);
    let parent = parent.and_then(Span::id);
    tracing::info_span!(
        target: "dsh::gen_ai",
        parent: parent,
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {name}"),
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = info.id.as_str(),
        gen_ai.agent.name = name,
        gen_ai.provider.name = provider,
        gen_ai.request.model = info.model.as_str(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        dsh.usage.estimated = Empty,
        dsh.cost = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        "error.type" = Empty,
        dsh.context.window = Empty,
        dsh.context.request_tokens = Empty,
    )
}

/// The `chat <model>` span of one model call (a child of the current span).
pub(crate) fn chat(model: &str, provider: &str, max_tokens: Option<u64>) -> Span {
    tracing::info_span!(
        target: "dsh::gen_ai",
        "chat",
        otel.name = %format_args!("chat {model}"),
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.request.max_tokens = max_tokens.map(int),
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        dsh.usage.estimated = Empty,
        dsh.cost = Empty,
        "error.type" = Empty,
    )
}

/// Records one model call's response on its span, and the usage it
/// `spent`. The call's one finish reason is a string field (`tracing` has
/// no arrays); an exporter sends it as the one-element string array the
/// conventions type it as.
pub(crate) fn record_response(span: &Span, response: &ChatResponse, spent: Usage) {
    span.record("gen_ai.response.finish_reasons", response.finish_reason.as_str());
    record_usage(span, spent);
}

/// Records what a call or a run cost on its span (`dsh.cost`, in the unit
/// of the model's price); estimated when its usage is, which
/// `dsh.usage.estimated` says.
pub(crate) fn record_cost(span: &Span, cost: dsh_llm::Cost) {
    span.record("dsh.cost", dsh_subagent_api::money::amount_of_nanos(cost.nanos()));
}

/// Records token usage on a span, as ints (the cached input tokens where
/// the server reported them); a usage with an estimate in it is marked
/// `dsh.usage.estimated = true` (the counts stay ints, as the conventions
/// type them).
pub(crate) fn record_usage(span: &Span, usage: Usage) {
    span.record("gen_ai.usage.input_tokens", int(usage.prompt_tokens));
    span.record("gen_ai.usage.output_tokens", int(usage.completion_tokens));
    if let Some(cached) = usage.cached_tokens {
        span.record("gen_ai.usage.cache_read.input_tokens", int(cached));
    }
    if usage.is_estimated() {
        span.record("dsh.usage.estimated", true);
    }
}

/// A count as the conventions' int: an `i64` field. `tracing-opentelemetry`
/// turns an `i64` into an OTel int, but a `u64` into its text.
fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The `error.type` this crate records: why a model call failed, or why a
/// run did not complete. One list, so a value `docs/observability.md` names
/// is written in one place; [`as_str`](Self::as_str) is what the span holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorType {
    /// `CANCELLED`: the call or the run was cancelled.
    Cancelled,
    /// The run was stopped resumably: its process is stopping.
    Interrupted,
    /// `MODEL_CONFIG`: the model client is misconfigured.
    ModelConfig,
    /// `MODEL_HTTP`: the server answered with an error status.
    ModelHttp,
    /// `MODEL_CONNECTION`: the server could not be reached.
    ModelConnection,
    /// `MODEL_TIMEOUT`: the server did not answer in time.
    ModelTimeout,
    /// `MODEL_MALFORMED_EVENT`: a streamed event could not be read.
    ModelMalformedEvent,
    /// `MODEL_STREAM_ERROR`: the stream reported an error.
    ModelStreamError,
    /// `MODEL_STREAM_ENDED`: the stream ended before its answer did.
    ModelStreamEnded,
    /// `MODEL_CONTEXT_LENGTH`: the server refused the request for its length.
    ModelContextLength,
    /// `MODEL_ERROR`: any other model failure, or a run it ended.
    ModelError,
    /// `MAX_TOKENS`: the run stopped at the model's output limit.
    MaxTokens,
    /// `REFUSAL`: the model refused.
    Refusal,
    /// `MAX_TURNS`: the run used all its turns.
    MaxTurns,
    /// `TOKEN_BUDGET_SPENT`: the run spent its token budget (the seam's code).
    TokenBudgetSpent,
    /// `COST_BUDGET_SPENT`: the run's tree spent its money budget (the seam's code).
    CostBudgetSpent,
    /// `CONTEXT_WINDOW`: no request fitting the context window could be
    /// made (this crate's code).
    ContextWindow,
}

impl ErrorType {
    /// The value of the span's `error.type`.
    const fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "CANCELLED",
            Self::Interrupted => "INTERRUPTED",
            Self::ModelConfig => "MODEL_CONFIG",
            Self::ModelHttp => "MODEL_HTTP",
            Self::ModelConnection => "MODEL_CONNECTION",
            Self::ModelTimeout => "MODEL_TIMEOUT",
            Self::ModelMalformedEvent => "MODEL_MALFORMED_EVENT",
            Self::ModelStreamError => "MODEL_STREAM_ERROR",
            Self::ModelStreamEnded => "MODEL_STREAM_ENDED",
            Self::ModelContextLength => "MODEL_CONTEXT_LENGTH",
            Self::ModelError => "MODEL_ERROR",
            Self::MaxTokens => "MAX_TOKENS",
            Self::Refusal => "REFUSAL",
            Self::MaxTurns => "MAX_TURNS",
            Self::TokenBudgetSpent => dsh_subagent_api::ErrorCode::TokenBudgetSpent.as_str(),
            Self::CostBudgetSpent => dsh_subagent_api::ErrorCode::CostBudgetSpent.as_str(),
            Self::ContextWindow => crate::ErrorCode::ContextWindow.as_str(),
        }
    }

    /// The `error.type` of a model-call failure.
    fn of_llm_error(error: &LlmError) -> Self {
        match error {
            LlmError::Cancelled => Self::Cancelled,
            LlmError::Config(_) => Self::ModelConfig,
            LlmError::Http { .. } => Self::ModelHttp,
            LlmError::Connection { .. } => Self::ModelConnection,
            LlmError::Timeout { .. } => Self::ModelTimeout,
            LlmError::MalformedEvent { .. } => Self::ModelMalformedEvent,
            LlmError::StreamError(_) => Self::ModelStreamError,
            LlmError::StreamEnded { .. } => Self::ModelStreamEnded,
            LlmError::ContextLength { .. } => Self::ModelContextLength,
            _ => Self::ModelError,
        }
    }

    /// The `error.type` of a run that stopped as `stop`; none for one that
    /// completed.
    fn of_stop(stop: &AgentStop) -> Option<Self> {
        Some(match stop {
            AgentStop::Completed => return None,
            AgentStop::MaxTokens => Self::MaxTokens,
            AgentStop::Refusal => Self::Refusal,
            AgentStop::Cancelled => Self::Cancelled,
            AgentStop::Interrupted => Self::Interrupted,
            AgentStop::MaxTurns(_) => Self::MaxTurns,
            AgentStop::Error(_) => Self::ModelError,
            AgentStop::AnswerCut(_) => Self::ModelStreamEnded,
            AgentStop::TokenBudget(_) => Self::TokenBudgetSpent,
            AgentStop::CostBudget(_) => Self::CostBudgetSpent,
            AgentStop::ContextWindow(_) => Self::ContextWindow,
        })
    }
}

/// Records a failed model call on its span.
pub(crate) fn record_llm_error(span: &Span, error: &LlmError) {
    dsh_tools::trace::record_error(span, Some(ErrorType::of_llm_error(error).as_str()));
}

/// Records how a run ended on its `invoke_agent` span: a run that did not
/// complete gets an `error.type`.
pub(crate) fn record_stop(span: &Span, stop: &AgentStop) {
    if let Some(error_type) = ErrorType::of_stop(stop) {
        dsh_tools::trace::record_error(span, Some(error_type.as_str()));
    }
}

/// Records on the current `invoke_agent` span the window a run stopped at
/// and the size of the request that did not fit, as ints.
pub(crate) fn record_context_stop(context: &ContextStop) {
    let span = Span::current();
    if let Some(window) = context.window {
        span.record("dsh.context.window", int(window));
    }
    span.record("dsh.context.request_tokens", int(context.request));
}

/// An event on the current span, named `context.fitted`: one round of
/// tool results was cut to fit the window (`cut` of `results`).
pub(crate) fn record_fitted(window: u64, results: usize, cut: usize) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        dsh.context.window = int(window),
        dsh.context.results = results as i64,
        dsh.context.cut = cut as i64,
        "context.fitted"
    );
}

/// Records message text, when the user opted in.
pub(crate) fn record_content(span: &Span, field: &'static str, role: &str, text: &str) {
    if capture_content() && !span.is_disabled() {
        let messages = serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]);
        span.record(field, messages.to_string());
    }
}
