//! Logging, and OTLP export of the agents' spans: one setup any subcommand
//! calls ([`init`]) and one flush at exit ([`Telemetry::shutdown`]).
//!
//! Export is on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not
//! `true`): spans go over OTLP http/protobuf, with `OTEL_SERVICE_NAME`
//! (default `dsh`) and `OTEL_EXPORTER_OTLP_HEADERS`. Without them no
//! OpenTelemetry layer is installed, so spans cost what an unobserved
//! `tracing` span costs. A collector that is down or slow never fails a run:
//! each export and the final flush are bounded by [`EXPORT_TIMEOUT`], and
//! the first failure is reported as one warning line at exit. The exporter
//! gives each span the GenAI convention types that `tracing` fields cannot
//! carry (`conventions`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dsh_subagent_api::trace::TracePropagator;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::wording;

mod conventions;

/// The bound of one export request, and of the flush at exit.
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_millis(1500);

/// The spans that are exported: the GenAI spans and the lifecycle events.
const EXPORTED: &str = "dsh::gen_ai=info";

/// Whether the environment asks for OTLP export.
fn export_requested(env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |key: &str| env(key).is_some_and(|value| !value.trim().is_empty());
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// What [`init`] set up; flush it with [`Telemetry::shutdown`] before exit.
pub(crate) struct Telemetry {
    export: Option<Export>,
}

struct Export {
    provider: SdkTracerProvider,
    failure: Arc<Mutex<Option<String>>>,
}

/// The log filter without `DSH_LOG`: warnings, but none of the MCP SDK's
/// own lines and only the errors of the ACP SDK. Both repeat what dsh does
/// on purpose and reports itself (an unreachable or refusing MCP server's
/// fatal transport error; the ACP SDK's warning on every error response dsh
/// sends, such as the answer to an unknown session), so they would only be
/// noise on the stderr of a `--quiet` child, which its parent quotes in
/// diagnostics. `DSH_LOG=warn` shows them again (`rmcp=debug` for more).
const DEFAULT_LOG: &str = "warn,rmcp=off,agent_client_protocol=error";

/// Where rmcp logs each new HTTP session's id at `info`, and names the
/// session's span by it. Whoever reads a session id can use the session, so
/// this stays at `warn` unless `DSH_LOG` names it (or a module in it)
/// itself.
const RMCP_SESSIONS: &str = "rmcp::transport::streamable_http_server::session";

/// The log filter: `DSH_LOG` (else [`DEFAULT_LOG`]), with [`RMCP_SESSIONS`]
/// at `warn` unless it is named there.
fn log_filter(requested: Option<&str>) -> EnvFilter {
    let (text, filter) = match requested.map(|text| (text, EnvFilter::try_new(text))) {
        Some((text, Ok(filter))) => (text, filter),
        _ => (DEFAULT_LOG, EnvFilter::new(DEFAULT_LOG)),
    };
    match format!("{RMCP_SESSIONS}=warn").parse() {
        Ok(directive) if !text.contains(RMCP_SESSIONS) => filter.add_directive(directive),
        _ => filter,
    }
}

/// Installs the process's subscriber: log lines on stderr (`DSH_LOG`,
/// default [`DEFAULT_LOG`], see [`log_filter`]), plus OTLP export of spans
/// when the environment asks for it.
pub(crate) fn init() -> Telemetry {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a parent that reads our
        // stderr (an ACP client quoting its tail) gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(log_filter(std::env::var("DSH_LOG").ok().as_deref()));
    let mut warning = None;
    let export = if export_requested(|key| std::env::var(key).ok()) {
        match exporter() {
            Ok(export) => Some(export),
            Err(error) => {
                warning = Some(wording::otlp_setup_failed(&error));
                None
            }
        }
    } else {
        None
    };
    let otel = export.as_ref().map(|export| {
        tracing_opentelemetry::layer()
            .with_tracer(export.provider.tracer("dsh"))
            .with_filter(EnvFilter::new(EXPORTED))
    });
    let _ = tracing_subscriber::registry().with(logs).with(otel).try_init();
    if export.is_some() {
        dsh_subagent_api::trace::set_propagator(Box::new(W3cPropagator));
    }
    if let Some(warning) = warning {
        eprintln!("{warning}");
    }
    Telemetry { export }
}

fn exporter() -> Result<Export, String> {
    // Our HTTP stack (reqwest, rustls), blocking: the batch processor exports
    // from its own thread.
    let client = reqwest::blocking::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|error| error.to_string())?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(client)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|error| error.to_string())?;
    let failure = Arc::new(Mutex::new(None));
    let exporter = Recording {
        inner: exporter,
        failure: failure.clone(),
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name("dsh");
    }
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(exporter)
        .build();
    Ok(Export { provider, failure })
}

impl Telemetry {
    /// Exports what is left, within [`EXPORT_TIMEOUT`]; a failed export (now
    /// or earlier) prints one warning line.
    pub(crate) fn shutdown(self) {
        let Some(export) = self.export else { return };
        let flushed = export.provider.shutdown_with_timeout(EXPORT_TIMEOUT);
        let failure = export.failure.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(failure) = failure.or_else(|| flushed.err().map(|error| error.to_string())) {
            eprintln!("{}", wording::otlp_export_failed(&failure));
        }
    }
}

/// The OTLP exporter: gives each span the convention types `tracing` cannot
/// carry ([`conventions`]), and remembers its first failure for the warning
/// at exit.
#[derive(Debug)]
struct Recording<E> {
    inner: E,
    failure: Arc<Mutex<Option<String>>>,
}

impl<E: SpanExporter> SpanExporter for Recording<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let batch = batch.into_iter().map(conventions::typed).collect();
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| error.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

/// W3C trace context (`traceparent`, `tracestate`) to and from spans, for
/// ACP children and for `dsh acp` continuing its client's trace.
struct W3cPropagator;

impl TracePropagator for W3cPropagator {
    fn inject(&self, span: &Span) -> Vec<(String, String)> {
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return Vec::new();
        }
        let mut fields = HashMap::new();
        TraceContextPropagator::new().inject_context(&context, &mut fields);
        let mut fields: Vec<(String, String)> = fields.into_iter().filter(|(_, value)| !value.is_empty()).collect();
        fields.sort();
        fields
    }

    fn extract(&self, fields: &dyn Fn(&str) -> Option<String>, span: &Span) {
        let carrier: HashMap<String, String> = ["traceparent", "tracestate"]
            .into_iter()
            .filter_map(|key| Some((key.to_owned(), fields(key)?)))
            .collect();
        let context = TraceContextPropagator::new().extract(&carrier);
        if context.span().span_context().is_valid() {
            let _ = span.set_parent(context);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |key| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    #[test]
    fn export_is_on_only_with_an_endpoint() {
        assert!(!export_requested(env(&[])));
        assert!(!export_requested(env(&[("OTEL_SERVICE_NAME", "x")])));
        assert!(!export_requested(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(export_requested(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(export_requested(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://h/v1/traces"
        )])));
        assert!(!export_requested(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ])));
    }
}
