//! The continuable background route (docs/contract.md, "Background tasks"
//! 07-23): over a provider that can continue its children, a background
//! call starts a durable child through the control service and returns its
//! subagent id and the task id of its first activation.

use dsh_subagent::SubagentControl;
use dsh_subagent_api::StartRequest;
use dsh_tools::{ToolError, ToolOutput, ToolRegistry};

use crate::{ErrorCode, wording};

/// Starts the continuable child, or refuses before anything starts: without
/// a control service, without `send_message` among the caller's tools (the
/// description advertises it), or when the service refuses the start.
pub(crate) fn start(
    control: Option<&SubagentControl>,
    tools: &ToolRegistry,
    provider: &str,
    label: String,
    request: StartRequest,
) -> Result<ToolOutput, ToolError> {
    let control =
        control.ok_or_else(|| ToolError::new(wording::CONTROL_UNAVAILABLE).with_code(ErrorCode::ControlUnavailable))?;
    if tools.get(dsh_subagent::wording::SEND_MESSAGE_TOOL).is_none() {
        return Err(ToolError::new(wording::SEND_MESSAGE_UNAVAILABLE).with_code(ErrorCode::ControlUnavailable));
    }
    if tools.get(dsh_tasks::wording::TASK_OUTPUT).is_none() {
        return Err(ToolError::new(wording::NO_CONTROL_SURFACE).with_code(ErrorCode::TasksUnavailable));
    }
    let started = control
        .start_continuable(provider, label, request)
        .map_err(ToolError::from)?;
    Ok(ToolOutput::text(wording::started_continuable(
        &started.child_id,
        &started.task_id,
    )))
}
