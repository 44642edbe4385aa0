//! The subagent service: registry, events, checked starts, lifecycle (docs/contract.md, "The service").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use dsh_subagent::{SubagentEvent, SubagentService};
use dsh_subagent_api::{
    AgentOptions, AgentRef, CancellationToken, Capabilities, DepthLimit, StartRequest, StopReason, SubagentError,
    ToolFilter,
};
use dsh_subagent_testing::scripted::ScriptedProvider;
use serde_json::json;

fn request(parent: &str) -> StartRequest {
    StartRequest::text("task", AgentRef::new(parent), CancellationToken::new())
}

/// Records every event's name (and provider or run detail) in order.
fn recorder(service: &SubagentService) -> (Arc<Mutex<Vec<String>>>, dsh_subagent::Subscription) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        let line = match event {
            SubagentEvent::ProviderAdded(p) => format!("added {}", p.name()),
            SubagentEvent::ProviderRemoved(name) => format!("removed {name}"),
            SubagentEvent::RunStarted(info) => format!("start {} {} {}", info.run_id, info.provider, info.id),
            SubagentEvent::RunEnded(end) => format!(
                "end {} {} {:?}",
                end.run.run_id, end.stop_reason, end.last_assistant_message
            ),
            other => format!("{other:?}"),
        };
        sink.lock().unwrap().push(line);
        Ok(())
    }));
    (log, subscription)
}

#[tokio::test]
async fn registers_lists_gets_starts_and_removes_providers_with_one_event_each() {
    let service = SubagentService::new();
    let (log, _sub) = recorder(&service);
    let spawn = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let fork = service
        .register_provider(ScriptedProvider::builder("fork").build())
        .unwrap();
    assert_eq!(service.list(), ["spawn", "fork"]);
    assert_eq!(service.provider("fork").unwrap().name(), "fork");

    let mut run = service.start("spawn", request("p")).await.unwrap();
    assert_eq!(run.result().await.unwrap().text(), "scripted subagent reply");
    run.dispose().await.unwrap();

    drop(spawn);
    assert_eq!(service.list(), ["fork"]);
    assert!(service.provider("spawn").is_none());
    fork.dispose();
    let log = log.lock().unwrap().clone();
    // The run-ended event heard the answer the caller then read whole.
    assert!(
        log.iter()
            .any(|line| line.starts_with("end ") && line.ends_with("Some(\"scripted subagent reply\")")),
        "{log:?}"
    );
    let provider_events: Vec<_> = log
        .iter()
        .filter(|l| l.starts_with("added") || l.starts_with("removed"))
        .collect();
    assert_eq!(
        provider_events,
        ["added spawn", "added fork", "removed spawn", "removed fork"]
    );
}

#[tokio::test]
async fn a_failing_added_listener_rolls_the_registration_back_and_surfaces_its_error() {
    let service = SubagentService::new();
    let (log, _sub) = recorder(&service);
    let _refuser = service.subscribe(Arc::new(|event: &SubagentEvent| match event {
        SubagentEvent::ProviderAdded(_) => Err(SubagentError::failed("listener refused")),
        _ => Ok(()),
    }));
    let error = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap_err();
    assert_eq!(error.to_string(), "listener refused");
    assert!(service.list().is_empty());
    // Listeners that already accepted hear the rollback.
    assert_eq!(*log.lock().unwrap(), ["added spawn", "removed spawn"]);
    // The name is free again.
    drop(_refuser);
    assert!(
        service
            .register_provider(ScriptedProvider::builder("spawn").build())
            .is_ok()
    );
}

#[tokio::test]
async fn a_panicking_added_listener_rolls_back_too() {
    let service = SubagentService::new();
    let _panicker = service.subscribe(Arc::new(|_: &SubagentEvent| panic!("boom")));
    let error = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap_err();
    assert_eq!(error.to_string(), "subagent/provider-added listener panicked: boom");
    assert!(service.list().is_empty());
}

#[tokio::test]
async fn duplicate_and_unknown_providers_have_stable_codes() {
    let service = SubagentService::new();
    let _spawn = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let duplicate = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap_err();
    assert_eq!(duplicate.code(), "DUPLICATE_PROVIDER");
    let unknown = service.start("nope", request("p")).await.unwrap_err();
    assert_eq!(unknown.code(), "NO_PROVIDER");
    insta::assert_snapshot!(format!("{duplicate}\n{unknown}"), @r#"
    a subagent provider named "spawn" is already registered
    no subagent provider registered for "nope"
    "#);
}

#[tokio::test]
async fn each_unsupported_capability_rejects_before_the_provider_starts() {
    let service = SubagentService::new();
    let provider = ScriptedProvider::builder("acp")
        .capabilities(Capabilities::NONE)
        .build();
    let _reg = service.register_provider(provider.clone()).unwrap();
    let mut messages = Vec::new();
    type SetField = fn(&mut StartRequest);
    let cases: [(&str, SetField); 4] = [
        ("outputSchema", |r| {
            r.settings_mut().output_schema = Some(json!({"type": "object"}))
        }),
        ("depthLimit", |r| {
            r.settings_mut().max_depth = Some(DepthLimit::levels(3))
        }),
        ("toolFilter", |r| {
            r.settings_mut().tool_filter = Some(ToolFilter::denying(vec!["subagent"]))
        }),
        ("persona", |r| {
            r.settings_mut().persona = Some("You are the child.".into())
        }),
    ];
    for (capability, set) in cases {
        let mut req = request("p");
        set(&mut req);
        let error = service.start("acp", req).await.unwrap_err();
        assert_eq!(error.code(), "UNSUPPORTED_CAPABILITY", "{capability}");
        assert!(error.to_string().contains(capability));
        messages.push(error.to_string());
    }
    assert_eq!(provider.stats().starts(), 0);
    insta::assert_snapshot!(messages.join("\n"), @r#"
    subagent provider "acp" does not support the "outputSchema" capability
    subagent provider "acp" does not support the "depthLimit" capability
    subagent provider "acp" does not support the "toolFilter" capability
    subagent provider "acp" does not support the "persona" capability
    "#);
}

#[tokio::test]
async fn capabilities_are_checked_in_contract_order() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(
            ScriptedProvider::builder("acp")
                .capabilities(Capabilities::NONE)
                .build(),
        )
        .unwrap();
    let mut req = request("p");
    req.settings_mut().persona = Some("x".into());
    req.settings_mut().tool_filter = Some(ToolFilter::default());
    req.settings_mut().max_depth = Some(DepthLimit::levels(1));
    let error = service.start("acp", req).await.unwrap_err();
    assert!(error.to_string().contains("\"depthLimit\""), "{error}");
}

#[tokio::test]
async fn invalid_max_depth_and_schema_reject_before_provider_start() {
    let service = SubagentService::new();
    let provider = ScriptedProvider::builder("spawn").build();
    let _reg = service.register_provider(provider.clone()).unwrap();
    // A cap past the safe range cannot be made, so no request carries one.
    let error = DepthLimit::new(1 << 53).unwrap_err();
    assert_eq!(
        error.to_string(),
        "subagent maxDepth must be a non-negative safe integer"
    );
    let mut bad_schema = request("p");
    bad_schema.settings_mut().output_schema = Some(json!({"type": "string"}));
    let error = service.start("spawn", bad_schema).await.unwrap_err();
    assert_eq!(error.code(), "INVALID_OUTPUT_SCHEMA");
    assert_eq!(provider.stats().starts(), 0);
}

#[tokio::test]
async fn the_depth_cap_is_checked_against_the_callers_current_depth() {
    let service = SubagentService::new();
    let provider = ScriptedProvider::builder("spawn").build();
    let _reg = service.register_provider(provider.clone()).unwrap();
    let mut deep = StartRequest::text("t", AgentRef::new("p").with_depth(3), CancellationToken::new());
    deep.settings_mut().max_depth = Some(DepthLimit::levels(3));
    let error = service.start("spawn", deep).await.unwrap_err();
    assert_eq!(error.to_string(), "subagent depth 4 exceeds maxDepth 3");
    assert_eq!(error.code(), "DEPTH_EXCEEDED");
    let mut zero = request("p");
    zero.settings_mut().max_depth = Some(DepthLimit::levels(0));
    assert_eq!(
        service.start("spawn", zero).await.unwrap_err().to_string(),
        "subagent depth 1 exceeds maxDepth 0"
    );
    let mut fine = StartRequest::text("t", AgentRef::new("p").with_depth(2), CancellationToken::new());
    fine.settings_mut().max_depth = Some(DepthLimit::levels(3));
    assert!(service.start("spawn", fine).await.is_ok());
    assert_eq!(provider.stats().starts(), 1);
}

#[tokio::test]
async fn a_rejected_start_emits_no_lifecycle_events() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(
            ScriptedProvider::builder("spawn")
                .on_start(dsh_subagent_testing::scripted::StartBehavior::Fail(
                    "setup failed".into(),
                ))
                .build(),
        )
        .unwrap();
    let (log, _sub) = recorder(&service);
    let error = service.start("spawn", request("p")).await.unwrap_err();
    assert_eq!(error.to_string(), "setup failed");
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn lifecycle_start_precedes_end_with_the_same_run_id_and_ids_are_distinct() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(ScriptedProvider::builder("spawn").reply("answer").build())
        .unwrap();
    let (log, _sub) = recorder(&service);
    for _ in 0..2 {
        let mut run = service.start("spawn", request("p")).await.unwrap();
        run.result().await.unwrap();
        run.dispose().await.unwrap();
    }
    assert_eq!(
        *log.lock().unwrap(),
        [
            "start 1 spawn scripted-subagent:spawn:p",
            "end 1 completed Some(\"answer\")",
            "start 2 spawn scripted-subagent:spawn:p",
            "end 2 completed Some(\"answer\")",
        ]
    );
}

#[tokio::test]
async fn a_run_started_event_names_the_parent_the_label_and_the_childs_depth() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _sub = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        if let SubagentEvent::RunStarted(info) = event {
            sink.lock()
                .unwrap()
                .push((info.parent.to_string(), info.label.clone(), info.depth));
        }
        Ok(())
    }));
    for (depth, label) in [(0, None), (2, Some("read the docs"))] {
        let mut request = StartRequest::text("task", AgentRef::new("p").with_depth(depth), CancellationToken::new());
        request.label = label.map(str::to_owned);
        let mut run = service.start("spawn", request).await.unwrap();
        run.result().await.unwrap();
        run.dispose().await.unwrap();
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("p".to_owned(), None, 1),
            ("p".to_owned(), Some("read the docs".to_owned()), 3)
        ]
    );
}

#[tokio::test]
async fn end_events_carry_the_stop_reason_and_omit_empty_output_and_report_rejections_as_error() {
    use dsh_subagent_testing::scripted::ResultBehavior;
    let service = SubagentService::new();
    let _a = service
        .register_provider(
            ScriptedProvider::builder("empty")
                .reply("")
                .stop_reason(StopReason::Refusal)
                .build(),
        )
        .unwrap();
    let _b = service
        .register_provider(
            ScriptedProvider::builder("broken")
                .on_result(ResultBehavior::Fail("transport gone".into()))
                .build(),
        )
        .unwrap();
    let (log, _sub) = recorder(&service);
    let mut run = service.start("empty", request("p")).await.unwrap();
    run.result().await.unwrap();
    let mut run = service.start("broken", request("p")).await.unwrap();
    assert_eq!(run.result().await.unwrap_err().to_string(), "transport gone");
    let log = log.lock().unwrap();
    assert_eq!(log[1], "end 1 refusal None");
    assert_eq!(log[3], "end 2 error None");
}

#[tokio::test]
async fn run_event_listener_failures_are_contained() {
    let service = SubagentService::new();
    let _reg = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let _failing = service.subscribe(Arc::new(|event: &SubagentEvent| match event {
        SubagentEvent::RunStarted(_) => Err(SubagentError::failed("start listener failed")),
        SubagentEvent::RunEnded(_) => panic!("end listener panicked"),
        _ => Ok(()),
    }));
    let mut run = service.start("spawn", request("p")).await.unwrap();
    assert!(run.result().await.unwrap().stop_reason.is_completed());
    run.dispose().await.unwrap();
}

#[tokio::test]
async fn removal_never_revokes_a_returned_run() {
    let service = SubagentService::new();
    let reg = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let mut run = service.start("spawn", request("p")).await.unwrap();
    drop(reg);
    assert!(run.result().await.unwrap().stop_reason.is_completed());
    run.dispose().await.unwrap();
}

#[tokio::test]
async fn the_request_reaches_the_provider_unchanged() {
    let service = SubagentService::new();
    let provider = ScriptedProvider::builder("spawn").build();
    let _reg = service.register_provider(provider.clone()).unwrap();
    let mut req = request("p");
    req.settings_mut().agent_options = Some(AgentOptions::new().with_model("child-model"));
    req.label = Some("d".into());
    service.start("spawn", req).await.unwrap();
    let seen = provider.stats().last_request().unwrap();
    assert_eq!(
        seen.settings().agent_options.clone().unwrap().model.as_deref(),
        Some("child-model")
    );
    assert_eq!(seen.label.as_deref(), Some("d"));
    assert_eq!(seen.settings().persona, None);
    assert_eq!(seen.settings().tool_filter, None);
    assert_eq!(seen.settings().max_depth, None);
}

/// A run started event says what the child was asked (the start of its
/// prompt) and that its caller waits; `cancel_run` cancels that run alone,
/// by its id, until it settles.
#[tokio::test]
async fn an_announced_run_says_its_task_and_is_cancelled_by_its_id_alone() {
    use dsh_subagent::TASK_PREVIEW_CHARS;
    use dsh_subagent_api::RunMode;
    use dsh_subagent_testing::Gate;
    use dsh_subagent_testing::scripted::ResultBehavior;

    let service = SubagentService::new();
    let _reg = service
        .register_provider(
            ScriptedProvider::builder("spawn")
                .on_result(ResultBehavior::Gated(Gate::new()))
                .build(),
        )
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let _sub = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        if let SubagentEvent::RunStarted(info) = event {
            sink.lock().unwrap().push((info.task.clone(), info.mode));
        }
        Ok(())
    }));
    let long = "word ".repeat(100);
    let (one, two) = (CancellationToken::new(), CancellationToken::new());
    let mut first = service
        .start("spawn", StartRequest::text(long, AgentRef::new("p"), one.clone()))
        .await
        .unwrap();
    let second = service
        .start(
            "spawn",
            StartRequest::text("  short  ", AgentRef::new("q"), two.clone()),
        )
        .await
        .unwrap();
    let seen = seen.lock().unwrap().clone();
    let task = seen[0].0.clone().unwrap();
    assert_eq!(task.chars().count(), TASK_PREVIEW_CHARS, "cut, with an ellipsis");
    assert!(task.ends_with('…'), "{task}");
    assert_eq!(seen[1], (Some("short".to_owned()), RunMode::Foreground));

    assert!(!service.cancel_run("nobody"));
    assert!(service.cancel_run(first.id()));
    assert!(one.is_cancelled());
    assert!(!two.is_cancelled(), "another run is not cancelled");
    assert_eq!(first.result().await.unwrap().stop_reason, StopReason::Aborted);
    first.dispose().await.unwrap();
    assert!(!service.cancel_run(first.id()), "settled: no longer found");
    drop(second);
}
