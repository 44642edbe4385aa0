//! The tool's one argument type: what a call is read into, and (through
//! its derived schema) the parameters the model sees.

use dsh_tools::{ArgumentWording, Arguments};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::wording::{self, Wording};

/// The arguments of one `subagent` call. Property order is field order.
///
/// The descriptions here are the standalone wording with one-shot
/// background runs; [`arguments`] sets the mounted instance's own.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SubagentArgs {
    #[schemars(description = wording::DESCRIPTION_PARAMETER)]
    pub(crate) description: String,
    #[schemars(description = wording::STANDALONE_PROMPT)]
    pub(crate) prompt: String,
    #[schemars(description = wording::RUN_IN_BACKGROUND_ONE_SHOT)]
    pub(crate) run_in_background: Option<bool>,
}

/// The arguments of a tool instance with this wording, and with
/// `run_in_background` described by `run_in_background` (`None`: background
/// runs are disabled).
///
/// A disabled instance does not show the model `run_in_background`, but a
/// call that sends it is still checked and read, so a forced `true` is
/// refused in the tool's words.
pub(crate) fn arguments(wording: Wording, run_in_background: Option<&str>) -> Arguments<SubagentArgs> {
    let arguments = Arguments::new()
        .non_blank("description")
        .non_blank("prompt")
        .describe("prompt", wording.prompt_description());
    match run_in_background {
        Some(text) => arguments.describe("run_in_background", text),
        None => arguments.hide("run_in_background"),
    }
}

/// How `subagent` words its argument errors.
pub(crate) struct Words;

impl ArgumentWording for Words {
    fn not_object(&self, kind: &str) -> String {
        wording::arguments_not_object(kind)
    }

    fn missing(&self, field: &str) -> String {
        wording::argument_missing(field)
    }

    fn wrong_type(&self, field: &str, expected: &str, got: &str) -> String {
        wording::argument_wrong_type(field, expected, got)
    }

    fn empty(&self, field: &str) -> String {
        wording::argument_empty(field)
    }
}
