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
        "error.type" = Empty,
    )
}

/// Records one model call's response on its span. The call's one finish
/// reason is a string field (`tracing` has no arrays); an exporter sends it
/// as the one-element string array the conventions type it as.
pub(crate) fn record_response(span: &Span, response: &ChatResponse) {
    span.record("gen_ai.response.finish_reasons", response.finish_reason.as_str());
    if let Some(usage) = response.usage {
        record_usage(span, usage);
    }
}

/// Records token usage on a span, as ints.
pub(crate) fn record_usage(span: &Span, usage: Usage) {
    span.record("gen_ai.usage.input_tokens", int(usage.prompt_tokens));
    span.record("gen_ai.usage.output_tokens", int(usage.completion_tokens));
}

/// A count as the conventions' int: an `i64` field. `tracing-opentelemetry`
/// turns an `i64` into an OTel int, but a `u64` into its text.
fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Records a failed model call on its span.
pub(crate) fn record_llm_error(span: &Span, error: &LlmError) {
    dsh_tools::trace::record_error(span, Some(llm_error_type(error)));
}

/// The stable `error.type` of a model-call failure.
fn llm_error_type(error: &LlmError) -> &'static str {
    match error {
        LlmError::Cancelled => "CANCELLED",
        LlmError::Config(_) => "MODEL_CONFIG",
        LlmError::Http { .. } => "MODEL_HTTP",
        LlmError::Connection { .. } => "MODEL_CONNECTION",
        LlmError::Timeout { .. } => "MODEL_TIMEOUT",
        LlmError::MalformedEvent { .. } => "MODEL_MALFORMED_EVENT",
        LlmError::StreamError(_) => "MODEL_STREAM_ERROR",
        LlmError::StreamEnded(_) => "MODEL_STREAM_ENDED",
        LlmError::ContextLength { .. } => "MODEL_CONTEXT_LENGTH",
        _ => "MODEL_ERROR",
    }
}

/// Records how a run ended on its `invoke_agent` span: a run that did not
/// complete gets an `error.type`.
pub(crate) fn record_stop(span: &Span, stop: &AgentStop) {
    let code = match stop {
        AgentStop::Completed => return,
        AgentStop::MaxTokens => "MAX_TOKENS",
        AgentStop::Refusal => "REFUSAL",
        AgentStop::Cancelled => "CANCELLED",
        AgentStop::MaxTurns(_) => "MAX_TURNS",
        AgentStop::Error(_) => "MODEL_ERROR",
        AgentStop::TokenBudget(_) => dsh_subagent_api::ErrorCode::TokenBudgetSpent.as_str(),
        AgentStop::ContextWindow(_) => crate::ErrorCode::ContextWindow.as_str(),
    };
    dsh_tools::trace::record_error(span, Some(code));
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
