//! A span-recording subscriber for the bench: what an exporting subscriber
//! does before it exports (every field of every `dsh::gen_ai` span and
//! event visited and kept as text), without the export.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// How many spans and events the subscriber recorded.
#[derive(Default, Debug)]
pub struct Recorded {
    /// Spans opened.
    pub spans: AtomicU64,
    /// Events recorded.
    pub events: AtomicU64,
}

/// Fields of one span, as text.
struct Fields(Vec<(&'static str, String)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), value.to_owned()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name(), format!("{value:?}")));
    }
}

struct Recording(Arc<Recorded>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recording {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(Vec::with_capacity(8));
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
        self.0.spans.fetch_add(1, Ordering::Relaxed);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(Vec::with_capacity(4));
        event.record(&mut fields);
        if let Some(span) = ctx.event_span(event)
            && let Some(kept) = span.extensions_mut().get_mut::<Fields>()
        {
            kept.0.extend(fields.0);
        }
        self.0.events.fetch_add(1, Ordering::Relaxed);
    }
}

/// A subscriber that records the GenAI spans and events (target
/// `dsh::gen_ai`, as `dsh` exports them), and its counters.
pub fn recording() -> (Dispatch, Arc<Recorded>) {
    let recorded = Arc::new(Recorded::default());
    let layer =
        Recording(recorded.clone()).with_filter(Targets::new().with_target("dsh::gen_ai", tracing::Level::INFO));
    let subscriber = tracing_subscriber::registry().with(layer);
    (Dispatch::new(subscriber), recorded)
}
