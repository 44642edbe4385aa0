//! What every delegation figure runs: a service, a registry and one
//! `subagent` tool over the scripted provider, and the harness's call.

use std::sync::Arc;

use dsh_subagent::{Limits, ProviderRegistration, SubagentService};
use dsh_subagent_api::Lineage;
use dsh_subagent_testing::scripted::{ScriptedProvider, ScriptedProviderBuilder};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use futures::FutureExt as _;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing::instrument::WithSubscriber;

use crate::{PROMPT, REPLY};

/// A service, a registry and one `subagent` tool over a scripted provider.
pub(crate) struct Fixture {
    pub(crate) tools: ToolRegistry,
    pub(crate) provider: Arc<ScriptedProvider>,
    /// The caller's delegation tree, when the service has limits.
    pub(crate) lineage: Lineage,
    pub(crate) service: SubagentService,
    _registration: ProviderRegistration,
    _plugin: SubagentToolPlugin,
}

impl Fixture {
    pub(crate) fn new(build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder) -> Result<Self, String> {
        Self::limited(Limits::none(), build)
    }

    /// A fixture whose service bounds its trees by `limits`; the caller is
    /// the top-level agent of one tree.
    pub(crate) fn limited(
        limits: Limits,
        build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder,
    ) -> Result<Self, String> {
        let service = SubagentService::with_limits(limits);
        let tools = ToolRegistry::new();
        let provider = build(ScriptedProvider::builder("bench").reply(REPLY).record_requests(false)).build();
        let registration = service
            .register_provider(provider.clone())
            .map_err(|error| error.to_string())?;
        let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("bench"), &service, &tools)
            .map_err(|error| error.to_string())?;
        let lineage = if limits.is_none() {
            Lineage::new()
        } else {
            service.open_tree().lineage()
        };
        Ok(Self {
            tools,
            provider,
            lineage,
            service,
            _registration: registration,
            _plugin: plugin,
        })
    }

    pub(crate) fn caller(&self) -> Caller {
        Caller {
            tools: self.tools.clone(),
            args: Arc::new(json!({"description": "bench", "prompt": PROMPT})),
            agent: AgentRef::new("bench-parent").with_lineage(self.lineage.clone()),
            dispatch: None,
        }
    }
}

/// What a harness holds to make one call: the registry, the arguments, the caller.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) tools: ToolRegistry,
    pub(crate) args: Arc<Value>,
    pub(crate) agent: AgentRef,
    /// A subscriber for the calls' tasks; `None`: none installed.
    pub(crate) dispatch: Option<tracing::Dispatch>,
}

impl Caller {
    /// One model tool call, as a harness makes it: arguments, token, caller,
    /// and the call spawned as its own task, answering over a oneshot (the
    /// floor's shape). The registry's call borrows nothing, so the task is
    /// the call itself mapped to the oneshot: no `async` block around it
    /// holding the arguments a second time while the call runs.
    pub(crate) fn spawn(&self, cancel: CancellationToken) -> oneshot::Receiver<ToolResult> {
        let (tx, rx) = oneshot::channel();
        let exec = ToolExecution::new(cancel).with_agent(self.agent.clone());
        let call = || {
            self.tools
                .call(SubagentToolConfig::DEFAULT_TOOL_NAME, Value::clone(&self.args), exec)
                .map(move |result| {
                    let _ = tx.send(result);
                })
        };
        match &self.dispatch {
            None => drop(tokio::spawn(call())),
            // The call's span is made when the call is, so under the
            // subscriber too, not only while the task runs.
            Some(dispatch) => {
                let call = tracing::dispatcher::with_default(dispatch, call);
                drop(tokio::spawn(call.with_subscriber(dispatch.clone())));
            }
        }
        rx
    }
}

/// Starts `count` delegations, each on its own task answering over a oneshot
/// (the same shape as the floor).
pub(crate) fn spawn_calls(caller: &Caller, count: usize) -> Vec<oneshot::Receiver<ToolResult>> {
    (0..count).map(|_| caller.spawn(CancellationToken::new())).collect()
}

pub(crate) fn check(result: &ToolResult) -> Result<(), String> {
    if result.is_error || result.text != REPLY {
        return Err(format!("a benchmark delegation failed: {}", result.text));
    }
    Ok(())
}
