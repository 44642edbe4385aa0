//! The boot manifest: one entry per tool crate, and how to mount it.

use std::any::Any;

use dsh_subagent::SubagentService;
use dsh_subagent::wording::SEND_MESSAGE_TOOL;
use dsh_subagent_api::{
    BoxFuture, Capabilities, ContinuableProvider, ContinuationDescriptor, ResumeRequest, StartRequest, SubagentError,
    SubagentProvider, SubagentRun,
};
use dsh_tasks::TaskRegistry;
use dsh_tasks::wording::{TASK_KILL, TASK_LIST, TASK_OUTPUT};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::ToolRegistry;

use crate::wording;

/// The `subagent` tool's default name.
const SUBAGENT: &str = SubagentToolConfig::DEFAULT_TOOL_NAME;

/// Whatever keeps a mounted crate's tools registered; dropped after harvest.
pub type MountGuard = Box<dyn Any>;

/// Why a tool crate could not be mounted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// The tool's configuration was refused.
    #[error(transparent)]
    Config(#[from] dsh_tool_subagent::ConfigError),
    /// The provider could not be registered.
    #[error(transparent)]
    Provider(#[from] SubagentError),
    /// A tool name could not be reserved.
    #[error(transparent)]
    Registry(#[from] dsh_tools::RegistryError),
}

/// One tool crate in the catalog.
pub struct ToolPackage {
    /// The crate's name, e.g. `dsh-tool-subagent`.
    pub package: &'static str,
    /// For each tool it registers, the file that defines it (relative to the workspace root).
    pub sources: &'static [(&'static str, &'static str)],
    /// What a harness must provide to mount it.
    pub requires: &'static [&'static str],
    /// What its tools write or affect.
    pub writes: &'static [&'static str],
    /// Other names the tool is commonly loaded under.
    pub shipped_aliases: &'static [&'static str],
    /// How it is deployed; shown in the table and under its section.
    pub note: &'static str,
    /// Mounts the crate's tools, with default configuration, on `tools`.
    pub mount: fn(&ToolRegistry) -> Result<MountGuard, MountError>,
}

impl std::fmt::Debug for ToolPackage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolPackage").field("package", &self.package).finish()
    }
}

/// Crates under `crates/` that are named like tool crates but are not.
pub(crate) const NOT_TOOL_CRATES: &[&str] = &["dsh-tool-catalog"];

/// Every shipped tool crate, in catalog order.
pub fn manifest() -> Vec<ToolPackage> {
    vec![
        ToolPackage {
            package: "dsh-tool-subagent",
            sources: &[(SUBAGENT, "crates/dsh-tool-subagent/src/tool.rs")],
            requires: &["dsh_tools::ToolRegistry", "dsh_subagent::SubagentService"],
            writes: wording::SUBAGENT_WRITES,
            shipped_aliases: &[
                SUBAGENT,
                SubagentToolConfig::FORK_TOOL_NAME,
                SubagentToolConfig::ACP_TOOL_NAME,
            ],
            note: wording::SUBAGENT_NOTE.as_str(),
            mount: mount_subagent,
        },
        ToolPackage {
            package: "dsh-tool-subagent-control",
            sources: &[(SEND_MESSAGE_TOOL, "crates/dsh-tool-subagent-control/src/tool.rs")],
            requires: &["dsh_tools::ToolRegistry", "dsh_subagent::SubagentControl"],
            writes: wording::CONTROL_WRITES,
            shipped_aliases: &[],
            note: wording::CONTROL_NOTE,
            mount: mount_subagent_control,
        },
        ToolPackage {
            package: "dsh-tool-tasks",
            sources: &[
                (TASK_KILL, "crates/dsh-tool-tasks/src/tools.rs"),
                (TASK_LIST, "crates/dsh-tool-tasks/src/tools.rs"),
                (TASK_OUTPUT, "crates/dsh-tool-tasks/src/tools.rs"),
            ],
            requires: &["dsh_tools::ToolRegistry", "dsh_tasks::TaskRegistry"],
            writes: wording::TASKS_WRITES,
            shipped_aliases: &[],
            note: wording::TASKS_NOTE.as_str(),
            mount: mount_tasks,
        },
        ToolPackage {
            package: "dsh mcp",
            sources: &[
                (SEND_MESSAGE_TOOL, "crates/dsh-tool-subagent-control/src/tool.rs"),
                (SUBAGENT, "crates/dsh-tool-subagent/src/tool.rs"),
                (TASK_KILL, "crates/dsh-tool-tasks/src/tools.rs"),
                (TASK_LIST, "crates/dsh-tool-tasks/src/tools.rs"),
                (TASK_OUTPUT, "crates/dsh-tool-tasks/src/tools.rs"),
            ],
            requires: wording::DSH_MCP_REQUIRES,
            writes: wording::DSH_MCP_WRITES,
            shipped_aliases: &[],
            note: wording::DSH_MCP_NOTE.as_str(),
            mount: mount_dsh_mcp,
        },
    ]
}

/// The tools `dsh mcp` serves: `subagent` over a continuable provider that
/// describes the spawn provider (a fresh child, every capability, the
/// continuation), with background runs, `send_message` and the task tools.
/// The catalog reads definitions, not a provider, so it does not depend on
/// the spawn provider and its model client; the `dsh` crate's MCP test
/// checks that the real server's `tools/list`, over the real spawn
/// provider, equals this section.
fn mount_dsh_mcp(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let service = SubagentService::new();
    let provider = service.register_provider(std::sync::Arc::new(Describe::continuable("spawn")))?;
    let tasks = TaskRegistry::new();
    let task_tools = TaskToolsPlugin::apply(&tasks, tools)?;
    let control = dsh_subagent::SubagentControl::new(service.clone(), tasks.clone(), std::sync::Arc::new(NoChildren));
    let control_tools = dsh_tool_subagent_control::SubagentControlPlugin::apply(&control, tools)?;
    let subagent = SubagentToolPlugin::apply_with_control(
        SubagentToolConfig::new("spawn").enable_run_in_background(true),
        &service,
        tools,
        &control,
    )?;
    Ok(Box::new((
        subagent,
        control_tools,
        task_tools,
        control,
        provider,
        tasks,
        service,
    )))
}

/// The provider the catalog mounts `subagent` over: a fresh-context child
/// with every capability, so the tool shows its default surface, and, when
/// `continuable`, the continuation too (as the spawn provider has it). The
/// catalog only reads definitions; it never starts a child.
struct Describe {
    name: &'static str,
    continuable: bool,
}

impl Describe {
    /// A one-shot provider named `catalog`.
    const ONE_SHOT: Self = Self {
        name: "catalog",
        continuable: false,
    };

    /// A provider named `name` with the continuation capability.
    fn continuable(name: &'static str) -> Self {
        Self {
            name,
            continuable: true,
        }
    }
}

impl SubagentProvider for Describe {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, _request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed(wording::NO_CHILDREN)) })
    }

    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        self.continuable.then_some(self as &dyn ContinuableProvider)
    }
}

impl ContinuableProvider for Describe {
    fn start_continuable(
        &self,
        _child_id: String,
        _descriptor: ContinuationDescriptor,
        _request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed(wording::NO_CHILDREN)) })
    }

    fn resume(&self, _request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed(wording::NO_CHILDREN)) })
    }
}

fn mount_subagent(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let service = SubagentService::new();
    let provider = std::sync::Arc::new(Describe::ONE_SHOT);
    let registration = service.register_provider(provider)?;
    let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("catalog"), &service, tools)?;
    Ok(Box::new((plugin, registration, service)))
}

fn mount_tasks(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let tasks = TaskRegistry::new();
    let plugin = TaskToolsPlugin::apply(&tasks, tools)?;
    Ok(Box::new((plugin, tasks)))
}

/// A store with no children: the catalog only reads what the tool shows.
struct NoChildren;

impl dsh_subagent_api::ChildStore for NoChildren {
    fn lookup(&self, _: &str) -> Result<Option<dsh_subagent_api::ChildRecord>, dsh_subagent_api::SubagentError> {
        Ok(None)
    }

    fn children_of(
        &self,
        _: &dsh_tools::AgentId,
    ) -> Result<Vec<dsh_subagent_api::ChildRecord>, dsh_subagent_api::SubagentError> {
        Ok(Vec::new())
    }
}

fn mount_subagent_control(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let control = dsh_subagent::SubagentControl::new(
        SubagentService::new(),
        TaskRegistry::new(),
        std::sync::Arc::new(NoChildren),
    );
    let plugin = dsh_tool_subagent_control::SubagentControlPlugin::apply(&control, tools)?;
    Ok(Box::new((plugin, control)))
}
