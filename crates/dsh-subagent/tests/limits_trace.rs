//! Bounded delegation in traces: a wait is a `subagent.queued` event, then
//! `subagent.admitted` with the wait in ms; a refusal is `subagent.refused`
//! with the limit as `error.type`. A binary of its own: it installs the
//! global subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use dsh_subagent::{Limits, SubagentService, settle};
use dsh_subagent_api::{AgentRef, CancellationToken, ChildCount, QueueLimit, StartRequest};
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, ScriptedProvider};

/// Everything the subscriber writes, one event per line.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn waits_and_refusals_are_span_events_with_the_wait_and_the_limit() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();

    let gate = Gate::new();
    let service = SubagentService::with_limits(
        Limits::none()
            .with_max_concurrent(ChildCount::MIN)
            .with_max_queued(QueueLimit::new(1)),
    );
    let provider = ScriptedProvider::builder("spawn")
        .on_result(ResultBehavior::Gated(gate.clone()))
        .build();
    let _registration = service.register_provider(provider).unwrap();
    let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    let cancel = CancellationToken::new();
    let request = || StartRequest::text("go", parent.clone(), cancel.clone());

    let first = service.start("spawn", request()).await.unwrap();
    let second = tokio::spawn({
        let service = service.clone();
        let request = request();
        async move { service.start("spawn", request).await }
    });
    while !String::from_utf8_lossy(&captured.0.lock().unwrap()).contains("subagent.queued") {
        tokio::task::yield_now().await;
    }
    let refused = service.start("spawn", request()).await.unwrap_err();
    assert_eq!(refused.code(), "QUEUE_FULL");
    gate.open();
    assert!(settle(first, &cancel).await.result.unwrap().stop_reason.is_completed());
    let second = second.await.unwrap().unwrap();
    assert!(settle(second, &cancel).await.result.unwrap().stop_reason.is_completed());

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = |name: &str| {
        text.lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .to_owned()
    };
    assert!(line("subagent.queued").contains("subagent.queue_ahead=0"), "{text}");
    assert!(line("subagent.admitted").contains("subagent.wait_ms="), "{text}");
    let refusal = line("subagent.refused");
    assert!(
        refusal.contains("error.type=\"max_queued\"") && refusal.contains("subagent.code=\"QUEUE_FULL\""),
        "{refusal}"
    );
}
