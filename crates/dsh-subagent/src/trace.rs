//! Tracing of the service's own steps (see `docs/observability.md`): the
//! span of a background task that runs a child, and a start's way through
//! its tree's gate (queued, admitted, withdrawn, refused).
//!
//! A background child outlives the call that started it, so its task runs
//! inside a [`task_span`] of its own, which follows from that call; the
//! child's `invoke_agent` span and the run's lifecycle events
//! ([`dsh_subagent_api::trace::started`] and the rest) sit under it.

use dsh_subagent_api::{SpanOrigin, SubagentError};
use tracing::Span;
use tracing::field::Empty;

/// The span of one background task that runs a child, placed by `origin`
/// (for a background start, a new trace that follows from the call that
/// started it). Run the task inside it, give the child's request
/// [`SpanOrigin::ChildOf`] it, and record the task's id with
/// [`record_task_id`] once it has one.
pub(crate) fn task_span(origin: &SpanOrigin) -> Span {
    origin.place(|parent| {
        tracing::info_span!(
            target: "dsh::gen_ai",
            parent: parent.and_then(Span::id),
            "subagent.task",
            otel.name = "subagent.task",
            subagent.task_id = Empty,
        )
    })
}

/// Records the id of the task a [`task_span`] belongs to.
pub(crate) fn record_task_id(span: &Span, task_id: &str) {
    span.record("subagent.task_id", task_id);
}

/// The start waits for a slot of its delegation tree, `ahead` calls before
/// it. Counts are `i64` fields, which OTLP exports as ints.
pub(crate) fn queued(ahead: usize) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.queue_ahead = i64::try_from(ahead).unwrap_or(i64::MAX),
        "subagent.queued"
    );
}

/// The queued start got its slot after `waited`.
pub(crate) fn admitted(waited: std::time::Duration) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.wait_ms = wait_ms(waited),
        "subagent.admitted"
    );
}

/// The queued start was cancelled after `waited`, and left the queue.
pub(crate) fn withdrawn(waited: std::time::Duration) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.wait_ms = wait_ms(waited),
        "subagent.withdrawn"
    );
}

/// A limit refused the start: the limit (`max_queued`, `max_children`,
/// `token_budget`, `cost_budget`) is its `error.type`.
pub(crate) fn refused(error: &SubagentError) {
    let limit = match error {
        SubagentError::QueueFull { .. } => "max_queued",
        SubagentError::ChildLimit { .. } => "max_children",
        SubagentError::TokenBudgetSpent { .. } => "token_budget",
        SubagentError::CostBudgetSpent { .. } => "cost_budget",
        other => other.code().as_str(),
    };
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        "error.type" = limit,
        subagent.code = error.code().as_str(),
        "subagent.refused"
    );
}

fn wait_ms(waited: std::time::Duration) -> i64 {
    i64::try_from(waited.as_millis()).unwrap_or(i64::MAX)
}
