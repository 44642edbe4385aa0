//! Each tool's one argument type: what a call is read into, and (through
//! its derived schema) the parameters the model sees.

use std::time::Duration;

use dsh_tasks::wording;
use dsh_tools::{ArgumentWording, Arguments, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

/// How long `task_output` waits with `wait: true` and no `timeout_ms`.
pub const DEFAULT_WAIT_MS: u64 = 30_000;

/// The longest `timeout_ms` `task_output` accepts.
pub const MAX_WAIT_MS: u64 = 600_000;

/// `task_output`'s arguments. Property order is field order.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct TaskOutputArgs {
    #[schemars(description = wording::TASK_ID_PARAMETER)]
    pub(crate) task_id: String,
    #[schemars(description = wording::WAIT_PARAMETER)]
    #[serde(default)]
    pub(crate) wait: bool,
    /// Absent means [`DEFAULT_WAIT_MS`]; sent without `wait: true`, it is refused.
    #[schemars(description = wording::TIMEOUT_MS_PARAMETER, schema_with = "timeout_ms_schema")]
    #[schemars(extend("default" = DEFAULT_WAIT_MS))]
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// The character to read the output from; absent reads it whole (its
    /// head and tail when it is over the budget).
    #[schemars(description = wording::OFFSET_PARAMETER, schema_with = "offset_schema")]
    #[serde(default, skip_serializing_if = "Option::is_none")] // Optional, with no `default` shown.
    pub(crate) offset: Option<u64>,
}

/// A plain non-negative integer (no `format`, no `default` shown: absent
/// and `0` read differently).
fn offset_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "minimum": 0})
}

/// A plain bounded integer (no `format`). A field with its own schema
/// function is optional only with `#[serde(default)]`.
fn timeout_ms_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS})
}

impl TaskOutputArgs {
    /// How long to wait: `Some(limit)` with `wait: true`. A `timeout_ms`
    /// without `wait: true` is refused rather than silently ignored.
    pub(crate) fn wait(&self) -> Result<Option<Duration>, ToolError> {
        match (self.wait, self.timeout_ms) {
            (false, Some(_)) => Err(ToolError::invalid_arguments(wording::timeout_without_wait(
                wording::TASK_OUTPUT,
            ))),
            (false, None) => Ok(None),
            (true, limit) => Ok(Some(Duration::from_millis(limit.unwrap_or(DEFAULT_WAIT_MS)))),
        }
    }
}

/// `task_kill`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct TaskKillArgs {
    #[schemars(description = wording::TASK_ID_PARAMETER)]
    pub(crate) task_id: String,
    /// An empty reason counts as none.
    #[schemars(description = wording::REASON_PARAMETER, with = "String")]
    #[serde(default, skip_serializing_if = "Option::is_none")] // Optional, with no `default` shown.
    pub(crate) reason: Option<String>,
}

/// `task_list`'s arguments: none. `properties: {}` is spelled out, as
/// OpenAI-compatible endpoints expect for a tool without parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("properties" = {}))]
pub(crate) struct TaskListArgs {}

/// `task_output`'s checked arguments.
pub(crate) fn task_output_arguments() -> Arguments<TaskOutputArgs> {
    Arguments::new().non_blank("task_id")
}

/// `task_kill`'s checked arguments.
pub(crate) fn task_kill_arguments() -> Arguments<TaskKillArgs> {
    Arguments::new().non_blank("task_id")
}

/// How a task tool words its argument errors; holds the tool's name.
pub(crate) struct Words(pub(crate) &'static str);

impl ArgumentWording for Words {
    fn not_object(&self, kind: &str) -> String {
        wording::arguments_not_object(self.0, kind)
    }

    fn missing(&self, field: &str) -> String {
        wording::argument_missing(self.0, field)
    }

    fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String {
        wording::argument_wrong_type(self.0, field, expected, got)
    }

    fn empty(&self, field: &str) -> String {
        wording::argument_empty(self.0, field)
    }

    /// The only bounded count of the task tools is `timeout_ms`.
    fn too_large(&self, _field: &str, maximum: u64, got: u64) -> String {
        wording::timeout_too_long(self.0, maximum, got)
    }
}
