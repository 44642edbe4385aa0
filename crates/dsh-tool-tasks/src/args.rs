//! The tools' arguments: the schemas the model sees, and strict parsing.

use std::time::Duration;

use dsh_tasks::wording;
use dsh_tools::{ToolError, json_kind};
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// How long `task_output` waits with `wait: true` and no `timeout_ms`.
pub const DEFAULT_WAIT_MS: u64 = 30_000;

/// The longest `timeout_ms` `task_output` accepts.
pub const MAX_WAIT_MS: u64 = 600_000;

/// `task_output`'s arguments. Property order is field order.
#[derive(JsonSchema)]
#[allow(dead_code)] // Read through `OutputArgs::parse`; the derive is the schema.
struct TaskOutputArgs {
    #[schemars(description = wording::TASK_ID_PARAMETER)]
    task_id: String,
    #[schemars(description = wording::WAIT_PARAMETER)]
    #[serde(default)]
    wait: bool,
    #[schemars(description = wording::TIMEOUT_MS_PARAMETER, schema_with = "timeout_ms_schema")]
    #[serde(default = "default_wait_ms")]
    timeout_ms: u64,
}

fn default_wait_ms() -> u64 {
    DEFAULT_WAIT_MS
}

/// A plain bounded integer (no `format`).
fn timeout_ms_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS})
}

/// `task_kill`'s arguments.
#[derive(JsonSchema)]
#[allow(dead_code)] // Read through `KillArgs::parse`; the derive is the schema.
struct TaskKillArgs {
    #[schemars(description = wording::TASK_ID_PARAMETER)]
    task_id: String,
    #[schemars(description = wording::REASON_PARAMETER)]
    #[schemars(with = "String")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// `task_list`'s arguments: none. `properties: {}` is spelled out, as
/// OpenAI-compatible endpoints expect for a tool without parameters.
#[derive(JsonSchema)]
#[schemars(extend("properties" = {}))]
struct TaskListArgs {}

/// The parameter schema of `task_output`.
pub fn task_output_parameters() -> Value {
    dsh_tools::parameters_schema::<TaskOutputArgs>()
}

/// The parameter schema of `task_kill`.
pub fn task_kill_parameters() -> Value {
    dsh_tools::parameters_schema::<TaskKillArgs>()
}

/// The parameter schema of `task_list`.
pub fn task_list_parameters() -> Value {
    dsh_tools::parameters_schema::<TaskListArgs>()
}

/// Parsed `task_output` arguments.
#[derive(Debug)]
pub(crate) struct OutputArgs {
    pub(crate) task_id: String,
    /// `Some(limit)` with `wait: true`.
    pub(crate) wait: Option<Duration>,
}

/// Parsed `task_kill` arguments.
#[derive(Debug)]
pub(crate) struct KillArgs {
    pub(crate) task_id: String,
    pub(crate) reason: Option<String>,
}

impl OutputArgs {
    /// Parses `task_output`'s arguments. Undeclared keys are ignored.
    pub(crate) fn parse(args: &Value) -> Result<Self, ToolError> {
        let tool = wording::TASK_OUTPUT;
        let object = object(tool, args)?;
        let task_id = task_id(tool, object)?;
        let wait = match object.get("wait") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(other) => return Err(wrong_type(tool, "wait", "a boolean", other)),
        };
        let timeout_ms = match object.get("timeout_ms") {
            None => None,
            Some(Value::Number(number)) => match number.as_u64() {
                Some(ms) if ms > MAX_WAIT_MS => {
                    return Err(ToolError::invalid_arguments(wording::timeout_too_long(
                        tool,
                        MAX_WAIT_MS,
                        ms,
                    )));
                }
                Some(ms) => Some(ms),
                None => {
                    return Err(ToolError::invalid_arguments(wording::argument_wrong_type(
                        tool,
                        "timeout_ms",
                        "a non-negative integer",
                        &number.to_string(),
                    )));
                }
            },
            Some(other) => return Err(wrong_type(tool, "timeout_ms", "a non-negative integer", other)),
        };
        if timeout_ms.is_some() && !wait {
            return Err(ToolError::invalid_arguments(wording::timeout_without_wait(tool)));
        }
        let wait = wait.then(|| Duration::from_millis(timeout_ms.unwrap_or(DEFAULT_WAIT_MS)));
        Ok(Self { task_id, wait })
    }
}

impl KillArgs {
    /// Parses `task_kill`'s arguments. Undeclared keys are ignored; an empty
    /// `reason` counts as none.
    pub(crate) fn parse(args: &Value) -> Result<Self, ToolError> {
        let tool = wording::TASK_KILL;
        let object = object(tool, args)?;
        let task_id = task_id(tool, object)?;
        let reason = match object.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(reason)) if reason.trim().is_empty() => None,
            Some(Value::String(reason)) => Some(reason.clone()),
            Some(other) => return Err(wrong_type(tool, "reason", "a string", other)),
        };
        Ok(Self { task_id, reason })
    }
}

/// Checks `task_list`'s arguments: any object (keys are ignored).
pub(crate) fn parse_list(args: &Value) -> Result<(), ToolError> {
    object(wording::TASK_LIST, args).map(|_| ())
}

fn object<'a>(tool: &str, args: &'a Value) -> Result<&'a Map<String, Value>, ToolError> {
    args.as_object()
        .ok_or_else(|| ToolError::invalid_arguments(wording::arguments_not_object(tool, json_kind(args))))
}

fn task_id(tool: &str, object: &Map<String, Value>) -> Result<String, ToolError> {
    match object.get("task_id") {
        None => Err(ToolError::invalid_arguments(wording::argument_missing(tool, "task_id"))),
        Some(Value::String(id)) if id.trim().is_empty() => {
            Err(ToolError::invalid_arguments(wording::argument_empty(tool, "task_id")))
        }
        Some(Value::String(id)) => Ok(id.trim().to_owned()),
        Some(other) => Err(wrong_type(tool, "task_id", "a string", other)),
    }
}

fn wrong_type(tool: &str, field: &str, expected: &str, got: &Value) -> ToolError {
    ToolError::invalid_arguments(wording::argument_wrong_type(tool, field, expected, json_kind(got)))
}
