//! The scripted provider fixture (docs/contract.md, "What the suites pin").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_subagent::SubagentService;
use dsh_subagent_api::{AgentRef, CancellationToken, Capabilities, Capability, ContentBlock, StartRequest, StopReason};
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, START_ABORTED, ScriptedProvider, StartBehavior};
use serde_json::json;

fn request() -> StartRequest {
    StartRequest::text("hi", AgentRef::new("parent-1"), CancellationToken::new())
}

#[tokio::test]
async fn registers_through_the_real_service_and_answers() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(ScriptedProvider::builder("fixture").reply("hello from fixture").build())
        .unwrap();
    assert_eq!(service.list(), ["fixture"]);
    let mut run = service.start("fixture", request()).await.unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.output, [ContentBlock::text("hello from fixture")]);
    assert_eq!(result.structured, None);
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.diagnostic, None);
}

#[tokio::test]
async fn defaults_follow_the_reference_fixture() {
    let provider = ScriptedProvider::builder("mock").build();
    use dsh_subagent_api::SubagentProvider;
    assert_eq!(provider.capabilities(), Capabilities::ALL);
    assert!(!provider.inherits_parent_context());
    let mut run = provider.start(request()).await.unwrap();
    assert_eq!(run.id(), "scripted-subagent:mock:parent-1");
    assert_eq!(run.result().await.unwrap().text(), "scripted subagent reply");
}

#[tokio::test]
async fn returns_the_configured_structured_value_or_the_reply_when_a_schema_is_requested() {
    use dsh_subagent_api::SubagentProvider;
    let mut with_schema = request();
    with_schema.settings_mut().output_schema = Some(json!({"type": "object"}));
    let scripted = ScriptedProvider::builder("a").structured(json!({"answer": 42})).build();
    let mut run = scripted.start(with_schema.clone()).await.unwrap();
    assert_eq!(run.result().await.unwrap().structured, Some(json!({"answer": 42})));
    let plain = ScriptedProvider::builder("b").reply("r").build();
    let mut run = plain.start(with_schema.clone()).await.unwrap();
    assert_eq!(run.result().await.unwrap().structured, Some(json!({"reply": "r"})));
    // No schema requested, or the capability is off: no structured value.
    let mut run = plain.start(request()).await.unwrap();
    assert_eq!(run.result().await.unwrap().structured, None);
    let off = ScriptedProvider::builder("c")
        .capabilities(Capabilities::ALL.without(Capability::OutputSchema))
        .build();
    let mut run = off.start(with_schema).await.unwrap();
    assert_eq!(run.result().await.unwrap().structured, None);
}

#[tokio::test]
async fn honours_the_configured_stop_reason_and_turns_a_later_abort_into_aborted() {
    use dsh_subagent_api::SubagentProvider;
    let refusing = ScriptedProvider::builder("r")
        .stop_reason(StopReason::Refusal)
        .diagnostic("policy")
        .build();
    let mut run = refusing.start(request()).await.unwrap();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Refusal);
    assert_eq!(result.diagnostic.as_deref(), Some("policy"));

    let held = ScriptedProvider::builder("h")
        .on_result(ResultBehavior::UntilCancelled)
        .build();
    let req = request();
    let cancel = req.cancel.clone();
    let mut run = held.start(req).await.unwrap();
    cancel.cancel();
    let result = run.result().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(
        result.text(),
        "scripted subagent reply",
        "partial output survives the cancel"
    );
    assert_eq!(held.stats().cancels_observed(), 1);
}

#[tokio::test]
async fn diagnostics_only_accompany_non_completed_results() {
    use dsh_subagent_api::SubagentProvider;
    let provider = ScriptedProvider::builder("d").diagnostic("unused").build();
    let mut run = provider.start(request()).await.unwrap();
    assert_eq!(run.result().await.unwrap().diagnostic, None);
}

#[tokio::test]
async fn rejects_pre_aborted_and_during_handoff_aborts() {
    use dsh_subagent_api::SubagentProvider;
    let provider = ScriptedProvider::builder("p").build();
    let req = request();
    req.cancel.cancel();
    let error = provider.start(req).await.unwrap_err();
    assert_eq!(error.to_string(), START_ABORTED);
    assert_eq!(error.code(), "ABORTED");

    let gate = Gate::new();
    let gated = ScriptedProvider::builder("g")
        .on_start(StartBehavior::Gated(gate.clone()))
        .build();
    let req = request();
    let cancel = req.cancel.clone();
    let pending = tokio::spawn({
        let gated = gated.clone();
        async move { gated.start(req).await.map(|run| run.id().to_owned()) }
    });
    gate.arrived(1).await;
    cancel.cancel();
    assert_eq!(pending.await.unwrap().unwrap_err().to_string(), START_ABORTED);
    assert_eq!(gated.stats().published(), 0);
}

#[tokio::test]
async fn unregisters_with_its_registration() {
    let service = SubagentService::new();
    let registration = service
        .register_provider(ScriptedProvider::builder("fixture").build())
        .unwrap();
    registration.dispose();
    assert!(service.list().is_empty());
}

/// A settlement is part of every delegation in flight: while the child runs
/// it holds the run, the caller's token and the two waits (the result, in
/// place; the cancellation), and no room for what comes after.
#[tokio::test]
async fn a_settlement_in_flight_holds_the_run_and_its_two_waits() {
    use dsh_subagent_api::SubagentProvider;
    let provider = ScriptedProvider::builder("fixture").build();
    let request = request();
    let cancel = request.cancel.clone();
    let run = provider.start(request).await.unwrap();
    assert!(
        std::mem::size_of_val(&run) <= 72,
        "a run handle is {} B",
        std::mem::size_of_val(&run)
    );
    let settling = dsh_subagent::settle(run, &cancel);
    let size = std::mem::size_of_val(&settling);
    assert!(size <= 224, "a settlement is {size} B");
    let settled = settling.await;
    assert_eq!(settled.disposed, Ok(()));
    assert_eq!(settled.result.unwrap().stop_reason, StopReason::Completed);
}
