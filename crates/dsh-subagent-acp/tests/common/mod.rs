//! What the ACP suites share: the fault agent, and `subagent_acp` mounted
//! over an [`AcpProvider`] the way a harness mounts it.
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::Arc;

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_api::{AgentRef, CancellationToken};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{ToolExecution, ToolRegistry, ToolResult};
use serde_json::json;

/// The deliberately faulty ACP agent, built by `dsh-test-programs`.
pub(crate) fn agent() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        dsh_test_programs::Program::AcpFaultAgent
            .path()
            .into_os_string()
            .into_string()
            .unwrap()
    })
}

/// `subagent_acp` over one ACP provider; dropping it unmounts everything.
pub(crate) struct Mounted {
    /// The registry the tool is mounted in.
    pub(crate) tools: ToolRegistry,
    _tool: SubagentToolPlugin,
    _provider: ProviderRegistration,
    _service: SubagentService,
}

impl Mounted {
    /// Mounts `subagent_acp` (provider-managed depth) over `config`.
    pub(crate) fn new(config: AcpConfig) -> Self {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let provider = service
            .register_provider(Arc::new(AcpProvider::new(config).unwrap()))
            .unwrap();
        // A result budget of 128 KB: these suites pin the provider's own
        // bounds (64 KB of answer text), which the default budget of 32 KB
        // would cut first; the budget has suites of its own.
        let tool = SubagentToolPlugin::apply(
            SubagentToolConfig::new("acp")
                .tool_name("subagent_acp")
                .max_depth(MaxDepth::ProviderManaged)
                .result_limit(dsh_tools::ResultLimit::new(32 * 1024).unwrap()),
            &service,
            &tools,
        )
        .unwrap();
        Self {
            tools,
            _tool: tool,
            _provider: provider,
            _service: service,
        }
    }

    /// One `subagent_acp` call for the agent `parent`, on `cancel`.
    pub(crate) async fn call(&self, description: &str, prompt: &str, cancel: CancellationToken) -> ToolResult {
        let exec = ToolExecution::new(cancel).with_agent(AgentRef::new("parent"));
        self.tools
            .call(
                "subagent_acp",
                json!({"description": description, "prompt": prompt}),
                exec,
            )
            .await
    }
}
