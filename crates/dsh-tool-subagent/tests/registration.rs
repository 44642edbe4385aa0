//! The tool follows its provider (docs/contract.md, "Registration") and claims its name
//! at configuration (docs/design.md, "Duplicate tool names").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{exec, task};
use dsh_subagent::SubagentService;
use dsh_subagent_api::Capabilities;
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tool_subagent::{ConfigError, MaxDepth, SubagentToolConfig, SubagentToolPlugin, Wording};
use dsh_tools::ToolRegistry;

fn setup() -> (SubagentService, ToolRegistry) {
    (SubagentService::new(), ToolRegistry::new())
}

#[tokio::test]
async fn a_late_provider_mounts_the_tool_when_it_appears() {
    let (service, tools) = setup();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    assert!(!plugin.is_mounted());
    assert!(tools.get("subagent").is_none());
    let _provider = service
        .register_provider(ScriptedProvider::builder("spawn").reply("late but fine").build())
        .unwrap();
    assert!(plugin.is_mounted());
    assert_eq!(tools.call("subagent", task(), exec()).await.text, "late but fine");
}

#[tokio::test]
async fn removal_unmounts_and_re_registration_re_derives_the_wording() {
    let (service, tools) = setup();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let first = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    assert!(tools.specs()[0].description.contains("does not see this conversation"));
    assert_eq!(plugin.wording(), Some(Wording::Standalone));
    drop(first);
    assert!(
        tools.specs().is_empty(),
        "removing the provider removes the whole schema"
    );
    let _second = service
        .register_provider(ScriptedProvider::builder("spawn").inherits_parent_context(true).build())
        .unwrap();
    assert!(tools.specs()[0].description.contains("INHERITS this conversation"));
    assert_eq!(plugin.wording(), Some(Wording::Inherited));
}

#[tokio::test]
async fn disposing_the_plugin_unmounts_the_tool_while_the_provider_survives() {
    let (service, tools) = setup();
    let _provider = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    assert!(tools.get("subagent").is_some());
    plugin.dispose();
    assert!(tools.get("subagent").is_none());
    assert_eq!(service.list(), ["spawn"]);
    // The name is free again.
    assert!(SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).is_ok());
}

#[tokio::test]
async fn a_plugin_disposed_while_waiting_never_mounts() {
    let (service, tools) = setup();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    plugin.dispose();
    let _provider = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    assert!(tools.specs().is_empty());
}

#[tokio::test]
async fn events_for_other_providers_are_ignored() {
    let (service, tools) = setup();
    let _spawn = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let other = service
        .register_provider(ScriptedProvider::builder("fork").inherits_parent_context(true).build())
        .unwrap();
    drop(other);
    assert!(plugin.is_mounted());
    assert_eq!(plugin.wording(), Some(Wording::Standalone));
    assert!(tools.specs()[0].description.contains("does not see this conversation"));
}

#[tokio::test]
async fn the_waiting_line_is_logged_once_at_info() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .finish();
    let (service, tools) = setup();
    let _plugin = tracing::subscriber::with_default(subscriber, || {
        SubagentToolPlugin::apply(SubagentToolConfig::new("spawn").tool_name("delegate"), &service, &tools).unwrap()
    });
    let logged = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        logged.trim(),
        r#"INFO subagent provider "spawn" not registered yet; the "delegate" tool will register when it appears"#
    );
}

#[tokio::test]
async fn a_duplicate_tool_name_fails_at_configuration_before_any_provider_exists() {
    let (service, tools) = setup();
    let _first = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let second = SubagentToolPlugin::apply(SubagentToolConfig::new("fork"), &service, &tools).unwrap_err();
    assert_eq!(
        second,
        ConfigError::DuplicateToolName {
            name: "subagent".into()
        }
    );
    insta::assert_snapshot!("duplicate_tool_name", second.to_string());
    // The provider that arrives later registers fine: nothing is rolled back.
    let fork = service.register_provider(ScriptedProvider::builder("fork").build());
    assert!(fork.is_ok());
    let spawn = service.register_provider(ScriptedProvider::builder("spawn").build());
    assert!(spawn.is_ok());
    assert_eq!(tools.names(), ["subagent"]);
}

#[tokio::test]
async fn a_numeric_max_depth_over_a_provider_without_depth_limit_fails_at_mount() {
    let (service, tools) = setup();
    let acp = || {
        ScriptedProvider::builder("acp")
            .capabilities(Capabilities::NONE)
            .build()
    };
    let config = SubagentToolConfig::new("acp").max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(3)));

    // Provider present at load: the load fails.
    let registration = service.register_provider(acp()).unwrap();
    let error = SubagentToolPlugin::apply(config.clone(), &service, &tools).unwrap_err();
    assert!(error.to_string().contains("provider-managed"));
    insta::assert_snapshot!("cannot_enforce_max_depth", error.to_string());
    drop(registration);

    // Provider arriving later: its registration fails loudly and is rolled back.
    let _plugin = SubagentToolPlugin::apply(config, &service, &tools).unwrap();
    let error = service.register_provider(acp()).unwrap_err();
    assert_eq!(error.code(), "TOOL_MOUNT_FAILED");
    assert!(error.to_string().contains("cannot enforce maxDepth"));
    assert!(service.list().is_empty());
    assert!(tools.specs().is_empty());
}

#[tokio::test]
async fn a_run_in_flight_survives_the_tool_being_unmounted() {
    use dsh_subagent_testing::Gate;
    use dsh_subagent_testing::scripted::ResultBehavior;
    let (service, tools) = setup();
    let gate = Gate::new();
    let provider = ScriptedProvider::builder("spawn")
        .on_result(ResultBehavior::Gated(gate.clone()))
        .build();
    let registration = service.register_provider(provider.clone()).unwrap();
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let call = tools.call("subagent", task(), exec());
    let churn = async {
        gate.arrived(1).await;
        drop(registration);
        plugin.dispose();
        gate.open();
    };
    let (result, ()) = futures::future::join(call, churn).await;
    assert_eq!(result.text, "scripted subagent reply");
    assert_eq!(provider.stats().disposes(), 1);
}
