//! What `dsh run`, `dsh acp` and `dsh mcp` share: a plan (configuration in,
//! [`HarnessBuilder`] calls out) that gives the parent its delegation tools
//! (those of `dsh.toml`, or `subagent` and `subagent_fork`), the task tools
//! and, with a data directory, `send_message` over continuable children.
//! The MCP servers whose tools join them are [`crate::mcp_mounts`]; the
//! runtime the parents share over these tools is [`crate::runtime`].

use std::path::Path;
use std::sync::Arc;

use dsh_agent::JsonlChildStore;
use dsh_harness::{Background, Harness, HarnessBuilder};
use dsh_subagent::{DelegationTree, Limits};
use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_api::{SubagentProvider, ToolFilter};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig};
use dsh_tools::{ResultLimit, ToolRegistry};

use crate::config::{Config, Provider, Subagent};
use crate::failure::Failure;
use crate::observe::TreeObserver;
use crate::{self_mount, wording};

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

/// The names of the default delegation tools.
pub(crate) const DEFAULT_TOOL_NAMES: [&str; 2] = [wording::SPAWN_TOOL, wording::FORK_TOOL];

/// The default tools without `[[subagents]]`: `subagent` (spawn) and, for an
/// agent, `subagent_fork` (fork). Their children do their task themselves:
/// they neither see nor call the delegation tools (nor the task tools, nor
/// `send_message` when it is mounted), and the depth cap backs that up; the
/// parent may run them in the background.
fn default_subagents(with_send_message: bool, surface: Surface) -> Vec<Subagent> {
    let mut defaults = vec![(Provider::Spawn, SubagentToolConfig::new("spawn"))];
    // A filter may name only tools that exist: `dsh mcp` has no `subagent_fork`.
    let mut deny = vec![DEFAULT_TOOL_NAMES[0]];
    if surface == Surface::Agent {
        let fork = SubagentToolConfig::new("fork").tool_name(DEFAULT_TOOL_NAMES[1]);
        defaults.push((Provider::Fork, fork));
        deny.push(DEFAULT_TOOL_NAMES[1]);
    }
    deny.extend(dsh_tool_tasks::TOOL_NAMES);
    if with_send_message {
        deny.extend(dsh_tool_subagent_control::TOOL_NAMES);
    }
    let policy = |tool: SubagentToolConfig| {
        tool.max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(1)))
            .enable_run_in_background(true)
            .tool_filter(ToolFilter::denying(deny.clone()))
    };
    defaults
        .into_iter()
        .map(|(provider, tool)| Subagent {
            provider,
            tool: policy(tool),
            price: None,
        })
        .collect()
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
/// fork tool; each one left out is named on stderr.
fn served(subagents: &[Subagent], surface: Surface) -> Vec<Subagent> {
    let serves = |subagent: &&Subagent| {
        let serves = surface == Surface::Agent || !matches!(subagent.provider, Provider::Fork);
        if !serves {
            eprintln!("{}", wording::fork_not_served(&subagent.tool.tool_name));
        }
        serves
    };
    subagents.iter().filter(serves).cloned().collect()
}

/// Drops from a tool's filter the names of tools dsh leaves out (`absent`):
/// a filter naming one means the same without it.
fn leave_out(tool: &mut SubagentToolConfig, absent: &[String]) {
    for names in tool
        .tool_filter
        .iter_mut()
        .flat_map(|f| [&mut f.allow, &mut f.deny])
        .flatten()
    {
        names.retain(|name| !absent.contains(name));
    }
}

/// What every ACP provider of the harness is built with: the self-mount check's
/// marker, the variables of ours it never passes on, and where its
/// children's reports go.
struct AcpSetup<'a> {
    child_env: Vec<(String, String)>,
    withheld: &'a [String],
    observer: Option<Arc<dyn TreeObserver>>,
}

impl AcpSetup<'_> {
    /// An ACP provider for one tool's configuration.
    fn provider(&self, config: AcpConfig) -> Result<Arc<dyn SubagentProvider>, Failure> {
        let config = self
            .child_env
            .iter()
            .fold(config, |config, (key, value)| config.env(key, value));
        let config = self
            .withheld
            .iter()
            .fold(config, |config, name| config.withhold_env(name));
        let mut acp = AcpProvider::new(config).map_err(|error| Failure::usage(wording::failed(&error)))?;
        if let Some(observer) = self.observer.clone() {
            acp = acp.with_progress(move |run, update| observer.acp_child_update(run, update));
        }
        Ok(Arc::new(acp))
    }
}

/// The mounted harness, and the model-visible names of its delegation tools.
pub(crate) struct MountedHarness {
    harness: Harness,
    delegation_tools: Vec<String>,
}

impl MountedHarness {
    /// The plan, built. No child starts here and no process is spawned: an
    /// ACP provider runs its command per delegation, never with the
    /// `withheld` variables of ours. ACP children's reports go to
    /// `observer`, when there is one. `limits` bound every delegation tree
    /// (each top-level agent opens its own: [`MountedHarness::open_tree`]);
    /// `result_limit`, when set, every tool without its own. `env` is what it gives ACP children besides the self-mount check's marker
    /// (the cassette they record a part of, or replay: [`crate::cassette_mode`]).
    pub(crate) fn new(
        config: Option<&Config>,
        data_dir: Option<&Path>,
        surface: Surface,
        observer: Option<Arc<dyn TreeObserver>>,
        limits: Limits,
        result_limit: Option<ResultLimit>,
        (withheld, env): (&[String], &[(String, String)]),
    ) -> Result<Self, Failure> {
        let subagents = match config {
            Some(config) if !config.subagents.is_empty() => served(&config.subagents, surface),
            _ => default_subagents(data_dir.is_some(), surface),
        };
        let delegation_tools: Vec<String> = subagents.iter().map(|s| s.tool.tool_name.clone()).collect();
        // A filter naming a tool dsh leaves out here (`send_message` without
        // a data directory, a fork tool under `dsh mcp`) means the same
        // without that name.
        let configured = config.into_iter().flat_map(|config| &config.subagents);
        let mut absent: Vec<String> = configured
            .map(|subagent| subagent.tool.tool_name.clone())
            .filter(|name| !delegation_tools.contains(name))
            .collect();
        // Continuable children live in transcripts: only with a data directory.
        let background = match data_dir {
            Some(dir) => Background::Continuable(Arc::new(JsonlChildStore::new(dir))),
            None => {
                absent.extend(dsh_tool_subagent_control::TOOL_NAMES.map(str::to_owned));
                Background::Tasks
            }
        };
        // Spawn and fork are always there: a continued child finds its provider.
        let spawn: Arc<dyn SubagentProvider> = Arc::new(dsh_subagent_spawn::SpawnProvider::new());
        let fork: Arc<dyn SubagentProvider> = Arc::new(dsh_subagent_fork::ForkProvider::new());
        let mut builder = HarnessBuilder::new()
            .provider(spawn.clone())
            .provider(fork.clone())
            .background(background)
            .limits(limits)
            .later_tools(dsh_mcp::TOOL_PREFIX);
        // Absent, the harness's default: decided there only.
        if let Some(limit) = result_limit {
            builder = builder.result_limit(limit);
        }
        let acp = AcpSetup {
            // Every child process carries the self-mount check's marker.
            child_env: self_mount::child_env(config)
                .into_iter()
                .chain(env.iter().cloned())
                .collect(),
            withheld,
            observer,
        };
        for Subagent { provider, mut tool, .. } in subagents {
            let provider: Arc<dyn SubagentProvider> = match provider {
                Provider::Spawn => spawn.clone(),
                Provider::Fork => fork.clone(),
                Provider::Acp(config) => acp.provider(*config)?,
            };
            leave_out(&mut tool, &absent);
            // Without a data directory no child is continuable, and a
            // continuing provider's background route is the continuable
            // one: such tools stay foreground rather than advertise it.
            if data_dir.is_none() && provider.continuation().is_some() {
                tool = tool.enable_run_in_background(false);
            }
            builder = builder.subagent(tool, provider);
        }
        let harness = builder
            .build()
            .map_err(|error| Failure::usage(wording::failed(&error)))?;
        Ok(Self {
            harness,
            delegation_tools,
        })
    }

    /// Every tool the parent's model sees.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        self.harness.tools()
    }

    /// The mounted harness: its service, task registry and notices.
    pub(crate) fn harness(&self) -> &Harness {
        &self.harness
    }

    /// The model-visible names of the delegation (`subagent`-kind) tools.
    pub(crate) fn delegation_tools(&self) -> &[String] {
        &self.delegation_tools
    }

    /// A new delegation tree under the limits, for one top-level agent: all
    /// it delegates shares one gate, one child count and one token budget.
    pub(crate) fn open_tree(&self) -> DelegationTree {
        self.harness.open_tree()
    }
}

#[cfg(test)]
mod tests;
