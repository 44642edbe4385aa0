//! The `send_message` tool.

use dsh_subagent::{Route, SubagentControl};
use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, json_kind};
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::wording;

/// `send_message`'s arguments. Property order is field order.
#[derive(JsonSchema)]
#[allow(dead_code)] // Read through `parse`; the derive is the schema.
struct SendMessageArgs {
    #[schemars(description = wording::SUBAGENT_ID_PARAMETER)]
    subagent_id: String,
    #[schemars(description = wording::MESSAGE_PARAMETER)]
    message: String,
}

/// The parameter schema of `send_message` (docs/contract.md, "send_message").
pub fn send_message_parameters() -> Value {
    dsh_tools::parameters_schema::<SendMessageArgs>()
}

/// `send_message`: routes one message through the control service.
pub(crate) struct SendMessageTool {
    control: SubagentControl,
    parameters: Value,
}

impl SendMessageTool {
    pub(crate) fn new(control: SubagentControl) -> Self {
        Self {
            control,
            parameters: send_message_parameters(),
        }
    }

    /// Synchronous: the message joins the running task, starts a new one,
    /// or is refused.
    fn send(&self, args: &Value, exec: &ToolExecution) -> Result<ToolOutput, ToolError> {
        let parent = exec
            .agent()
            .ok_or_else(|| ToolError::new(wording::NO_CALLING_AGENT).with_code(dsh_tools::ErrorCode::NoCallingAgent))?;
        let (subagent_id, message) = parse(args)?;
        let delivery = self
            .control
            .send_message(parent, subagent_id, message)
            .map_err(ToolError::from)?;
        Ok(ToolOutput::text(match delivery.route {
            Route::Steered => wording::steered(&delivery.task_id),
            Route::Started => wording::started(&delivery.task_id, subagent_id),
        }))
    }
}

fn parse(args: &Value) -> Result<(&str, &str), ToolError> {
    let object: &Map<String, Value> = args
        .as_object()
        .ok_or_else(|| ToolError::invalid_arguments(wording::arguments_not_object(json_kind(args))))?;
    let field = |name: &str| match object.get(name) {
        None => Err(ToolError::invalid_arguments(wording::argument_missing(name))),
        Some(Value::String(text)) => Ok(text.as_str()),
        Some(other) => Err(ToolError::invalid_arguments(wording::argument_wrong_type(
            name,
            json_kind(other),
        ))),
    };
    let subagent_id = field("subagent_id")?;
    let message = field("message")?;
    if subagent_id.trim().is_empty() {
        return Err(ToolError::invalid_arguments(wording::EMPTY_SUBAGENT_ID.to_owned()));
    }
    Ok((subagent_id.trim(), message))
}

impl Tool for SendMessageTool {
    fn name(&self) -> &str {
        wording::SEND_MESSAGE
    }

    fn description(&self) -> &str {
        wording::DESCRIPTION
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(self.send(&args, &exec)))
    }
}
