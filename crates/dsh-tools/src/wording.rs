//! Every text the tool layer itself shows a model, in one place.

/// A call whose token was cancelled before it reached its tool.
pub const ABORTED_BEFORE_DISPATCH: &str = "tool call aborted before dispatch";

/// A call to a name no tool holds.
pub fn unknown_tool(name: &str) -> String {
    format!("unknown tool \"{name}\"")
}

/// A tool that panicked during a call.
pub fn tool_panicked(name: &str, message: &str) -> String {
    format!("tool \"{name}\" panicked: {message}")
}

/// A panic whose payload is not text.
pub const NON_STRING_PANIC: &str = "<non-string panic payload>";

/// How every error result the model reads begins.
pub const ERROR_PREFIX: &str = "Error: ";

/// An error result as the model reads it.
pub fn error_result(message: &str) -> String {
    format!("{ERROR_PREFIX}{message}")
}
