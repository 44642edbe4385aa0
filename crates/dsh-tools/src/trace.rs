//! The `execute_tool` span of one tool call, after the OpenTelemetry GenAI
//! semantic conventions (see `docs/observability.md`).
//!
//! Spans are plain `tracing` spans: with no subscriber interested in them
//! they cost one relaxed atomic load per call. A subscriber that exports
//! OpenTelemetry (the `dsh` binary's, for one) reads the `otel.name` field as
//! the span name, `execute_tool <tool name>`.

use tracing::Span;
use tracing::field::Empty;

use crate::{Cut, ToolExecution, ToolResult};

/// The `error.type` of a failure that carries no stable code.
pub const OTHER_ERROR: &str = "_OTHER";

/// Opens the `execute_tool <name>` span of one call; enter it (or
/// `Instrument` the call's future with it) while the tool runs, then record
/// the outcome with [`record_tool_result`].
pub fn execute_tool_span(name: &str, exec: &ToolExecution) -> Span {
    let span = tracing::info_span!(
        target: "dsh::gen_ai",
        "execute_tool",
        otel.name = %format_args!("execute_tool {name}"),
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        "gen_ai.tool.type" = "function",
        gen_ai.tool.call.id = Empty,
        gen_ai.agent.id = Empty,
        "error.type" = Empty,
        "dsh.result.full_bytes" = Empty,
        "dsh.result.full_chars" = Empty,
        "dsh.result.shown_bytes" = Empty,
        "dsh.result.shown_chars" = Empty,
    );
    if !span.is_disabled() {
        if let Some(call_id) = exec.call_id() {
            span.record("gen_ai.tool.call.id", call_id);
        }
        if let Some(agent) = exec.agent() {
            span.record("gen_ai.agent.id", agent.id().as_str());
        }
    }
    span
}

/// Records a call's outcome on its span: a failure sets `error.type` to the
/// error's stable code (or [`OTHER_ERROR`]) and the span status to error;
/// a result cut to its budget records the full text's size and the size
/// shown (`dsh.result.full_bytes`, `dsh.result.full_chars`,
/// `dsh.result.shown_bytes`, `dsh.result.shown_chars`).
pub fn record_tool_result(span: &Span, result: &ToolResult) {
    if result.is_error {
        record_error(span, result.error.as_ref().and_then(|error| error.code()));
    }
    if let Some(cut) = &result.cut {
        record_cut(span, cut);
    }
}

/// Records on `span` how a result was cut: the full text's size and what
/// of it is shown, in bytes and in characters.
pub fn record_cut(span: &Span, cut: &Cut) {
    let shown = cut.shown.size();
    span.record("dsh.result.full_bytes", int(cut.full.bytes));
    span.record("dsh.result.full_chars", int(cut.full.chars));
    span.record("dsh.result.shown_bytes", int(shown.bytes));
    span.record("dsh.result.shown_chars", int(shown.chars));
}

/// A size as an OTel int: an `i64` field (`tracing-opentelemetry` turns a
/// `u64` into its text).
fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Marks `span` failed with `error.type` = `code` (or [`OTHER_ERROR`]).
pub fn record_error(span: &Span, code: Option<&str>) {
    span.record("error.type", code.unwrap_or(OTHER_ERROR));
    span.record("otel.status_code", "ERROR");
}
