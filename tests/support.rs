//! Shared fixtures for the end-to-end suites: a parent agent with `subagent`
//! (spawn) and `subagent_fork` (fork) mounted, a `lookup` tool for children,
//! and a model wrapper that records every request.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};

use dsh_agent::{Agent, AgentRuntime};
use dsh_llm::{ChatModel, ChatRequest, ChatStream, Message, ScriptedModel};
use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistration, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Wraps a model and records every request it receives.
#[derive(Debug)]
pub struct Recording {
    inner: ScriptedModel,
    pub requests: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Recording {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream_chat(request, cancel)
    }
}

impl Recording {
    /// The requests whose last message is a user message containing `text`.
    pub fn requests_for(&self, text: &str) -> Vec<ChatRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| matches!(r.messages.last(), Some(Message::User { content }) if content.contains(text)))
            .cloned()
            .collect()
    }
}

/// A tool that answers `<key> is swordfish`.
#[derive(Debug)]
pub struct Lookup(Value);

impl Tool for Lookup {
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Look a key up."
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let key = args["key"]
                .as_str()
                .ok_or_else(|| ToolError::new("lookup needs a key"))?;
            Ok(ToolOutput::text(format!("{key} is swordfish")))
        })
    }
}

/// Everything one end-to-end run needs, wired by hand (one suite checks a
/// filter that names an unknown tool at call time, which `dsh-harness`
/// refuses at build).
#[derive(Debug)]
pub struct Harness {
    pub model: Arc<Recording>,
    pub service: SubagentService,
    pub tools: ToolRegistry,
    pub runtime: Arc<AgentRuntime>,
    pub data_dir: tempfile::TempDir,
    _keep: (Vec<ProviderRegistration>, Vec<SubagentToolPlugin>, ToolRegistration),
}

impl Harness {
    /// A harness whose scripted model follows `script`, with `subagent` and
    /// `subagent_fork` configured by `configure` (default: children may not
    /// delegate further).
    pub fn new(script: Value) -> Self {
        let children_do_not_delegate = |config: SubagentToolConfig| {
            config.tool_filter(dsh_subagent_api::ToolFilter::denying(vec!["subagent", "subagent_fork"]))
        };
        Self::with(script, children_do_not_delegate)
    }

    pub fn with(script: Value, configure: impl Fn(SubagentToolConfig) -> SubagentToolConfig) -> Self {
        Self::limited(script, dsh_subagent::Limits::none(), configure)
    }

    /// [`Harness::with`], on a service whose delegation trees have `limits`.
    pub fn limited(
        script: Value,
        limits: dsh_subagent::Limits,
        configure: impl Fn(SubagentToolConfig) -> SubagentToolConfig,
    ) -> Self {
        let model = Arc::new(Recording {
            inner: ScriptedModel::from_json_str(&script.to_string()).unwrap(),
            requests: Mutex::new(Vec::new()),
        });
        let service = SubagentService::with_limits(limits);
        let tools = ToolRegistry::new();
        let lookup = tools
            .register(Arc::new(Lookup(
                json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
            )))
            .unwrap();
        let providers = vec![
            service.register_provider(Arc::new(SpawnProvider::new())).unwrap(),
            service.register_provider(Arc::new(ForkProvider::new())).unwrap(),
        ];
        let plugins = vec![
            SubagentToolPlugin::apply(configure(SubagentToolConfig::new("spawn")), &service, &tools).unwrap(),
            SubagentToolPlugin::apply(
                configure(SubagentToolConfig::new("fork").tool_name("subagent_fork")),
                &service,
                &tools,
            )
            .unwrap(),
        ];
        let data_dir = tempfile::tempdir().unwrap();
        let runtime = Arc::new(AgentRuntime::new(model.clone(), tools.clone()).with_data_dir(data_dir.path()));
        Self {
            model,
            service,
            tools,
            runtime,
            data_dir,
            _keep: (providers, plugins, lookup),
        }
    }

    /// A top-level parent agent.
    pub fn parent(&self) -> Agent {
        Agent::builder(self.runtime.clone())
            .id("parent")
            .system_prompt("You are the parent.")
            .build()
            .unwrap()
    }

    /// The transcripts of every child of `parent`.
    pub fn child_transcripts(&self, parent: &str) -> Vec<dsh_agent::transcript::Transcript> {
        let dir = self.data_dir.path().join("agents");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let transcript = dsh_agent::transcript::read_transcript(&entry.unwrap().path()).unwrap();
            if let Some(dsh_agent::transcript::TranscriptEntry::Header { parent: Some(p), .. }) =
                transcript.entries.first()
                && p.as_str() == parent
            {
                found.push(transcript);
            }
        }
        found
    }
}
