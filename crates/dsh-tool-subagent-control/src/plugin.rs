//! Mounting `send_message`.

use std::sync::Arc;

use dsh_subagent::SubagentControl;
use dsh_tools::{MountedTool, NameReservation, RegistryError, ToolRegistry};

use crate::tool::SendMessageTool;

/// The loaded control tools: `send_message`, registered once and shared by
/// every agent (it acts only on the caller's own children).
///
/// Dropping the plugin (or [`SubagentControlPlugin::dispose`]) unmounts the
/// tool and frees its name; children and their tasks are untouched.
pub struct SubagentControlPlugin {
    // Field order is drop order: unmount, then free the name.
    _mounted: MountedTool,
    _reservation: NameReservation,
}

impl SubagentControlPlugin {
    /// Registers `send_message` in `tools`, over `control`.
    ///
    /// Fails with [`RegistryError::DuplicateName`] when the name is taken.
    pub fn apply(control: &SubagentControl, tools: &ToolRegistry) -> Result<Self, RegistryError> {
        let reservation = tools.reserve(crate::wording::SEND_MESSAGE)?;
        let mounted = reservation.mount(Arc::new(SendMessageTool::new(control.clone())))?;
        Ok(Self {
            _mounted: mounted,
            _reservation: reservation,
        })
    }

    /// The names this plugin registers.
    pub fn tool_names(&self) -> [&'static str; 1] {
        crate::TOOL_NAMES
    }

    /// Unregisters the tool now (the same as dropping the plugin).
    pub fn dispose(self) {}
}

impl std::fmt::Debug for SubagentControlPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentControlPlugin")
            .field("tools", &self.tool_names())
            .finish()
    }
}
