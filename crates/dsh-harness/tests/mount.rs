//! What a built harness mounts for each background setting, and that it
//! unmounts everything when dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_harness::{Background, HarnessBuilder, SubagentToolConfig, ToolRegistry};
use dsh_subagent_testing::{MemoryChildStore, ScriptedProvider, exec};
use dsh_tool_subagent::wording;
use serde_json::json;

fn spawn() -> Arc<ScriptedProvider> {
    ScriptedProvider::builder("spawn").reply("done").build()
}

fn has_background(tools: &ToolRegistry, name: &str) -> bool {
    tools.get(name).unwrap().parameters()["properties"]
        .get("run_in_background")
        .is_some()
}

#[test]
fn off_mounts_the_subagent_tools_alone() {
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn"), spawn())
        .build()
        .unwrap();
    assert_eq!(harness.tools().names(), ["subagent"]);
    assert!(!has_background(harness.tools(), "subagent"));
    assert!(harness.control().is_none());
}

#[test]
fn tasks_add_the_task_tools_and_the_one_shot_route() {
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn").enable_run_in_background(true), spawn())
        .background(Background::Tasks)
        .build()
        .unwrap();
    assert_eq!(
        harness.tools().names(),
        ["subagent", "task_kill", "task_list", "task_output"]
    );
    let tool = harness.tools().get("subagent").unwrap();
    assert!(tool.description().ends_with(wording::ONE_SHOT_SUFFIX));
    assert!(harness.control().is_none());
}

#[test]
fn continuable_adds_send_message_and_the_control_service() {
    let provider = spawn();
    let harness = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("spawn").enable_run_in_background(true),
            provider.clone(),
        )
        .subagent(SubagentToolConfig::new("spawn").tool_name("subagent_now"), provider)
        .background(Background::Continuable(Arc::new(MemoryChildStore::new())))
        .build()
        .unwrap();
    assert_eq!(
        harness.tools().names(),
        [
            "send_message",
            "subagent",
            "subagent_now",
            "task_kill",
            "task_list",
            "task_output"
        ]
    );
    // A shared provider is registered once; the foreground tool stays so.
    assert_eq!(harness.service().list(), ["spawn"]);
    assert!(has_background(harness.tools(), "subagent"));
    assert!(!has_background(harness.tools(), "subagent_now"));
    assert!(harness.control().is_some());
}

#[test]
fn a_provider_without_a_tool_is_registered_too() {
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn"), spawn())
        .provider(ScriptedProvider::builder("fork").build())
        .build()
        .unwrap();
    assert_eq!(harness.service().list(), ["spawn", "fork"]);
    assert_eq!(harness.tools().names(), ["subagent"]);
}

/// Everything stays mounted while the harness lives, and leaves with it.
#[tokio::test]
async fn dropping_the_harness_unmounts_everything() {
    let provider = spawn();
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("spawn"), provider.clone())
        .background(Background::Continuable(Arc::new(MemoryChildStore::new())))
        .build()
        .unwrap();
    let (tools, service) = (harness.tools().clone(), harness.service().clone());
    let result = tools
        .call("subagent", json!({"description": "d", "prompt": "p"}), exec("parent"))
        .await;
    assert_eq!(result.text, "done");
    let debug = format!("{harness:?}");
    assert!(debug.contains("SubagentToolPlugin"), "{debug}");
    harness.dispose();
    assert!(tools.names().is_empty());
    assert!(service.list().is_empty());
    assert_eq!(Arc::strong_count(&provider), 1);
}

#[tokio::test]
async fn a_harness_result_limit_bounds_every_tool_that_sets_none_of_its_own() {
    let long = |name: &str| ScriptedProvider::builder(name).reply("l".repeat(5_000)).build();
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("wide"), long("wide"))
        .subagent(
            SubagentToolConfig::new("own")
                .tool_name("subagent_own")
                .result_limit(dsh_harness::ResultLimit::new(2_000).unwrap()),
            long("own"),
        )
        .background(Background::Tasks)
        .result_limit(dsh_harness::ResultLimit::MIN)
        .build()
        .unwrap();
    let call = |tool: &'static str| {
        harness
            .tools()
            .call(tool, json!({"description": "long", "prompt": "p"}), exec("parent"))
    };
    // The harness's budget: 256 tokens, 1,024 bytes.
    let cut = call("subagent").await;
    assert!(cut.text.len() <= 1_024 && cut.cut.is_some(), "{}", cut.text.len());
    // The tool's own: 2,000 tokens, 8,000 bytes, so its 5,000 bytes are whole.
    let whole = call("subagent_own").await;
    assert_eq!(whole.text, "l".repeat(5_000));
    // task_output pages within the harness's budget too.
    let page = harness
        .tools()
        .call(
            "task_output",
            json!({"task_id": "subagent-1", "offset": 0}),
            exec("parent"),
        )
        .await;
    assert!(page.text.len() <= 1_024, "{}", page.text.len());
    assert!(page.text.starts_with("lll"));
}
