//! The boot manifest: one entry per tool crate, and how to mount it.

use std::any::Any;

use dsh_subagent::SubagentService;
use dsh_subagent::wording::SEND_MESSAGE_TOOL;
use dsh_subagent_api::{BoxFuture, Capabilities, StartRequest, SubagentError, SubagentProvider, SubagentRun};
use dsh_tasks::TaskRegistry;
use dsh_tasks::wording::{TASK_KILL, TASK_LIST, TASK_OUTPUT};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::ToolRegistry;

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
pub const NOT_TOOL_CRATES: &[&str] = &["dsh-tool-catalog"];

/// Every shipped tool crate, in catalog order.
pub fn manifest() -> Vec<ToolPackage> {
    vec![
        ToolPackage {
            package: "dsh-tool-subagent",
            sources: &[(SUBAGENT, "crates/dsh-tool-subagent/src/tool.rs")],
            requires: &["dsh_tools::ToolRegistry", "dsh_subagent::SubagentService"],
            writes: &[
                "tool/call",
                "tool/result",
                "child agent state through the chosen provider",
            ],
            shipped_aliases: &[
                SUBAGENT,
                SubagentToolConfig::FORK_TOOL_NAME,
                SubagentToolConfig::ACP_TOOL_NAME,
            ],
            note: "The registered tool name is the load-time `toolName` config (default `subagent`); the schema above is that default, over a provider whose child starts with a fresh conversation. A harness loads this crate once per provider, so the model may also see `subagent_fork`, bound to the fork provider: its description and `prompt` text use the inherited-context wording (`INHERITS this conversation`, `It already sees this conversation's completed turns`), and its parameters are otherwise identical. `subagent_acp` (an out-of-process child over ACP) keeps the wording above. With `enableRunInBackground` (off by default; `dsh run` turns it on) the description gains the background-task sentence and an optional boolean `run_in_background` follows `prompt`: over a one-shot provider it returns `started background subagent task <id>`, over a provider with the continuation capability (spawn or fork, with a control service) `started subagent <id> as task <taskId>`, and the description then also names `send_message`.",
            mount: mount_subagent,
        },
        ToolPackage {
            package: "dsh-tool-subagent-control",
            sources: &[(SEND_MESSAGE_TOOL, "crates/dsh-tool-subagent-control/src/tool.rs")],
            requires: &["dsh_tools::ToolRegistry", "dsh_subagent::SubagentControl"],
            writes: &[
                "tool/call",
                "tool/result",
                "a user message joining the running turn of the caller's own continuable subagent",
                "a new background task continuing the caller's own continuable subagent",
            ],
            shipped_aliases: &[],
            note: "Registered once and shared by every agent: it acts only on the caller's own continuable children (those a `subagent` tool started with `run_in_background: true` over a provider with the continuation capability). While the child is working the message joins its current turn (`message delivered to running task <taskId>`; that task's answer has seen it); once it has finished, the message starts a new task that continues the child (`message started task <taskId> continuing subagent <subagent_id>`); either way the answer is collected with `task_output`. Otherwise it is refused with an error ending `the message was not delivered`: the id names a live child outside the control service's ownership (a running one-shot child), the child is still starting or settling, its provider cannot take messages mid-turn (only the in-process spawn and fork children can), or its turn ended just before the message arrived (send again to start the next task). A control service without a child store refuses every message before any task exists (`PERSISTENCE_UNAVAILABLE`). An unknown, foreign or descriptor-less id starts a task that fails.",
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
            writes: &[
                "tool/call",
                "tool/result",
                "cancellation of the caller's background tasks (task_kill only)",
            ],
            shipped_aliases: &[],
            note: "The three tools act only on the calling agent's own background tasks (another agent's task id is refused), so they are registered once and shared by every agent. A task finishing queues a completion notice for its owner (`background task <id> (<kind>: <label>) finished [status: …]. Read its output with task_output.`); a harness hands those to the owner's next model call by giving its `dsh_agent::AgentRuntime` the registry's notices (`with_notices`).",
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
            requires: &["the `dsh` binary (`dsh mcp`)", "dsh_mcp::McpToolServer"],
            writes: &[
                "tool/call",
                "tool/result",
                "child agent state through the spawn provider",
                "the MCP session's background tasks",
            ],
            shipped_aliases: &[],
            note: "What `dsh mcp` serves to an MCP host: its `tools/list` gives these names, descriptions and input schemas byte for byte. `subagent` runs over the spawn provider with `enableRunInBackground` and the continuation capability, so its description names `send_message`; `send_message` and the three task tools complete background mode. There is no `subagent_fork`: the calling agent's conversation lives in the MCP host, so a fork would inherit nothing. Each MCP session is one calling agent that owns its children and background tasks; another session cannot see them, and closing the session cancels and releases them all. MCP tools: `dsh run`, `dsh acp` and `dsh mcp` take `--mcp-server <name>=<command line>` (repeatable) and mount each tool of that server, for the parent and its children, as `mcp__<name>__<tool>` with the server's own description and input schema (`dsh mcp` lists them after these). A `toolFilter` names them by that full name in `allow` or `deny`, exactly like any other tool, and a filter naming a tool that is not mounted fails the call. A server that cannot start stops `dsh` with exit 2 before any model call.",
            mount: mount_dsh_mcp,
        },
    ]
}

/// The tools `dsh mcp` serves: `subagent` over a continuable spawn provider
/// with background runs, `send_message` and the task tools (the `dsh` crate's
/// MCP test checks that its `tools/list` equals this section).
fn mount_dsh_mcp(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let service = SubagentService::new();
    let provider = service.register_provider(std::sync::Arc::new(dsh_subagent_spawn::SpawnProvider::new()))?;
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
/// with every capability, so the tool shows its default surface. The catalog
/// only reads definitions; it never starts a child.
struct Describe;

impl SubagentProvider for Describe {
    fn name(&self) -> &str {
        "catalog"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, _request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async { Err(SubagentError::failed("the catalog provider starts no children")) })
    }
}

fn mount_subagent(tools: &ToolRegistry) -> Result<MountGuard, MountError> {
    let service = SubagentService::new();
    let provider = std::sync::Arc::new(Describe);
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
