//! What `dsh run`, `dsh acp` and `dsh mcp` share: the model, the subagent
//! service with its providers, the delegation tools (those of `dsh.toml`, or
//! `subagent` and `subagent_fork`), `send_message` (with a data directory:
//! background spawn children are continuable), the tools of MCP servers, and
//! parent agents.

use std::path::Path;
use std::sync::{Arc, PoisonError};

use dsh_agent::store::JsonlChildStore;
use dsh_agent::{Agent, AgentObserver, AgentRuntime};
use dsh_mcp::{ClientOptions, McpMount, McpServerSpec};
use dsh_subagent::{ProviderRegistration, SubagentControl, SubagentEvent, SubagentService, Subscription};
use dsh_subagent_acp::AcpProvider;
use dsh_subagent_api::ToolFilter;
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, ToolRegistry};

use crate::cli::AgentArgs;
use crate::config::{Config, Provider, Subagent};
use crate::observe::TreeObserver;
use crate::{Failure, loop_guard, model, resume, wording};

/// Children of a dsh parent do their task themselves: they neither see nor
/// call the delegation tools (nor the task tools that collect background
/// ones), and the depth cap backs that up. The parent may run them in the
/// background (nor `send_message`, when it is mounted).
fn child_policy(config: SubagentToolConfig, with_send_message: bool, surface: Surface) -> SubagentToolConfig {
    // A filter may name only tools that exist: `dsh mcp` has no `subagent_fork`.
    let mut deny = vec![wording::SPAWN_TOOL.to_owned()];
    if surface == Surface::Agent {
        deny.push(wording::FORK_TOOL.to_owned());
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

/// The delegation tools the parent sees, and what keeps them mounted: the
/// subagent service with its providers, one `subagent` tool per configured
/// entry (or the default two), the task tools and, with a data directory,
/// `send_message`.
pub(crate) struct Mounts {
    tools: ToolRegistry,
    tasks: TaskRegistry,
    /// The model-visible names of the delegation tools.
    delegation_tools: Vec<String>,
    service: SubagentService,
    _providers: Vec<ProviderRegistration>,
    _tools: Vec<SubagentToolPlugin>,
    _task_tools: TaskToolsPlugin,
    _control: Option<dsh_tool_subagent_control::SubagentControlPlugin>,
}

/// The names of the default delegation tools.
pub(crate) const DEFAULT_TOOL_NAMES: [&str; 2] = [wording::SPAWN_TOOL, wording::FORK_TOOL];

/// The default tools without a configuration file (or with one that has no
/// `[[subagents]]`): `subagent` (spawn) and, for an agent, `subagent_fork`
/// (fork), with the dsh child policy.
fn default_subagents(with_send_message: bool, surface: Surface) -> Vec<Subagent> {
    let mut defaults = vec![(Provider::Spawn, SubagentToolConfig::new("spawn"))];
    if surface == Surface::Agent {
        defaults.push((
            Provider::Fork,
            SubagentToolConfig::new("fork").tool_name(DEFAULT_TOOL_NAMES[1]),
        ));
    }
    defaults
        .into_iter()
        .map(|(provider, tool)| Subagent {
            provider,
            tool: child_policy(tool, with_send_message, surface),
        })
        .collect()
}

/// The MCP servers to start: `--mcp-server`s first, then the file's.
fn mcp_servers(args: &AgentArgs, config: Option<&Config>) -> Vec<McpServerSpec> {
    let mut servers = args.mcp_servers.clone();
    if let Some(config) = config {
        servers.extend(config.mcp_servers.iter().cloned());
    }
    servers
}

/// The model-visible names of the delegation tools a configuration mounts
/// for an agent (`dsh run`, `dsh acp`).
pub(crate) fn delegation_tool_names(config: Option<&Config>) -> Vec<String> {
    match config {
        Some(config) if !config.subagents.is_empty() => config
            .subagents
            .iter()
            .map(|subagent| subagent.tool.tool_name.clone())
            .collect(),
        _ => DEFAULT_TOOL_NAMES.iter().map(|name| (*name).to_owned()).collect(),
    }
}

/// The configured delegation tools a surface serves: `dsh mcp` serves no
/// fork tool (the calling agent's conversation lives in the MCP host, so a
/// fork would inherit nothing while its description promises this
/// conversation); each one left out is named on stderr.
fn served(subagents: &[Subagent], surface: Surface) -> Vec<Subagent> {
    subagents
        .iter()
        .filter(|subagent| {
            let serves = surface == Surface::Agent || !matches!(subagent.provider, Provider::Fork);
            if !serves {
                eprintln!("{}", wording::fork_not_served(&subagent.tool.tool_name));
            }
            serves
        })
        .cloned()
        .collect()
}

impl Mounts {
    /// Registers the providers and mounts the tools. No child starts here and
    /// no process is spawned: an ACP provider runs its command per delegation.
    /// ACP children's reports go to `observer`, when there is one.
    pub(crate) fn new(
        config: Option<&Config>,
        data_dir: Option<&Path>,
        surface: Surface,
        observer: Option<Arc<dyn TreeObserver>>,
    ) -> Result<Self, Failure> {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let tasks = TaskRegistry::new();
        let task_tools =
            TaskToolsPlugin::apply(&tasks, &tools).map_err(|error| Failure::internal(error.to_string()))?;
        let subagents = match config {
            Some(config) if !config.subagents.is_empty() => served(&config.subagents, surface),
            _ => default_subagents(data_dir.is_some(), surface),
        };
        let mut providers = vec![
            service.register_provider(Arc::new(SpawnProvider::new())),
            service.register_provider(Arc::new(ForkProvider::new())),
        ];
        // Every child process carries the loop guard's marker.
        let child_env = loop_guard::child_env(config);
        for subagent in &subagents {
            if let Provider::Acp(acp) = &subagent.provider {
                let acp = child_env
                    .iter()
                    .fold(acp.as_ref().clone(), |acp, (key, value)| acp.env(key, value));
                let mut provider = AcpProvider::new(acp).map_err(|error| Failure::usage(wording::failed(&error)))?;
                if let Some(observer) = observer.clone() {
                    provider = provider.with_progress(move |run, update| observer.acp_child_update(run, update));
                }
                providers.push(service.register_provider(Arc::new(provider)));
            }
        }
        let providers = providers
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
        let delegation_tools: Vec<String> = subagents
            .iter()
            .map(|subagent| subagent.tool.tool_name.clone())
            .collect();
        // A filter naming a tool dsh leaves out here (`send_message` without
        // a data directory, a fork tool under `dsh mcp`) means the same
        // without that name.
        let unserved: Vec<&str> = config
            .map(|config| config.subagents.iter().map(|subagent| subagent.tool.tool_name.as_str()))
            .into_iter()
            .flatten()
            .filter(|name| !delegation_tools.iter().any(|served| served == name))
            .collect();
        let absent = |name: &String| {
            (dsh_tool_subagent_control::TOOL_NAMES.contains(&name.as_str()) && control.is_none())
                || unserved.contains(&name.as_str())
        };
        let subagents = subagents.into_iter().map(|mut subagent| {
            if let Some(filter) = &mut subagent.tool.tool_filter {
                for names in [&mut filter.allow, &mut filter.deny].into_iter().flatten() {
                    names.retain(|name| !absent(name));
                }
            }
            subagent
        });
        let mounted = subagents
            .map(|subagent| match &control {
                Some(control) => SubagentToolPlugin::apply_with_control(subagent.tool, &service, &tools, control),
                None => {
                    // Without transcripts no child can be continuable, and the
                    // background route of a provider that continues its
                    // children is the continuable one: keep such tools
                    // foreground rather than advertise what would fail.
                    let config = subagent.tool;
                    let continuable = service
                        .provider(&config.provider)
                        .is_some_and(|provider| provider.continuation().is_some());
                    let enable = config.enable_run_in_background && !continuable;
                    let config = config.enable_run_in_background(enable);
                    SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks)
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| Failure::usage(wording::failed(&error)))?;
        Ok(Self {
            tools,
            tasks,
            delegation_tools,
            service,
            _providers: providers,
            _tools: mounted,
            _task_tools: task_tools,
            _control: control_tools,
        })
    }

    /// Every tool the parent's model sees.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The model-visible names of the delegation (`subagent`-kind) tools.
    pub(crate) fn delegation_tools(&self) -> &[String] {
        &self.delegation_tools
    }
}

/// A model, a runtime with the delegation tools mounted, the task tools that
/// collect background children, and the registrations that keep them alive.
pub(crate) struct Setup {
    /// The line that names the model.
    pub(crate) banner: String,
    runtime: Arc<AgentRuntime>,
    max_turns: u32,
    /// Set when `--model` or `[model].model` chose the model explicitly.
    explicit_model: bool,
    mounts: Mounts,
    /// The observer's subscription to the service's run events.
    _runs: Subscription,
    /// The MCP servers to start (`--mcp-server`, then `[[mcp_servers]]`),
    /// until [`mount_mcp_servers`](Self::mount_mcp_servers) starts them.
    mcp_servers: Vec<McpServerSpec>,
    mcp: std::sync::Mutex<Vec<McpMount>>,
    /// How MCP servers are started: with the loop guard's marker.
    mcp_options: ClientOptions,
}

impl Setup {
    /// Chooses the model (`--script`, `--base-url`/`[model]`/`DSH_*`, else
    /// the embedded scripted model) and mounts the delegation tools; the MCP
    /// servers start later ([`mount_mcp_servers`](Self::mount_mcp_servers)).
    pub(crate) fn new(
        args: &AgentArgs,
        config: Option<&Config>,
        data_dir: Option<&Path>,
        observer: Arc<dyn TreeObserver>,
        surface: Surface,
    ) -> Result<Self, Failure> {
        let file_model = config.map(|config| config.model.clone()).unwrap_or_default();
        let mounts = Mounts::new(config, data_dir, surface, Some(observer.clone()))?;
        // Every child's start and end, whatever its provider, from the run
        // events; an in-process agent's steps from the agent loop.
        let children = observer.clone();
        let runs = mounts.service.subscribe(Arc::new(move |event: &SubagentEvent| {
            children.child_event(event);
            Ok(())
        }));
        let choice = model::choose(args, &file_model, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
        let notices = mounts.tasks.clone();
        let mut runtime = AgentRuntime::new(choice.model, mounts.tools.clone())
            .with_observer(observer as Arc<dyn AgentObserver>)
            .with_notices(Arc::new(move |agent: &AgentId| notices.take_notices(agent)));
        if let Some(dir) = data_dir {
            runtime = runtime.with_data_dir(dir);
        }
        Ok(Self {
            banner: choice.banner,
            runtime: Arc::new(runtime),
            max_turns: args.max_turns,
            explicit_model: args.model.is_some() || file_model.model.is_some(),
            mounts,
            _runs: runs,
            mcp_servers: mcp_servers(args, config),
            mcp: std::sync::Mutex::default(),
            mcp_options: loop_guard::child_env(config)
                .into_iter()
                .fold(ClientOptions::default(), |options, (key, value)| {
                    options.env(key, value)
                }),
        })
    }

    /// Starts each MCP server and mounts its tools for the parent and its
    /// children (a child's `toolFilter` applies to them like to any tool).
    /// A server that cannot start stops dsh with exit 2, before any model call.
    pub(crate) async fn mount_mcp_servers(&mut self) -> Result<(), Failure> {
        for spec in std::mem::take(&mut self.mcp_servers) {
            match McpMount::start(&spec, self.runtime.tools(), &self.mcp_options).await {
                Ok(mount) => self.mcp.get_mut().unwrap_or_else(PoisonError::into_inner).push(mount),
                Err(error) => {
                    self.release_mcp_servers().await;
                    return Err(Failure::usage(wording::failed(&error)));
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
                tracing::warn!(server = %server, "{}", wording::log_mcp_release_failed(&error));
            }
        }
    }

    /// The tools every parent is offered.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        self.runtime.tools()
    }

    /// The background tasks of every parent on this runtime.
    pub(crate) fn tasks(&self) -> &TaskRegistry {
        &self.mounts.tasks
    }

    /// The model-visible names of the delegation tools.
    pub(crate) fn delegation_tools(&self) -> &[String] {
        self.mounts.delegation_tools()
    }

    /// How MCP servers are started (with the loop guard's marker); for the
    /// servers an ACP client hands a session, too.
    pub(crate) fn mcp_options(&self) -> &ClientOptions {
        &self.mcp_options
    }

    /// The shared runtime over another registry: the same model, observer,
    /// notices and data directory, for parents with tools of their own (an
    /// ACP session's MCP servers, beside every shared tool).
    pub(crate) fn runtime_with(&self, tools: ToolRegistry) -> Arc<AgentRuntime> {
        Arc::new(self.runtime.as_ref().clone().with_tools(tools))
    }

    /// A new parent agent (its own conversation) on the shared runtime.
    pub(crate) fn parent(&self, label: &str) -> Result<Agent, Failure> {
        self.parent_on(self.runtime.clone(), label)
    }

    /// A new parent agent on `runtime` ([`Setup::runtime_with`]).
    pub(crate) fn parent_on(&self, runtime: Arc<AgentRuntime>, label: &str) -> Result<Agent, Failure> {
        Agent::builder(runtime)
            .system_prompt(wording::PARENT_SYSTEM_PROMPT)
            .max_turns(self.max_turns)
            .label(Some(label.to_owned()))
            .build()
            .map_err(|error| Failure::internal(error.to_string()))
    }

    /// An earlier parent, continued: its id, history (committed turns), system
    /// prompt and model from its transcript; today's tools. A torn tail and an
    /// interrupted turn are repaired first; what was repaired is returned.
    pub(crate) fn resume(&self, id: &str) -> Result<(Agent, Vec<String>), resume::ResumeError> {
        self.resume_on(self.runtime.clone(), id)
    }

    /// [`Setup::resume`] on `runtime` ([`Setup::runtime_with`]).
    pub(crate) fn resume_on(
        &self,
        runtime: Arc<AgentRuntime>,
        id: &str,
    ) -> Result<(Agent, Vec<String>), resume::ResumeError> {
        let Some(dir) = runtime.data_dir() else {
            return Err(resume::ResumeError::Failed(Failure::usage(
                wording::RESUME_NEEDS_DATA_DIR,
            )));
        };
        let saved = resume::load_parent(dir, id)?;
        let mut builder = Agent::builder(runtime.clone())
            .id(saved.id)
            .max_turns(self.max_turns)
            .label(saved.label)
            .continue_from(saved.history);
        if !self.explicit_model {
            builder = builder.model(Some(saved.model));
        }
        if let Some(system_prompt) = saved.system_prompt {
            builder = builder.system_prompt(system_prompt);
        }
        let agent = builder
            .build()
            .map_err(|error| resume::ResumeError::Failed(Failure::internal(error.to_string())))?;
        Ok((agent, saved.repairs))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// An observer that shows nothing, for the setups these tests build.
    pub(super) struct Quiet;
    impl AgentObserver for Quiet {}
    impl TreeObserver for Quiet {
        fn child_event(&self, _event: &SubagentEvent) {}
    }

    fn setup(data_dir: Option<&Path>) -> Setup {
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), r#"{"rules": [{"when": {}, "reply": {"text": "ok"}}]}"#).unwrap();
        let args = AgentArgs {
            config: None,
            base_url: None,
            model: None,
            script: Some(script.path().to_owned()),
            max_turns: 4,
            mcp_servers: Vec::new(),
        };
        match Setup::new(&args, None, data_dir, Arc::new(Quiet), Surface::Agent) {
            Ok(setup) => setup,
            Err(_) => panic!("setup failed"),
        }
    }

    #[test]
    fn with_a_data_directory_spawn_children_are_continuable() {
        let dir = tempfile::tempdir().unwrap();
        let setup = setup(Some(dir.path()));
        let tools = setup.mounts.tools();
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
        let tools = setup.mounts.tools();
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

#[cfg(test)]
mod filter_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use super::tests::Quiet;

    /// Without a data directory `send_message` is not mounted; a filter that
    /// names it still lets every child start.
    #[tokio::test]
    async fn a_filter_naming_send_message_works_without_a_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(
            &script,
            r#"{"rules": [
              {"when": {"tool_not_offered": "subagent", "tool_offered": "task_list"}, "reply": {"text": "child ok"}},
              {"when": {"last_message": "user"}, "reply": {"tool_calls": [
                {"name": "subagent", "arguments": {"description": "d", "prompt": "p"}}]}},
              {"when": {"last_message": "tool"}, "reply": {"text": "{{last_tool_result}}"}}
            ]}"#,
        )
        .unwrap();
        let text = "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { allow = [\"task_list\", \"send_message\"] }\n";
        let config = crate::config::parse(Path::new("dsh.toml"), text, dir.path()).unwrap();
        let args = AgentArgs {
            config: None,
            base_url: None,
            model: None,
            script: Some(script),
            max_turns: 4,
            mcp_servers: Vec::new(),
        };
        let Ok(setup) = Setup::new(&args, Some(&config), None, Arc::new(Quiet), Surface::Agent) else {
            panic!("setup failed")
        };
        assert!(setup.mounts.tools().get("send_message").is_none());
        let Ok(parent) = setup.parent("test") else {
            panic!("no parent")
        };
        let outcome = parent.run("go", &dsh_tools::CancellationToken::new()).await;
        assert_eq!(outcome.text, "child ok");
    }
}

#[cfg(test)]
mod surface_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use super::tests::Quiet;

    /// `dsh mcp` leaves a configured fork tool out; a filter naming it still
    /// lets the other tool's children start.
    #[tokio::test]
    async fn an_mcp_server_serves_no_fork_tool_and_filters_naming_it_still_work() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script.json");
        std::fs::write(
            &script,
            r#"{"rules": [
              {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "child ok"}},
              {"when": {"last_message": "user"}, "reply": {"tool_calls": [
                {"name": "subagent", "arguments": {"description": "d", "prompt": "p"}}]}},
              {"when": {"last_message": "tool"}, "reply": {"text": "{{last_tool_result}}"}}
            ]}"#,
        )
        .unwrap();
        let text = "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { deny = [\"subagent\", \"subagent_fork\"] }\n\n[[subagents]]\ntool_name = \"subagent_fork\"\nprovider = \"fork\"\n";
        let config = crate::config::parse(Path::new("dsh.toml"), text, dir.path()).unwrap();
        let args = AgentArgs {
            config: None,
            base_url: None,
            model: None,
            script: Some(script),
            max_turns: 4,
            mcp_servers: Vec::new(),
        };
        let data = dir.path().join("data");
        let Ok(setup) = Setup::new(&args, Some(&config), Some(&data), Arc::new(Quiet), Surface::McpServer) else {
            panic!("setup failed")
        };
        assert!(setup.tools().get("subagent").is_some());
        assert!(setup.tools().get("subagent_fork").is_none());
        assert_eq!(setup.delegation_tools(), ["subagent"]);
        let Ok(parent) = setup.parent("test") else {
            panic!("no parent")
        };
        let outcome = parent.run("go", &dsh_tools::CancellationToken::new()).await;
        assert_eq!(outcome.text, "child ok");
    }
}
