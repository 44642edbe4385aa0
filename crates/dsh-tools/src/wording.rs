//! Every text the tool layer itself shows a model or a person, in one place:
//! the code calls these items and writes no sentence of its own.

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

// ---- argument checks (the parts every tool shares) ---------------------------

/// What a text argument must be.
pub const EXPECTED_STRING: &str = "a string";

/// What a flag argument must be.
pub const EXPECTED_BOOLEAN: &str = "a boolean";

/// What a count argument must be.
pub const EXPECTED_COUNT: &str = "a non-negative integer";

/// A count above its maximum, for a tool that words this no more precisely.
pub fn argument_too_large(field: &str, maximum: u64, got: u64) -> String {
    format!("argument \"{field}\" must be at most {maximum}, got {got}")
}

/// Arguments that passed the schema checks but still could not be read
/// (a property type the checks leave to deserialization).
pub fn arguments_unreadable(detail: &str) -> String {
    format!("the arguments could not be read: {detail}")
}

// ---- JSON kinds, as argument errors name what came --------------------------

/// A JSON `null`.
pub const KIND_NULL: &str = "null";

/// A JSON number.
pub const KIND_NUMBER: &str = "a number";

/// A JSON array.
pub const KIND_ARRAY: &str = "an array";

/// A JSON object.
pub const KIND_OBJECT: &str = "an object";

// ---- registry errors ----------------------------------------------------------

/// Another reservation or registration already holds the name.
pub fn duplicate_name(name: &str) -> String {
    format!("a tool named \"{name}\" is already registered")
}

/// A tool mounted into a reservation held for another name.
pub fn name_mismatch(tool: &str, reserved: &str) -> String {
    format!("tool \"{tool}\" cannot be mounted under the name reserved as \"{reserved}\"")
}

/// The reservation already has a tool mounted.
pub fn already_mounted(name: &str) -> String {
    format!("a tool is already mounted under \"{name}\"")
}

/// An empty tool name.
pub const EMPTY_NAME: &str = "a tool name must not be empty";

// ---- result budgets and cuts (see `budget`) ----------------------------------

/// The one refusal of a result limit, however it was written: not a
/// whole number of tokens, or too few to hold a notice and any text.
pub fn result_limit_refused(written: &dyn std::fmt::Display, minimum: u64, default: u64) -> String {
    format!(
        "a result limit must be a whole number of tokens, at least {minimum}: room for a notice and some text at each end (leave it out for the default of {default}); got {written}"
    )
}

/// The exact call that reads a kept text from `offset`:
/// `task_output {"task_id": "subagent-7", "offset": 16000}`.
pub fn paged_read_call(tool: &str, task_id: &str, offset: u64) -> String {
    let task_id = serde_json::Value::from(task_id);
    format!("{tool} {{\"task_id\": {task_id}, \"offset\": {offset}}}")
}

/// The notice between the head and the tail of a cut text: what was shown,
/// of how much, and either the call that reads what was left out
/// ([`paged_read_call`] from the end of the head) or that it is not kept.
pub fn cut_notice(head: u64, tail: u64, total: u64, read_call: Option<&str>) -> String {
    let shown = head + tail;
    let omitted = total.saturating_sub(shown);
    let rest = match read_call {
        Some(call) => format!("to read the {omitted} in between, call {call}"),
        None => format!("the {omitted} in between are not kept"),
    };
    format!("\n\n[output cut: {shown} of {total} characters shown, the first {head} and the last {tail}; {rest}]\n\n")
}

/// The notice after a page that does not reach the end of its text:
/// `read_call` is the [`paged_read_call`] from the page's end.
pub fn page_notice(start: u64, end: u64, total: u64, read_call: &str) -> String {
    format!("\n\n[characters {start} to {end} of {total} shown; to read on, call {read_call}]")
}

/// The notice that stands alone for an output dropped to fit: characters
/// `start` to `end` of `total` are not shown, and either the call that
/// reads them ([`paged_read_call`] from `start`) or that they are not kept.
pub fn dropped_notice(start: u64, end: u64, total: u64, read_call: Option<&str>) -> String {
    let rest = match read_call {
        Some(call) => format!("; to read them, call {call}"),
        None => ", and they are not kept".to_owned(),
    };
    format!("[output dropped: characters {start} to {end} of {total} did not fit the room left{rest}]")
}
