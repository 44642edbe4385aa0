//! Shared fixtures for the `subagent` tool suites.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_testing::scripted::{ScriptedProvider, ScriptedProviderBuilder};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use serde_json::{Value, json};

/// A service, a registry, one scripted provider and one tool instance over it.
pub struct Fixture {
    pub service: SubagentService,
    pub tools: ToolRegistry,
    pub provider: Arc<ScriptedProvider>,
    pub registration: Option<ProviderRegistration>,
    pub plugin: Option<SubagentToolPlugin>,
}

impl Fixture {
    /// Provider `mock` built by `build`, tool `subagent` with default config.
    pub fn new(build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder) -> Self {
        Self::with_config(build, SubagentToolConfig::new("mock"))
    }

    pub fn with_config(
        build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder,
        config: SubagentToolConfig,
    ) -> Self {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let provider = build(ScriptedProvider::builder("mock")).build();
        let registration = service.register_provider(provider.clone()).unwrap();
        let plugin = SubagentToolPlugin::apply(config, &service, &tools).unwrap();
        Self {
            service,
            tools,
            provider,
            registration: Some(registration),
            plugin: Some(plugin),
        }
    }

    /// Calls `subagent` as agent `parent-1` with a fresh token.
    pub async fn call(&self, args: Value) -> ToolResult {
        self.tools.call("subagent", args, exec()).await
    }

    /// Calls `subagent` with a valid task.
    pub async fn delegate(&self) -> ToolResult {
        self.call(task()).await
    }
}

/// The parameter schema of a mounted `subagent` (background off) over a
/// provider whose children inherit the parent's context or not.
pub fn mounted_parameters(inherits: bool) -> Value {
    let fixture = Fixture::new(|b| b.inherits_parent_context(inherits));
    fixture.tools.get("subagent").unwrap().parameters().clone()
}

/// A valid argument object.
pub fn task() -> Value {
    json!({"description": "d", "prompt": "do the thing"})
}

/// An execution context for agent `parent-1`.
pub fn exec() -> ToolExecution {
    exec_with(CancellationToken::new())
}

pub fn exec_with(cancel: CancellationToken) -> ToolExecution {
    dsh_subagent_testing::exec_with("parent-1", cancel)
}

/// Tasks alive on the current runtime.
pub fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}
