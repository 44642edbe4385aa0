//! MCP tools reach children through the shared registry, and each subagent
//! tool's `toolFilter` decides which child sees them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime};
use dsh_llm::ScriptedModel;
use dsh_mcp::{ClientOptions, McpMount, McpServerSpec};
use dsh_subagent::SubagentService;
use dsh_subagent_api::ToolFilter;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{CancellationToken, ToolExecution, ToolRegistry};
use serde_json::json;

/// The test MCP server, built by `dsh-test-programs`.
fn server() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        dsh_test_programs::Program::McpTestServer
            .path()
            .into_os_string()
            .into_string()
            .unwrap()
    })
}

/// A child calls `mcp__t__echo` when it is offered, else says it is not.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"last_message": "user", "tool_offered": "mcp__t__echo"},
   "reply": {"tool_calls": [{"name": "mcp__t__echo", "arguments": {"text": "through the filter"}}]}},
  {"when": {"last_tool": "mcp__t__echo"}, "reply": {"text": "child used it: {{last_tool_result}}"}},
  {"when": {"tool_not_offered": "mcp__t__echo"}, "reply": {"text": "no echo tool here"}}
]}"#;

fn filter(value: serde_json::Value) -> ToolFilter {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_subagent_tools_filter_decides_whether_its_child_sees_an_mcp_tool() {
    let tools = ToolRegistry::new();
    let spec = McpServerSpec::new("t", server(), Vec::<String>::new()).unwrap();
    let mount = McpMount::start(&spec, &tools, &ClientOptions::default()).await.unwrap();
    let service = SubagentService::new();
    let _spawn = service.register_provider(Arc::new(SpawnProvider::new())).unwrap();
    let _allowing = SubagentToolPlugin::apply(
        SubagentToolConfig::new("spawn")
            .tool_name("subagent_with_echo")
            .tool_filter(filter(json!({"allow": ["mcp__t__echo"]}))),
        &service,
        &tools,
    )
    .unwrap();
    let _denying = SubagentToolPlugin::apply(
        SubagentToolConfig::new("spawn")
            .tool_name("subagent_without_echo")
            .tool_filter(filter(json!({"deny": ["mcp__t__echo", "mcp__t__slow"]}))),
        &service,
        &tools,
    )
    .unwrap();
    let model = ScriptedModel::from_json_str(SCRIPT).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), tools.clone()));
    let parent = Agent::builder(runtime).build().unwrap();
    let exec = ToolExecution::new(CancellationToken::new()).with_agent(parent.agent_ref());

    let allowed = tools
        .call(
            "subagent_with_echo",
            json!({"description": "echo", "prompt": "go"}),
            exec.clone(),
        )
        .await;
    assert_eq!(allowed.text, "child used it: echo: through the filter");
    let denied = tools
        .call(
            "subagent_without_echo",
            json!({"description": "echo", "prompt": "go"}),
            exec.clone(),
        )
        .await;
    assert_eq!(denied.text, "no echo tool here");
    // A filter names MCP tools by their mounted name; an unknown one is refused.
    let _typo = SubagentToolPlugin::apply(
        SubagentToolConfig::new("spawn")
            .tool_name("subagent_typo")
            .tool_filter(filter(json!({"allow": ["echo"]}))),
        &service,
        &tools,
    )
    .unwrap();
    let typo = tools
        .call("subagent_typo", json!({"description": "echo", "prompt": "go"}), exec)
        .await;
    assert!(typo.is_error);
    assert!(
        typo.text
            .starts_with("Error: subagent toolFilter names unknown tool \"echo\""),
        "{}",
        typo.text
    );
    mount.release().await.unwrap();
}
