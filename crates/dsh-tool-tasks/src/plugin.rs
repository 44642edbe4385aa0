//! Mounting the three task tools over one registry.

use std::sync::Arc;

use dsh_tasks::TaskRegistry;
use dsh_tools::{MountedTool, NameReservation, RegistryError, ResultLimit, Tool, ToolRegistry};

use crate::tools::{TaskKillTool, TaskListTool, TaskOutputTool};

/// The loaded task tools: `task_output`, `task_kill` and `task_list`, all
/// over one [`TaskRegistry`].
///
/// [`TaskToolsPlugin::apply`] claims the three names first and mounts only
/// when all three are free, so a clash leaves nothing behind. Dropping the
/// plugin (or [`TaskToolsPlugin::dispose`]) unmounts the tools and frees the
/// names; the tasks themselves are untouched.
pub struct TaskToolsPlugin {
    // Field order is drop order: unmount, then free the names.
    _mounted: Vec<MountedTool>,
    _reservations: Vec<NameReservation>,
}

impl TaskToolsPlugin {
    /// Registers the three tools in `tools`, each acting on `tasks`, with
    /// `task_output` within the default result budget
    /// ([`ResultLimit::DEFAULT`]).
    ///
    /// Fails with [`RegistryError::DuplicateName`] when one of the names is
    /// already taken; then none is registered.
    pub fn apply(tasks: &TaskRegistry, tools: &ToolRegistry) -> Result<Self, RegistryError> {
        Self::apply_within(tasks, tools, ResultLimit::DEFAULT)
    }

    /// [`TaskToolsPlugin::apply`], with `task_output` showing at most
    /// `budget` of a task's output per call: a longer output reads as its
    /// head and tail, and `offset` pages through the rest.
    pub fn apply_within(
        tasks: &TaskRegistry,
        tools: &ToolRegistry,
        budget: ResultLimit,
    ) -> Result<Self, RegistryError> {
        let built: [Arc<dyn Tool>; 3] = [
            Arc::new(TaskOutputTool::new(tasks.clone(), budget)),
            Arc::new(TaskKillTool::new(tasks.clone())),
            Arc::new(TaskListTool::new(tasks.clone())),
        ];
        let reservations = built
            .iter()
            .map(|tool| tools.reserve(tool.name()))
            .collect::<Result<Vec<_>, _>>()?;
        let mounted = reservations
            .iter()
            .zip(built)
            .map(|(reservation, tool)| reservation.mount(tool))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            _mounted: mounted,
            _reservations: reservations,
        })
    }

    /// The names this plugin registers, in registration order.
    pub fn tool_names(&self) -> [&'static str; 3] {
        crate::TOOL_NAMES
    }

    /// Unregisters the tools now (the same as dropping the plugin).
    pub fn dispose(self) {}
}

impl std::fmt::Debug for TaskToolsPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskToolsPlugin")
            .field("tools", &self.tool_names())
            .finish()
    }
}
