//! The texts of the subagent seam, in one place: the model reads the errors
//! through a tool's `Error: <text>`, and people read the rest in logs.

use std::fmt::Display;

/// No provider of that name is registered.
pub(crate) fn no_provider(name: &str) -> String {
    format!("no subagent provider registered for \"{name}\"")
}

/// A provider of that name is already registered.
pub(crate) fn duplicate_provider(name: &str) -> String {
    format!("a subagent provider named \"{name}\" is already registered")
}

/// The request sets a field the provider cannot honour.
pub(crate) fn unsupported_capability(provider: &str, capability: impl Display) -> String {
    format!("subagent provider \"{provider}\" does not support the \"{capability}\" capability")
}

/// `maxDepth` is not a non-negative safe integer.
pub(crate) const INVALID_MAX_DEPTH: &str = "subagent maxDepth must be a non-negative safe integer";

/// The output schema is not an object-rooted JSON schema.
pub(crate) const INVALID_OUTPUT_SCHEMA: &str =
    "subagent outputSchema must be a JSON Schema object whose root has \"type\": \"object\"";

/// The parent's depth is not a non-negative safe integer.
pub(crate) const INVALID_AGENT_DEPTH: &str = "agent subagentDepth must be a non-negative safe integer";

/// The child's depth would leave the safe-integer range.
pub(crate) const DEPTH_OVERFLOW: &str = "subagent child depth exceeds the safe-integer range";

/// The child would be deeper than `maxDepth` allows.
pub(crate) fn depth_exceeded(attempted: u64, max: u64) -> String {
    format!("subagent depth {attempted} exceeds maxDepth {max}")
}

/// A start failed and releasing what it had created failed too.
pub(crate) fn rollback_failed(start: impl Display, rollback: impl Display) -> String {
    format!("{start}; rollback failed: {rollback}")
}

/// A run's outcome was read before it settled (never expected).
pub(crate) const RUN_NOT_SETTLED: &str = "subagent run result was not settled";

/// A run's outcome was read after a holder had moved it out (never expected).
pub(crate) const RESULT_TAKEN: &str = "subagent run result was already taken";

/// A run's result future panicked; the panic itself is resumed once.
pub(crate) const RUN_PANICKED: &str = "subagent run result panicked";

/// A run's release outcome was missing after it ran (never expected).
pub(crate) const RELEASE_LOST: &str = "subagent run release was lost";

/// Appended where a diagnostic was cut to its byte bound.
pub(crate) const TRUNCATION_MARK: &str = "\n[diagnostic truncated]";

/// A persisted descriptor is not a JSON object.
pub(crate) const DESCRIPTOR_NOT_OBJECT: &str = "persisted subagent descriptor payload must be an object";

/// A persisted descriptor's version is missing or not a number.
pub(crate) const DESCRIPTOR_VERSION_NOT_NUMBER: &str = "persisted subagent descriptor version must be a number";

/// A persisted descriptor carries a field the contract does not know.
pub(crate) fn descriptor_unknown_field(unknown: &str) -> String {
    format!("persisted subagent descriptor payload has unknown field \"{unknown}\"")
}

/// A persisted descriptor's provider is missing or not a string.
pub(crate) const DESCRIPTOR_PROVIDER_NOT_STRING: &str = "persisted subagent descriptor provider must be a string";

/// A persisted descriptor's optional text field is not a string.
pub(crate) fn descriptor_field_not_string(key: &str) -> String {
    format!("persisted subagent descriptor {key} must be a string")
}

/// A persisted descriptor passed the checks but still did not deserialize.
pub(crate) fn descriptor_malformed(error: impl Display) -> String {
    format!("persisted subagent descriptor is malformed: {error}")
}

/// A persisted descriptor's tool filter is not a JSON object.
pub(crate) const FILTER_NOT_OBJECT: &str = "persisted subagent descriptor toolFilter must be an object";

/// A persisted descriptor's tool filter carries a field other than `allow` and `deny`.
pub(crate) fn filter_unknown_field(unknown: &str) -> String {
    format!("persisted subagent descriptor toolFilter has unknown field \"{unknown}\"")
}

/// A persisted descriptor's tool filter list is not an array of strings.
pub(crate) fn filter_list_not_strings(key: &str) -> String {
    format!("persisted subagent descriptor toolFilter.{key} must be an array of strings")
}

/// A persisted descriptor's tool filter declares neither list.
pub(crate) const FILTER_EMPTY: &str = "persisted subagent descriptor toolFilter must declare allow and/or deny";

// The refusals of a bounded delegation tree. Each says that nothing was
// started, gives the numbers, and tells the model what to do instead.

/// The tree's queue of calls waiting for a slot is full.
pub(crate) fn queue_full(waiting: usize, max_concurrent: usize) -> String {
    format!(
        "subagent not started: this delegation tree's queue is full (max_concurrent = {max_concurrent} running, max_queued = {waiting} waiting). Wait for the children you have started and collect their results before delegating more; do not retry at once."
    )
}

/// The tree has started as many children as it may over its life.
pub(crate) fn child_limit(max_children: usize) -> String {
    format!(
        "subagent not started: this delegation tree has started all the children it may (max_children = {max_children}). Collect the results of the children still running and finish the task with what you have; do not retry."
    )
}

/// A budget the child would spend from is spent.
pub(crate) fn token_budget_spent(scope: crate::BudgetScope, spent: u64, limit: u64) -> String {
    let whose = match scope {
        crate::BudgetScope::Tree => "this delegation tree's token budget",
        crate::BudgetScope::Child => "your own token budget",
    };
    format!(
        "subagent not started: {whose} is spent ({spent} of {limit} tokens). Finish the task with the results you have; do not retry."
    )
}

/// The tree's money budget is spent. Amounts are billionths of a unit,
/// shown in units with as many decimals as they need.
pub(crate) fn cost_budget_spent(spent: u64, limit: u64, estimated: bool) -> String {
    let estimated = if estimated { ", partly estimated" } else { "" };
    format!(
        "subagent not started: this delegation tree's cost budget is spent ({} of {}{estimated}). Finish the task with the results you have; do not retry.",
        crate::money::amount_text(spent),
        crate::money::amount_text(limit)
    )
}

/// What a bounded setting must be (serde's `expecting`; the refusals
/// themselves name what was written).
pub(crate) const EXPECTING_WHOLE_NUMBER: &str = "a whole number";

/// A list given where a bounded setting was expected, as its refusal names it.
pub(crate) const WRITTEN_LIST: &str = "a list";

/// A table (a JSON object) given where a bounded setting was expected, as
/// its refusal names it.
pub(crate) const WRITTEN_TABLE: &str = "a table";

/// The one refusal of a context window, however it was written.
pub(crate) fn context_window_refused(written: &dyn Display, minimum: u64) -> String {
    format!("a context window must be a whole number of tokens, at least {minimum}, such as 128000; got {written}")
}

/// The one refusal of a duration (`DurationSetting`), however it was
/// written.
pub(crate) fn duration_refused(written: &str) -> String {
    format!(
        "{written:?} is not a duration: write a positive whole number and a unit, such as \"500ms\", \"90s\", \"10min\" or \"2h\""
    )
}

/// What a duration may be, as a reader of a configuration file says it
/// expected.
pub(crate) const EXPECTING_DURATION: &str = r#"a duration as text, such as "90s" or "10min""#;

/// The one refusal of a token limit, however it was written.
pub(crate) fn token_limit_refused(written: &dyn Display, maximum: u64) -> String {
    format!(
        "a token limit must be a whole number of tokens, from 1 to {maximum} (leave it out for no token limit); got {written}"
    )
}

/// The one refusal of a count of a tree's children (`max_concurrent`,
/// `max_children`), however it was written.
pub(crate) fn child_count_refused(written: &dyn Display) -> String {
    format!(
        "a count of children must be a whole number, at least 1 (a tree that may run or start no child could only refuse); got {written}"
    )
}

/// The one refusal of the bound of a tree's queue (`max_queued`), however
/// it was written.
pub(crate) fn queue_limit_refused(written: &dyn Display) -> String {
    format!(
        "a queue limit must be a whole number of waiting calls, 0 or more (at 0, a call that finds no free slot is refused at once); got {written}"
    )
}

/// What a cost limit is read as, when serde names it.
pub(crate) const EXPECTING_AMOUNT: &str = "an amount of money";

/// The one refusal of a cost limit, however it was written.
pub(crate) fn cost_limit_refused(written: &dyn Display, minimum: &dyn Display, maximum: &dyn Display) -> String {
    format!(
        "a cost limit must be an amount from {minimum} to {maximum}, in the unit the models' prices are given in, such as 2.5 (leave it out for no cost limit); got {written}"
    )
}

/// A provider whose children cannot be recovered after an interruption.
pub(crate) fn not_recoverable(child: &str) -> String {
    format!("subagent {child} cannot be recovered: its provider cannot continue an interrupted child")
}
