//! MCP servers started and mounted as tools: those every parent shares
//! (`--mcp-server`s and `[[mcp_servers]]`, started before the first model
//! call and released with their process groups when dsh stops), and, through
//! [`McpMounts`], those an ACP client hands one session.

use std::sync::{Mutex, PoisonError};

use dsh_mcp::{ClientOptions, McpMount, McpServerSpec, McpStartError};
use dsh_tools::ResultPolicy;
use dsh_tools::ToolRegistry;

use crate::cli::AgentArgs;
use crate::config::Config;
use crate::failure::Failure;
use crate::{self_mount, wording};

/// MCP servers started together, their tools mounted: all of them or none
/// ([`mount`](Self::mount)), released together ([`release`](Self::release)).
#[derive(Default)]
pub(crate) struct McpMounts(Vec<McpMount>);

impl McpMounts {
    /// Starts each server with its options and mounts its tools in `tools`,
    /// in order. All or nothing: when one cannot start, every server started
    /// here so far is released and its error returned.
    pub(crate) async fn mount(
        &mut self,
        servers: impl IntoIterator<Item = (McpServerSpec, ClientOptions)>,
        tools: &ToolRegistry,
    ) -> Result<(), McpStartError> {
        for (spec, options) in servers {
            match McpMount::start(&spec, tools, &options).await {
                Ok(mount) => self.0.push(mount),
                Err(error) => {
                    std::mem::take(self).release().await;
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// Releases every server, waiting until their process groups are gone;
    /// a failed release is logged.
    pub(crate) async fn release(self) {
        for mount in self.0 {
            let server = mount.server().to_owned();
            if let Err(error) = mount.release().await {
                tracing::warn!(server = %server, "{}", wording::log_mcp_release_failed(&error));
            }
        }
    }
}

/// What dsh adds to the launch of every MCP server it runs as a process:
/// the self-mount check's marker, under the server's own variables (which
/// win), and the variables of ours no server may inherit.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerLaunch {
    env: Vec<(String, String)>,
    withheld: Vec<String>,
}

impl ServerLaunch {
    /// `spec` with the marker set (unless it sets the variable itself) and
    /// the withheld variables withheld; a remote server is left as it is.
    pub(crate) fn apply(&self, mut spec: McpServerSpec) -> McpServerSpec {
        if let Some(launch) = spec.launch_mut() {
            let own = std::mem::take(&mut launch.env);
            launch.env = self.env.iter().cloned().chain(own).collect();
            launch.withheld_env.extend(self.withheld.iter().cloned());
        }
        spec
    }
}

/// The MCP servers whose tools join the parents' (`--mcp-server`s first,
/// then `[[mcp_servers]]`): started by [`mount`](Self::mount), released by
/// [`release`](Self::release).
pub(crate) struct SharedMcpServers {
    pending: Vec<McpServerSpec>,
    mounted: Mutex<McpMounts>,
    /// Their results within the budget.
    options: ClientOptions,
    /// What every server run as a process is launched with.
    launch: ServerLaunch,
}

impl SharedMcpServers {
    /// The servers to start, never with the `withheld` variables of ours,
    /// their tools' results within `results`; none runs yet.
    pub(crate) fn new(args: &AgentArgs, config: Option<&Config>, withheld: &[String], results: ResultPolicy) -> Self {
        let launch = ServerLaunch {
            env: self_mount::child_env(config).into_iter().collect(),
            withheld: withheld.to_vec(),
        };
        let pending = args
            .mcp_servers
            .iter()
            .chain(config.into_iter().flat_map(|config| config.mcp_servers.iter()))
            .map(|spec| launch.apply(spec.clone()))
            .collect();
        Self {
            pending,
            mounted: Mutex::default(),
            options: ClientOptions::default().results(results),
            launch,
        }
    }

    /// How MCP servers are started (their results within the budget); for
    /// the servers an ACP client hands a session, too.
    pub(crate) fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// What every MCP server run as a process is launched with (the
    /// self-mount check's marker, without the withheld variables); for the
    /// servers an ACP client hands a session, too.
    pub(crate) fn launch(&self) -> &ServerLaunch {
        &self.launch
    }

    /// Starts each server and mounts its tools in `tools`, for the parent
    /// and its children (a child's `toolFilter` applies to them like to any
    /// tool). A server that cannot start stops dsh with exit 2, before any
    /// model call, and those already started are released.
    pub(crate) async fn mount(&mut self, tools: &ToolRegistry) -> Result<(), Failure> {
        let servers = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|spec| (spec, self.options.clone()));
        self.mounted
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .mount(servers, tools)
            .await
            .map_err(|error| Failure::usage(wording::failed(&error)))
    }

    /// Releases every server, waiting until their process groups are gone.
    pub(crate) async fn release(&self) {
        let mounts = std::mem::take(&mut *self.mounted.lock().unwrap_or_else(PoisonError::into_inner));
        mounts.release().await;
    }
}
