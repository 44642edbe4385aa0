//! One delegation end to end: success, every stop reason, release failures,
//! what reaches the provider, argument errors (docs/contract.md, "Execution" and "Results").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, exec, task};
use dsh_subagent_api::{AgentOptions, StopReason, ToolFilter};
use dsh_subagent_testing::scripted::{DisposeBehavior, ResultBehavior, StartBehavior};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::ToolRegistry;
use serde_json::json;

#[tokio::test]
async fn delegates_to_the_configured_provider_and_returns_only_the_childs_reply() {
    let fixture = Fixture::new(|b| b.reply("child says hi"));
    let result = fixture.delegate().await;
    assert_eq!(result.text, "child says hi");
    assert!(!result.is_error);
    let request = fixture.provider.stats().last_request().unwrap();
    assert_eq!(dsh_subagent_api::concat_text(&request.prompt), "do the thing");
    assert_eq!(request.parent.id().as_str(), "parent-1");
    assert_eq!(request.label.as_deref(), Some("d"));
}

#[tokio::test]
async fn dispose_is_called_exactly_once_on_success_and_on_an_error_stop_reason() {
    let ok = Fixture::new(|b| b);
    assert!(!ok.delegate().await.is_error);
    assert_eq!(ok.provider.stats().disposes(), 1);
    assert_eq!(ok.provider.stats().live(), 0);

    let failed = Fixture::new(|b| b.stop_reason(StopReason::Error));
    assert!(failed.delegate().await.is_error);
    assert_eq!(failed.provider.stats().disposes(), 1);
    assert_eq!(failed.provider.stats().live(), 0);
}

#[tokio::test]
async fn every_stop_reason_renders_its_headline_with_partial_output() {
    let mut rendered = Vec::new();
    for (reason, word) in [
        (StopReason::Aborted, "cancelled"),
        (StopReason::Error, "failed"),
        (StopReason::MaxTokens, "token limit"),
        (StopReason::Refusal, "declined"),
        (StopReason::Other("frobnicated".into()), "abnormally"),
    ] {
        let fixture = Fixture::new(|b| b.stop_reason(reason.clone()));
        let result = fixture.delegate().await;
        assert!(result.is_error, "{reason}");
        assert!(result.text.contains(word), "{}", result.text);
        assert!(
            result.text.contains("scripted subagent reply"),
            "partial output is kept"
        );
        rendered.push(result.text);
    }
    insta::assert_snapshot!("stop_reasons_with_partial_output", rendered.join("\n\n"));
}

#[tokio::test]
async fn stop_reason_headlines_alone_without_diagnostic_or_partial_output() {
    let mut rendered = Vec::new();
    for reason in ["aborted", "error", "max-tokens", "refusal", "frobnicated"] {
        let fixture = Fixture::new(|b| b.stop_reason(StopReason::parse(reason)).reply(""));
        rendered.push(fixture.delegate().await.text);
    }
    insta::assert_snapshot!("stop_reason_headlines", rendered.join("\n"));
}

#[tokio::test]
async fn diagnostic_and_partial_output_render_exactly() {
    let fixture = Fixture::new(|b| {
        b.stop_reason(StopReason::Error)
            .diagnostic("Claude Code denied a tool request")
            .reply("partial assistant text")
    });
    let result = fixture.delegate().await;
    assert_eq!(
        result.text,
        "Error: subagent run failed\nDiagnostic: Claude Code denied a tool request\nPartial output before the run ended:\npartial assistant text"
    );
    insta::assert_snapshot!("diagnostic_and_partial", result.text);
    let only_diagnostic = Fixture::new(|b| b.stop_reason(StopReason::Refusal).diagnostic("policy").reply(""));
    insta::assert_snapshot!("diagnostic_only", only_diagnostic.delegate().await.text);
}

#[tokio::test]
async fn result_and_dispose_failing_together_give_one_error_carrying_both() {
    let fixture = Fixture::new(|b| {
        b.on_result(ResultBehavior::Fail("published run failed".into()))
            .on_dispose(DisposeBehavior::Fail("published handle disposal failed".into()))
    });
    let result = fixture.delegate().await;
    assert!(result.is_error);
    assert!(result.text.contains("published run failed"));
    assert!(result.text.contains("published handle disposal failed"));
    assert_eq!(fixture.provider.stats().disposes(), 1);
    insta::assert_snapshot!("run_and_dispose_failed", result.text);
}

#[tokio::test]
async fn a_failed_stop_reason_and_a_failed_release_keep_one_headline() {
    let mut rendered = Vec::new();
    for (diagnostic, partial) in [
        (None, ""),
        (Some("Claude Code denied a tool request"), ""),
        (None, "partial assistant text"),
        (Some("Claude Code denied a tool request"), "partial assistant text"),
    ] {
        let fixture = Fixture::new(|b| {
            let b = b
                .stop_reason(StopReason::Error)
                .reply(partial)
                .on_dispose(DisposeBehavior::Fail("published handle disposal failed".into()));
            match diagnostic {
                Some(diagnostic) => b.diagnostic(diagnostic),
                None => b,
            }
        });
        let result = fixture.delegate().await;
        assert!(result.is_error);
        assert_eq!(result.text.matches("subagent run failed").count(), 1, "{}", result.text);
        assert_eq!(fixture.provider.stats().disposes(), 1);
        rendered.push(result.text);
    }
    assert_eq!(
        rendered[3],
        "Error: subagent run failed\nDiagnostic: Claude Code denied a tool request\nPartial output before the run ended:\npartial assistant text\ndispose failed: published handle disposal failed"
    );
    insta::assert_snapshot!("failed_run_and_dispose_failed", rendered.join("\n---\n"));
}

#[tokio::test]
async fn a_completed_result_with_a_failed_release_is_an_error() {
    let fixture = Fixture::new(|b| b.on_dispose(DisposeBehavior::Fail("published handle disposal failed".into())));
    let result = fixture.delegate().await;
    assert!(result.is_error);
    assert_eq!(result.text, "Error: published handle disposal failed");
    assert_eq!(fixture.provider.stats().disposes(), 1);
}

#[tokio::test]
async fn a_rejected_result_alone_is_reported_as_is() {
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Fail("transport gone".into())));
    assert_eq!(fixture.delegate().await.text, "Error: transport gone");
    assert_eq!(fixture.provider.stats().disposes(), 1);
}

#[tokio::test]
async fn a_failed_start_is_reported_and_nothing_is_released() {
    let fixture = Fixture::new(|b| b.on_start(StartBehavior::Fail("setup failed".into())));
    assert_eq!(fixture.delegate().await.text, "Error: setup failed");
    assert_eq!(fixture.provider.stats().disposes(), 0);
}

#[tokio::test]
async fn panics_in_the_provider_become_errors() {
    let start = Fixture::new(|b| b.on_start(StartBehavior::Panic));
    assert_eq!(
        start.delegate().await.text,
        "Error: subagent provider panicked during start: scripted subagent start panicked"
    );
    let run = Fixture::new(|b| b.on_result(ResultBehavior::Panic));
    assert_eq!(
        run.delegate().await.text,
        "Error: subagent provider panicked during the run: scripted subagent result panicked"
    );
    assert_eq!(run.provider.stats().disposes(), 1);
    let dispose = Fixture::new(|b| b.on_dispose(DisposeBehavior::Panic));
    assert_eq!(
        dispose.delegate().await.text,
        "Error: subagent provider panicked during dispose: scripted subagent dispose panicked"
    );
    // The parent stays usable.
    assert_eq!(dispose.provider.stats().starts(), 1);
    assert!(dispose.delegate().await.is_error);
    assert_eq!(dispose.provider.stats().starts(), 2);
}

#[tokio::test]
async fn a_missing_calling_agent_is_refused_before_the_provider_is_called() {
    let fixture = Fixture::new(|b| b);
    let exec = dsh_tools::ToolExecution::new(dsh_tools::CancellationToken::new());
    let result = fixture.tools.call("subagent", task(), exec).await;
    assert_eq!(
        result.text,
        "Error: subagent tool requires a calling agent (exec.agent was undefined)"
    );
    assert_eq!(fixture.provider.stats().starts(), 0);
    insta::assert_snapshot!("no_calling_agent", result.text);
}

#[tokio::test]
async fn forced_background_on_a_disabled_instance_is_refused_and_a_plain_call_still_works() {
    let fixture = Fixture::new(|b| b);
    let forced = fixture
        .call(json!({"description": "d", "prompt": "p", "run_in_background": true}))
        .await;
    assert!(forced.is_error);
    assert_eq!(
        forced.text,
        "Error: run_in_background is disabled for this tool instance (enableRunInBackground: false)"
    );
    assert_eq!(fixture.provider.stats().starts(), 0);
    let explicit_false = fixture
        .call(json!({"description": "d", "prompt": "p", "run_in_background": false}))
        .await;
    assert!(!explicit_false.is_error);
    assert!(!fixture.delegate().await.is_error);
}

#[tokio::test]
async fn argument_errors_name_the_field() {
    let fixture = Fixture::new(|b| b);
    let cases = [
        json!("do it"),
        json!(null),
        json!([]),
        json!({"prompt": "p"}),
        json!({"description": "d"}),
        json!({"description": 3, "prompt": "p"}),
        json!({"description": "d", "prompt": {"text": "p"}}),
        json!({"description": "d", "prompt": ""}),
        json!({"description": "d", "prompt": "  \n "}),
        json!({"description": "", "prompt": "p"}),
        json!({"description": "d", "prompt": "p", "run_in_background": "yes"}),
    ];
    let mut rendered = Vec::new();
    for args in cases {
        let result = fixture.call(args.clone()).await;
        assert!(result.is_error, "{args}");
        rendered.push(format!("{args} -> {}", result.text));
    }
    assert_eq!(fixture.provider.stats().starts(), 0);
    insta::assert_snapshot!("argument_errors", rendered.join("\n"));
}

#[tokio::test]
async fn undeclared_keys_are_ignored() {
    let fixture = Fixture::new(|b| b);
    let result = fixture
        .call(json!({"description": "d", "prompt": "p", "provider": "other"}))
        .await;
    assert!(!result.is_error);
}

#[tokio::test]
async fn configured_agent_options_persona_filter_and_depth_arrive_unchanged() {
    let config = SubagentToolConfig::new("mock")
        .agent_options(AgentOptions::new().with_model("child-model"))
        .persona("You are the child.")
        .tool_filter(ToolFilter::denying(vec!["subagent"]))
        .max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(2)));
    let fixture = Fixture::with_config(|b| b, config);
    assert!(!fixture.delegate().await.is_error);
    let request = fixture.provider.stats().last_request().unwrap();
    assert_eq!(
        serde_json::to_value(request.settings().agent_options.clone().unwrap()).unwrap(),
        json!({"model": "child-model"})
    );
    assert_eq!(request.settings().persona.as_deref(), Some("You are the child."));
    assert_eq!(
        serde_json::to_value(request.settings().tool_filter.clone().unwrap()).unwrap(),
        json!({"deny": ["subagent"]}),
        "no allow key appears"
    );
    assert_eq!(
        request.settings().max_depth,
        Some(dsh_subagent_api::DepthLimit::levels(2))
    );
}

#[tokio::test]
async fn filter_and_zero_depth_are_forwarded_without_mixing() {
    let config = SubagentToolConfig::from_json(&json!({
        "provider": "mock", "toolFilter": {"deny": ["dangerous"]}, "maxDepth": 0
    }))
    .unwrap();
    let fixture = Fixture::with_config(|b| b, config);
    let result = fixture.delegate().await;
    // The service enforces the cap: depth 1 exceeds 0, before the provider starts.
    assert_eq!(result.text, "Error: subagent depth 1 exceeds maxDepth 0");
    assert_eq!(fixture.provider.stats().starts(), 0);
}

#[tokio::test]
async fn the_depth_cap_is_checked_against_the_callers_depth() {
    let fixture = Fixture::with_config(
        |b| b,
        SubagentToolConfig::new("mock").max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(3))),
    );
    let deep = dsh_tools::ToolExecution::new(dsh_tools::CancellationToken::new())
        .with_agent(dsh_tools::AgentRef::new("deep").with_depth(3));
    let result = fixture.tools.call("subagent", task(), deep).await;
    assert_eq!(result.text, "Error: subagent depth 4 exceeds maxDepth 3");
    // The tool stays registered and usable at shallower depths.
    assert!(!fixture.delegate().await.is_error);
}

#[tokio::test]
async fn defaults_send_no_optional_fields() {
    let fixture = Fixture::new(|b| b);
    fixture.delegate().await;
    let request = fixture.provider.stats().last_request().unwrap();
    assert!(request.settings().agent_options.is_none());
    assert!(request.settings().persona.is_none());
    assert!(request.settings().tool_filter.is_none());
    assert!(request.settings().max_depth.is_none());
    assert!(request.settings().output_schema.is_none());
}

#[tokio::test]
async fn provider_managed_depth_mounts_over_a_capability_less_provider_and_sends_no_cap() {
    let config = SubagentToolConfig::new("mock").max_depth(MaxDepth::ProviderManaged);
    let fixture = Fixture::with_config(|b| b.capabilities(dsh_subagent_api::Capabilities::NONE), config);
    assert!(!fixture.delegate().await.is_error);
    let request = fixture.provider.stats().last_request().unwrap();
    assert!(request.settings().max_depth.is_none());
    assert!(request.settings().tool_filter.is_none());
}

#[tokio::test]
async fn capability_errors_reach_the_model_with_their_text() {
    let config = SubagentToolConfig::new("mock").persona("You are the child.");
    let fixture = Fixture::with_config(|b| b.capabilities(dsh_subagent_api::Capabilities::NONE), config);
    let persona = fixture.delegate().await;
    let config = SubagentToolConfig::new("mock").tool_filter(ToolFilter::allowing(Vec::<String>::new()));
    let fixture = Fixture::with_config(|b| b.capabilities(dsh_subagent_api::Capabilities::NONE), config);
    let filter = fixture.delegate().await;
    assert_eq!(fixture.provider.stats().starts(), 0);
    insta::assert_snapshot!("capability_errors", format!("{}\n{}", persona.text, filter.text));
}

#[tokio::test]
async fn two_instances_over_two_providers_coexist() {
    use dsh_subagent_testing::scripted::ScriptedProvider;
    let service = dsh_subagent::SubagentService::new();
    let tools = ToolRegistry::new();
    let _spawn = service
        .register_provider(ScriptedProvider::builder("spawn").reply("from spawn").build())
        .unwrap();
    let _acp = service
        .register_provider(
            ScriptedProvider::builder("acp")
                .reply("from acp")
                .capabilities(dsh_subagent_api::Capabilities::NONE)
                .build(),
        )
        .unwrap();
    let _a = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let _b = SubagentToolPlugin::apply(
        SubagentToolConfig::new("acp").tool_name("subagent_acp"),
        &service,
        &tools,
    )
    .unwrap();
    assert_eq!(tools.names(), ["subagent", "subagent_acp"]);
    assert_eq!(tools.call("subagent", task(), exec()).await.text, "from spawn");
    assert_eq!(tools.call("subagent_acp", task(), exec()).await.text, "from acp");
}

#[tokio::test]
async fn concurrent_calls_both_reach_start_before_either_completes() {
    use dsh_subagent_testing::Gate;
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_start(StartBehavior::Gated(gate.clone())));
    let both = futures::future::join(fixture.delegate(), fixture.delegate());
    let opener = async {
        gate.arrived(2).await;
        gate.open();
    };
    let ((a, b), ()) = futures::future::join(both, opener).await;
    assert!(!a.is_error && !b.is_error);
    assert_eq!(fixture.provider.stats().disposes(), 2);
}

#[tokio::test]
async fn a_call_run_again_after_an_interruption_names_its_recorded_child_to_the_provider() {
    let fixture = Fixture::new(|b| b);
    let rerun = dsh_subagent_api::Rerun::new(Some(dsh_subagent_api::RecordedChild::in_process("child-7")));
    let result = fixture
        .tools
        .call(
            "subagent",
            task(),
            exec().with_call_id("call-1").with_rerun(rerun.clone()),
        )
        .await;
    assert!(!result.is_error, "{}", result.text);
    let request = fixture.provider.stats().last_request().unwrap();
    assert_eq!(request.provenance().rerun.as_ref(), Some(&rerun));
    assert_eq!(request.provenance().call_id.as_deref(), Some("call-1"));
    // A first call carries none.
    fixture.delegate().await;
    assert_eq!(
        fixture.provider.stats().last_request().unwrap().provenance().rerun,
        None
    );
}
