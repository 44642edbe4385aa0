//! Tracing across a delegation: where a child's `invoke_agent` span hangs,
//! and how a trace crosses a process boundary.
//!
//! Spans are plain `tracing` spans named after the OpenTelemetry GenAI
//! semantic conventions (see `docs/observability.md`); this crate knows no
//! OpenTelemetry type. A child's span is placed by the request's
//! [`SpanOrigin`]: under the span of the call that waits for it, or in a
//! trace of its own that follows from the call that started it.
//!
//! A run's lifecycle is four events on the current span: the child was
//! [`started`], [`published`] to whoever settles it, [`settled`] with a stop
//! reason, and [`disposed`]. Each event's message is its name
//! (`subagent.started`, …). Each stage is one function, so whatever drives
//! a delegation (the `subagent` tool, the service's background tasks, the
//! control service's activations, a harness's own tool) emits the same
//! events. A foreground delegation emits them on its call's `execute_tool`
//! span, a background child under its task's span.
//!
//! An out-of-process provider sends the origin's W3C trace context
//! (`traceparent`, `tracestate`) to its child. Only a program that exports
//! traces can read that context off a span, so it installs a
//! [`TracePropagator`] once ([`set_propagator`]); without one,
//! [`inject`] returns nothing and [`extract`] does nothing.

use std::sync::OnceLock;

use tracing::Span;

use crate::{SubagentError, SubagentResult, SubagentRun, bound_diagnostic};

/// Where a child's `invoke_agent` span sits relative to the span that started it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SpanOrigin {
    /// A child of this span: the call waits for the child (a foreground delegation).
    ChildOf(Span),
    /// The root of a new trace that follows from this span: the child
    /// outlives the call that started it (a background child, a continued child).
    FollowsFrom(Span),
    /// The continuation of a trace from another process: the W3C trace
    /// context (`traceparent`, `tracestate`) its request carried, read by the
    /// installed [`TracePropagator`].
    Remote(Vec<(String, String)>),
}

impl SpanOrigin {
    /// A child of the current span.
    pub fn current() -> Self {
        Self::ChildOf(Span::current())
    }

    /// Follows from the current span.
    pub fn follows_current() -> Self {
        Self::FollowsFrom(Span::current())
    }

    /// The span that started the child, when it is in this process.
    pub fn span(&self) -> Option<&Span> {
        match self {
            Self::ChildOf(span) | Self::FollowsFrom(span) => Some(span),
            Self::Remote(_) => None,
        }
    }

    /// Opens `child` as this origin places it: `make` builds the span with
    /// the parent it is given (`None` = a new root), and a follows-from
    /// origin is linked.
    pub fn place(&self, make: impl FnOnce(Option<&Span>) -> Span) -> Span {
        match self {
            Self::ChildOf(parent) => make(Some(parent)),
            Self::FollowsFrom(origin) => {
                let span = make(None);
                span.follows_from(origin);
                span
            }
            Self::Remote(fields) => {
                let span = make(None);
                extract(
                    &|key| {
                        fields
                            .iter()
                            .find(|(name, _)| name == key)
                            .map(|(_, value)| value.clone())
                    },
                    &span,
                );
                span
            }
        }
    }
}

impl Default for SpanOrigin {
    fn default() -> Self {
        Self::current()
    }
}

/// W3C trace context (`traceparent`, `tracestate`) to and from spans,
/// installed by the program that exports traces.
pub trait TracePropagator: Send + Sync + 'static {
    /// The trace-context fields of `span` (`traceparent`, and `tracestate`
    /// when present); empty when the span is not recorded.
    fn inject(&self, span: &Span) -> Vec<(String, String)>;

    /// Makes `span` continue the trace that `fields` carry (looked up by
    /// name); a missing or malformed context leaves it as it is.
    fn extract(&self, fields: &dyn Fn(&str) -> Option<String>, span: &Span);
}

static PROPAGATOR: OnceLock<Box<dyn TracePropagator>> = OnceLock::new();

/// Installs the process's propagator; `false` when one was already installed.
pub fn set_propagator(propagator: Box<dyn TracePropagator>) -> bool {
    PROPAGATOR.set(propagator).is_ok()
}

/// The trace-context fields of `span`, by the installed propagator.
pub fn inject(span: &Span) -> Vec<(String, String)> {
    match PROPAGATOR.get() {
        Some(propagator) if !span.is_disabled() => propagator.inject(span),
        _ => Vec::new(),
    }
}

/// Makes `span` continue the trace that `fields` carry, by the installed propagator.
pub fn extract(fields: &dyn Fn(&str) -> Option<String>, span: &Span) {
    if let Some(propagator) = PROPAGATOR.get()
        && !span.is_disabled()
    {
        propagator.extract(fields, span);
    }
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
/// background task whose span names it.
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
                "error.type" = error.code().as_str(),
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
            "error.type" = error.code().as_str(),
            subagent.diagnostic = bound_diagnostic(error.to_string()).as_str(),
            "subagent.disposed"
        ),
    }
}
