//! The `send_message` tool.

use dsh_subagent::{Route, SubagentControl};
use dsh_tools::{Arguments, Tool, ToolError, ToolExecution, ToolOutput};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::wording;

/// `send_message`'s one argument type: what a call is read into, and
/// (through its derived schema) the parameters the model sees. Property
/// order is field order.
#[derive(Debug, Deserialize, JsonSchema)]
struct SendMessageArgs {
    #[schemars(description = wording::SUBAGENT_ID_PARAMETER)]
    subagent_id: String,
    #[schemars(description = wording::MESSAGE_PARAMETER)]
    message: String,
}

fn arguments() -> Arguments<SendMessageArgs> {
    Arguments::new().non_blank("subagent_id")
}

/// `send_message`: routes one message through the control service.
pub(crate) struct SendMessageTool {
    control: SubagentControl,
    arguments: Arguments<SendMessageArgs>,
}

impl SendMessageTool {
    pub(crate) fn new(control: SubagentControl) -> Self {
        Self {
            control,
            arguments: arguments(),
        }
    }

    /// Synchronous: the message joins the running task, starts a new one,
    /// or is refused.
    fn send(&self, args: Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        let parent = exec
            .agent()
            .ok_or_else(|| ToolError::new(wording::NO_CALLING_AGENT).with_code(dsh_tools::ErrorCode::NoCallingAgent))?;
        let args = self.arguments.parse(args, &wording::ArgumentErrors)?;
        let subagent_id = args.subagent_id.trim();
        let delivery = self
            .control
            .send_message(parent, subagent_id, &args.message)
            .map_err(ToolError::from)?;
        Ok(ToolOutput::text(match delivery.route {
            Route::Steered => wording::steered(&delivery.task_id),
            Route::Started => wording::started(&delivery.task_id, subagent_id),
        }))
    }
}

impl Tool for SendMessageTool {
    fn name(&self) -> &str {
        wording::SEND_MESSAGE
    }

    fn description(&self) -> &str {
        wording::DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        self.arguments.parameters()
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.send(args, &exec)))
    }
}
