//! Every model-facing string of `send_message`, in one place (docs/contract.md,
//! "send_message"). Pinned by the snapshot tests in `tests/send_message.rs`.

/// The tool's name.
pub const SEND_MESSAGE: &str = dsh_subagent::wording::SEND_MESSAGE_TOOL;

/// The tool description (verbatim).
pub const DESCRIPTION: &str = "Send a follow-up message to a background subagent by its subagent id. If it is still working, the message joins its current task; if it has finished, this starts a new task that continues the same subagent conversation. Either way the response arrives through the returned task id — collect it with `task_output`. A failure means the message was NOT delivered.";

/// The `subagent_id` parameter (verbatim).
pub const SUBAGENT_ID_PARAMETER: &str = "The subagent id returned when the background subagent was started.";

/// The `message` parameter (verbatim).
pub const MESSAGE_PARAMETER: &str = "The message to deliver to the subagent.";

/// The call has no calling agent (verbatim).
pub const NO_CALLING_AGENT: &str = "send_message requires a calling agent (exec.agent was undefined)";

/// The `steered` rendering (verbatim): the message joined the
/// running activation, whose task carries its effect.
pub fn steered(task_id: &str) -> String {
    format!("message delivered to running task {task_id}")
}

/// The `started` rendering (verbatim; uses the argument id).
pub fn started(task_id: &str, subagent_id: &str) -> String {
    format!("message started task {task_id} continuing subagent {subagent_id}")
}

/// How `send_message` words its argument errors: each says the message
/// was not delivered.
#[derive(Debug)]
pub struct ArgumentErrors;

impl dsh_tools::ArgumentWording for ArgumentErrors {
    fn not_object(&self, kind: &str) -> String {
        format!(
            "send_message arguments must be a JSON object with \"subagent_id\" and \"message\" strings, got {kind}; the message was not delivered"
        )
    }

    fn missing(&self, field: &str) -> String {
        format!("send_message argument \"{field}\" is required; the message was not delivered")
    }

    fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String {
        format!("send_message argument \"{field}\" must be {expected}, got {got}; the message was not delivered")
    }

    fn empty(&self, field: &str) -> String {
        format!("send_message argument \"{field}\" must not be empty; the message was not delivered")
    }
}
