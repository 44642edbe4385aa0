//! What `dsh run`, `dsh acp` and `dsh mcp` share: the model, the subagent
//! service with the spawn and fork providers, the delegation tools,
//! `send_message` (with a data directory: background spawn children are
//! continuable), the tools of `--mcp-server`s, and parent agents.

use std::path::Path;
use std::sync::{Arc, PoisonError};

use dsh_agent::store::JsonlChildStore;
use dsh_agent::{Agent, AgentObserver, AgentRuntime};
use dsh_mcp::{ClientOptions, McpMount, McpServerSpec};
use dsh_subagent::{ProviderRegistration, SubagentControl, SubagentService};
use dsh_subagent_api::ToolFilter;
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, ToolRegistry};

use crate::cli::AgentArgs;
use crate::{Failure, model, wording};

/// Children of a dsh parent do their task themselves: they neither see nor
/// call the delegation tools (nor the task tools that collect background
/// ones), and the depth cap backs that up. The parent may run them in the
/// background (nor `send_message`, when it is mounted).
fn child_policy(config: SubagentToolConfig, with_send_message: bool, surface: Surface) -> SubagentToolConfig {
    // A filter may name only tools that exist: `dsh mcp` has no `subagent_fork`.
    let mut deny = vec!["subagent".to_owned()];
    if surface == Surface::Agent {
        deny.push("subagent_fork".to_owned());
    }
    deny.extend(dsh_tool_tasks::TOOL_NAMES.iter().map(|name| (*name).to_owned()));
    if with_send_message {
        deny.extend(
            dsh_tool_subagent_control::TOOL_NAMES
                .iter()
                .map(|name| (*name).to_owned()),
        );
    }
    config
        .max_depth(MaxDepth::Limit(1))
        .enable_run_in_background(true)
        .tool_filter(ToolFilter::denying(deny))
}

/// Which delegation tools the parent gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Surface {
    /// `dsh run` and `dsh acp`: `subagent` (spawn) and `subagent_fork` (fork).
    Agent,
    /// `dsh mcp`: `subagent` (spawn) only. The calling agent is an MCP
    /// session whose conversation lives in the MCP host, not here, so a fork
    /// would inherit nothing while its description promises this conversation.
    McpServer,
}

/// A model, a runtime with `subagent` (spawn) and `subagent_fork` (fork)
/// mounted, the task tools that collect background children, and the
/// registrations that keep them alive.
pub(crate) struct Setup {
    /// The line that names the model.
    pub(crate) banner: String,
    runtime: Arc<AgentRuntime>,
    max_turns: u32,
    tasks: TaskRegistry,
    _service: SubagentService,
    _providers: Vec<ProviderRegistration>,
    _tools: Vec<SubagentToolPlugin>,
    _task_tools: TaskToolsPlugin,
    _control: Option<dsh_tool_subagent_control::SubagentControlPlugin>,
    mcp: std::sync::Mutex<Vec<McpMount>>,
}

impl Setup {
    /// Chooses the model (`--script`, `--base-url`/`DSH_*`, else the embedded
    /// scripted model) and mounts the delegation tools.
    pub(crate) fn new(
        args: &AgentArgs,
        data_dir: Option<&Path>,
        observer: Arc<dyn AgentObserver>,
        surface: Surface,
    ) -> Result<Self, Failure> {
        let choice = model::choose(args, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let tasks = TaskRegistry::new();
        let task_tools =
            TaskToolsPlugin::apply(&tasks, &tools).map_err(|error| Failure::internal(error.to_string()))?;
        let providers = [
            service.register_provider(Arc::new(SpawnProvider::new())),
            service.register_provider(Arc::new(ForkProvider::new())),
        ]
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| Failure::internal(error.to_string()))?;
        // Continuable children live in transcripts: only with a data directory.
        let control = data_dir
            .map(|dir| SubagentControl::new(service.clone(), tasks.clone(), Arc::new(JsonlChildStore::new(dir))));
        let control_tools = control
            .as_ref()
            .map(|control| dsh_tool_subagent_control::SubagentControlPlugin::apply(control, &tools))
            .transpose()
            .map_err(|error| Failure::internal(error.to_string()))?;
        let mut configs = vec![SubagentToolConfig::new("spawn")];
        if surface == Surface::Agent {
            configs.push(SubagentToolConfig::new("fork").tool_name("subagent_fork"));
        }
        let mounted = configs
            .into_iter()
            .map(|config| match &control {
                Some(control) => SubagentToolPlugin::apply_with_control(
                    child_policy(config, true, surface),
                    &service,
                    &tools,
                    control,
                ),
                None => {
                    // Without transcripts no child can be continuable, and the
                    // background route of a provider that continues its children
                    // is the continuable one: keep such tools foreground rather
                    // than advertise what would fail. Both spawn and fork are
                    // continuable, so this is every tool here today.
                    let config = child_policy(config, false, surface);
                    let continuable = service
                        .provider(&config.provider)
                        .is_some_and(|provider| provider.continuation().is_some());
                    let config = config.enable_run_in_background(!continuable);
                    SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks)
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| Failure::internal(error.to_string()))?;
        let notices = tasks.clone();
        let mut runtime = AgentRuntime::new(choice.model, tools)
            .with_observer(observer)
            .with_notices(Arc::new(move |agent: &AgentId| notices.take_notices(agent)));
        if let Some(dir) = data_dir {
            runtime = runtime.with_data_dir(dir);
        }
        Ok(Self {
            banner: choice.banner,
            runtime: Arc::new(runtime),
            max_turns: args.max_turns,
            tasks,
            _service: service,
            _providers: providers,
            _tools: mounted,
            _task_tools: task_tools,
            _control: control_tools,
            mcp: std::sync::Mutex::default(),
        })
    }

    /// Starts each MCP server and mounts its tools for the parent and its
    /// children (a child's `toolFilter` applies to them like to any tool).
    /// A server that cannot start stops dsh with exit 2, before any model call.
    pub(crate) async fn mount_mcp_servers(&mut self, servers: &[McpServerSpec]) -> Result<(), Failure> {
        for spec in servers {
            match McpMount::start(spec, self.runtime.tools(), &ClientOptions::default()).await {
                Ok(mount) => self.mcp.get_mut().unwrap_or_else(PoisonError::into_inner).push(mount),
                Err(error) => {
                    self.release_mcp_servers().await;
                    return Err(Failure::usage(format!("dsh: {error}")));
                }
            }
        }
        Ok(())
    }

    /// Releases every MCP server, waiting until their process groups are gone.
    pub(crate) async fn release_mcp_servers(&self) {
        let mounts = std::mem::take(&mut *self.mcp.lock().unwrap_or_else(PoisonError::into_inner));
        for mount in mounts {
            let server = mount.server().to_owned();
            if let Err(error) = mount.release().await {
                tracing::warn!(server = %server, "releasing the MCP server failed: {error}");
            }
        }
    }

    /// The tools every parent is offered.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        self.runtime.tools()
    }

    /// The background tasks of every parent on this runtime.
    pub(crate) fn tasks(&self) -> &TaskRegistry {
        &self.tasks
    }

    /// A new parent agent (its own conversation) on the shared runtime.
    pub(crate) fn parent(&self, label: &str) -> Result<Agent, Failure> {
        Agent::builder(self.runtime.clone())
            .system_prompt(wording::PARENT_SYSTEM_PROMPT)
            .max_turns(self.max_turns)
            .label(Some(label.to_owned()))
            .build()
            .map_err(|error| Failure::internal(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    struct Quiet;
    impl AgentObserver for Quiet {}

    fn setup(data_dir: Option<&Path>) -> Setup {
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), r#"{"rules": [{"when": {}, "reply": {"text": "ok"}}]}"#).unwrap();
        let args = AgentArgs {
            base_url: None,
            model: None,
            script: Some(script.path().to_owned()),
            max_turns: 4,
            mcp_servers: Vec::new(),
        };
        match Setup::new(&args, data_dir, Arc::new(Quiet), Surface::Agent) {
            Ok(setup) => setup,
            Err(_) => panic!("setup failed"),
        }
    }

    #[test]
    fn with_a_data_directory_spawn_children_are_continuable() {
        let dir = tempfile::tempdir().unwrap();
        let setup = setup(Some(dir.path()));
        let tools = setup.runtime.tools();
        let subagent = tools.get("subagent").unwrap();
        assert!(
            subagent
                .description()
                .ends_with(dsh_tool_subagent::wording::CONTINUABLE_SUFFIX)
        );
        assert!(tools.get("send_message").is_some());
        let fork = tools.get("subagent_fork").unwrap();
        assert!(
            fork.description()
                .ends_with(dsh_tool_subagent::wording::CONTINUABLE_SUFFIX)
        );
    }

    #[test]
    fn without_one_continuable_providers_stay_foreground() {
        let setup = setup(None);
        let tools = setup.runtime.tools();
        for name in ["subagent", "subagent_fork"] {
            let tool = tools.get(name).unwrap();
            assert!(
                tool.parameters()["properties"].get("run_in_background").is_none(),
                "{name}"
            );
        }
        assert!(tools.get("send_message").is_none());
    }
}
