//! Tracing of delegations (see `docs/observability.md`): the lifecycle of one
//! run as events, and the span of a background task that runs a child.
//!
//! A run's lifecycle is four events on the current span: the child was
//! started, published to whoever settles it, settled with a stop reason, and
//! disposed. Each event's message is its name (`subagent.started`, …). Each
//! stage is one function, so whatever drives a delegation (the `subagent`
//! tool, the control service's activations, a harness's own tool over
//! [`SubagentService`](crate::SubagentService)) calls the same few points.
//!
//! A foreground delegation emits them on its call's `execute_tool` span. A
//! background child outlives that call, so its task runs inside a
//! [`task_span`] of its own, which follows from the call that started it;
//! the child's `invoke_agent` span and the lifecycle events sit under it.

use dsh_subagent_api::{SpanOrigin, SubagentError, SubagentResult, SubagentRun, bound_diagnostic};
use tracing::Span;
use tracing::field::Empty;

/// The span of one background task that runs a child, placed by `origin`
/// (for a background start, a new trace that follows from the call that
/// started it). Run the task inside it, give the child's request
/// [`SpanOrigin::ChildOf`] it, and record the task's id with
/// [`record_task_id`] once it has one.
pub fn task_span(origin: &SpanOrigin) -> Span {
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
pub fn record_task_id(span: &Span, task_id: &str) {
    span.record("subagent.task_id", task_id);
}

/// The provider started a child.
pub fn started(provider: &str, run: &SubagentRun) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.provider = provider,
        subagent.child_id = run.id(),
        "subagent.started"
    );
}

/// The run was handed to whoever settles it: the call itself, or the
/// background task (whose [`task_span`] names it).
pub fn published(run: &SubagentRun) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.child_id = run.id(),
        "subagent.published"
    );
}

/// The run's result settled.
pub fn settled(result: &Result<SubagentResult, SubagentError>) {
    match result {
        Ok(result) => {
            let diagnostic = result.diagnostic.as_deref().map(bound_diagnostic);
            tracing::event!(
                target: "dsh::gen_ai",
                tracing::Level::INFO,
                subagent.stop_reason = result.stop_reason.as_str(),
                subagent.diagnostic = diagnostic.as_deref(),
                "subagent.settled"
            );
        }
        Err(error) => {
            let diagnostic = bound_diagnostic(error.to_string());
            tracing::event!(
                target: "dsh::gen_ai",
                tracing::Level::INFO,
                subagent.stop_reason = "error",
                subagent.diagnostic = diagnostic.as_str(),
                "error.type" = error.code(),
                "subagent.settled"
            );
        }
    }
}

/// The run was released (`dispose` returned).
pub fn disposed(disposed: &Result<(), SubagentError>) {
    match disposed {
        Ok(()) => tracing::event!(
            target: "dsh::gen_ai",
            tracing::Level::INFO,
            subagent.disposed = "ok",
            "subagent.disposed"
        ),
        Err(error) => tracing::event!(
            target: "dsh::gen_ai",
            tracing::Level::INFO,
            subagent.disposed = "failed",
            "error.type" = error.code(),
            subagent.diagnostic = bound_diagnostic(error.to_string()).as_str(),
            "subagent.disposed"
        ),
    }
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
/// `token_budget`) is its `error.type`.
pub(crate) fn refused(error: &SubagentError) {
    let limit = match error {
        SubagentError::QueueFull { .. } => "max_queued",
        SubagentError::ChildLimit { .. } => "max_children",
        SubagentError::TokenBudgetSpent { .. } => "token_budget",
        other => other.code(),
    };
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        "error.type" = limit,
        subagent.code = error.code(),
        "subagent.refused"
    );
}

fn wait_ms(waited: std::time::Duration) -> i64 {
    i64::try_from(waited.as_millis()).unwrap_or(i64::MAX)
}
