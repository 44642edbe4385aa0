//! The lifecycle of one delegation as events on the call's `execute_tool`
//! span (see `docs/observability.md`): the child was started, published to
//! its caller, settled with a stop reason, and disposed.
//!
//! Each event's message is its name (`subagent.started`, …). Each stage is one function so whatever drives a delegation calls the same
//! few points; an event goes to the current span.

use dsh_subagent_api::{SubagentError, SubagentResult, SubagentRun, bound_diagnostic};

/// The provider started a child.
pub(crate) fn started(provider: &str, run: &SubagentRun) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.provider = provider,
        subagent.child_id = run.id(),
        "subagent.started"
    );
}

/// The run was handed to whoever settles it: the call itself, or the
/// background task whose id the call returns (`task`).
pub(crate) fn published(run: &SubagentRun, task: Option<&str>) {
    tracing::event!(
        target: "dsh::gen_ai",
        tracing::Level::INFO,
        subagent.child_id = run.id(),
        subagent.task_id = task,
        "subagent.published"
    );
}

/// The run's result settled.
pub(crate) fn settled(result: &Result<SubagentResult, SubagentError>) {
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
pub(crate) fn disposed(disposed: &Result<(), SubagentError>) {
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
