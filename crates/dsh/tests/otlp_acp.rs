//! One trace across processes: a parent in this process delegates through
//! the `acp` provider to a real `dsh acp`, and both export to one receiver.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_llm::ScriptedModel;
use dsh_subagent_acp::AcpConfig;
use dsh_subagent_api::CancellationToken;
use dsh_subagent_api::trace::TracePropagator;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use support::otlp::{Receiver, Span, Typed};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// What `dsh` installs, for this test process: W3C context off a span.
struct W3c;

impl TracePropagator for W3c {
    fn inject(&self, span: &tracing::Span) -> Vec<(String, String)> {
        let mut fields = HashMap::new();
        TraceContextPropagator::new().inject_context(&span.context(), &mut fields);
        fields.into_iter().collect()
    }

    fn extract(&self, fields: &dyn Fn(&str) -> Option<String>, span: &tracing::Span) {
        let carrier: HashMap<String, String> = fields("traceparent")
            .map(|value| ("traceparent".to_owned(), value))
            .into_iter()
            .collect();
        let context = TraceContextPropagator::new().extract(&carrier);
        if context.span().span_context().is_valid() {
            let _ = span.set_parent(context);
        }
    }
}

fn exporting_to(receiver: &Receiver) -> SdkTracerProvider {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(format!("{}/v1/traces", receiver.endpoint))
        .build()
        .unwrap();
    SdkTracerProvider::builder()
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("acp-parent")
                .build(),
        )
        .with_batch_exporter(exporter)
        .build()
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn an_acp_child_continues_the_parents_trace() {
    let receiver = Receiver::start();
    let provider = exporting_to(&receiver);
    // The GenAI spans only, as `dsh` exports them.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("test"))
        .with_filter(tracing_subscriber::EnvFilter::new("dsh::gen_ai=info"));
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    assert!(dsh_subagent_api::trace::set_propagator(Box::new(W3c)));

    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(async {
        let config = AcpConfig::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["acp", "--quiet"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.clone())
            .cwd(dir.path())
            .startup_timeout(Duration::from_secs(30));
        let mount = common::mount_subagent_acp(config);
        let tools = mount.tools.clone();
        let model = ScriptedModel::from_json_str(common::PARENT_DELEGATING_TO_SUBAGENT_ACP).unwrap();
        let parent = Agent::builder(Arc::new(AgentRuntime::new(Arc::new(model), tools)))
            .label(Some("acp parent".to_owned()))
            .build()
            .unwrap();
        parent.run("Summarize the README.", &CancellationToken::new()).await
    });
    // The child has exited (and flushed) once the delegation returned.
    drop(runtime);
    provider.shutdown().unwrap();
    assert_eq!(outcome.stop, AgentStop::Completed, "{}", outcome.text);

    let spans = receiver.wait_for(|spans| spans.iter().any(|span| span.name == "invoke_agent dsh acp"));
    let by_name = |name: &str| -> &Span {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("{name} in {:#?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>()))
    };
    let parent = by_name("invoke_agent acp parent");
    let tool = by_name("execute_tool subagent_acp");
    let remote = by_name("invoke_agent dsh acp");
    assert_eq!(parent.service, "acp-parent");
    assert_eq!(remote.service, "dsh");
    // One trace: the child's run hangs under the parent's execute_tool span.
    assert!(
        spans.iter().all(|span| span.trace_id == parent.trace_id),
        "{:#?}",
        spans
            .iter()
            .map(|s| (&s.name, &s.service, &s.trace_id, &s.span_id, &s.parent))
            .collect::<Vec<_>>()
    );
    assert_eq!(tool.parent, parent.span_id);
    assert_eq!(remote.parent, tool.span_id);
    // The child's own delegation and model calls are in it too.
    let grandchild = by_name("execute_tool subagent");
    assert_eq!(grandchild.parent, remote.span_id);
    assert!(
        spans
            .iter()
            .any(|span| span.name == "chat scripted" && span.service == "dsh")
    );

    // Typed as the conventions say. `dsh acp` exports through dsh's own
    // exporter: finish reasons a string array, token counts ints.
    for chat in spans
        .iter()
        .filter(|span| span.name == "chat scripted" && span.service == "dsh")
    {
        assert!(
            matches!(&chat.typed["gen_ai.response.finish_reasons"], Typed::Array(reasons) if reasons.len() == 1),
            "{chat:#?}"
        );
        for key in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
            assert!(
                matches!(chat.typed[key], Typed::Int(count) if count > 0),
                "{key} on {chat:#?}"
            );
        }
    }
    // This process exports through a plain `tracing-opentelemetry` layer, as
    // a harness under its own subscriber would: counts are ints there too,
    // and the one finish reason is its string.
    let own = spans
        .iter()
        .find(|span| span.name == "chat scripted" && span.service == "acp-parent")
        .unwrap();
    assert_eq!(
        own.typed["gen_ai.response.finish_reasons"],
        Typed::String("tool_calls".into())
    );
    assert!(matches!(own.typed["gen_ai.usage.input_tokens"], Typed::Int(count) if count > 0));
}
