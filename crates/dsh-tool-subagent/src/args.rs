//! The tool's arguments: the schema the model sees, and strict parsing.

use dsh_tools::ToolError;
use schemars::JsonSchema;
use serde_json::Value;

use crate::wording::{self, Wording};
use dsh_tools::json_kind;

/// The arguments the model sends. Property order is field order.
#[derive(JsonSchema)]
#[allow(dead_code)] // Read through `DelegationArgs::parse`; the derive is the schema.
struct SubagentArgs {
    #[schemars(description = wording::DESCRIPTION_PARAMETER)]
    description: String,
    /// Replaced per wording by [`parameters`].
    prompt: String,
}

/// The arguments with background runs enabled: `run_in_background` is appended.
#[derive(JsonSchema)]
#[allow(dead_code)] // Read through `DelegationArgs::parse`; the derive is the schema.
struct BackgroundSubagentArgs {
    #[schemars(description = wording::DESCRIPTION_PARAMETER)]
    description: String,
    /// Replaced per wording by [`parameters`].
    prompt: String,
    #[schemars(description = wording::RUN_IN_BACKGROUND_ONE_SHOT)]
    run_in_background: Option<bool>,
}

/// The parameter schema the model sees: `{description, prompt}`, both
/// required, plus an optional `run_in_background` when background runs are
/// enabled; the `prompt` text follows the wording.
pub fn parameters(wording: Wording, background: bool) -> Value {
    let mut schema = if background {
        dsh_tools::parameters_schema::<BackgroundSubagentArgs>()
    } else {
        dsh_tools::parameters_schema::<SubagentArgs>()
    };
    if let Some(prompt) = schema.pointer_mut("/properties/prompt").and_then(Value::as_object_mut) {
        prompt.insert("description".to_owned(), Value::from(wording.prompt_description()));
    }
    schema
}

/// Replaces the `run_in_background` description (the continuable route's text).
pub(crate) fn describe_run_in_background(schema: &mut Value, text: &str) {
    if let Some(property) = schema
        .pointer_mut("/properties/run_in_background")
        .and_then(Value::as_object_mut)
    {
        property.insert("description".to_owned(), Value::from(text));
    }
}

/// Parsed, checked arguments of one call.
#[derive(Debug)]
pub(crate) struct DelegationArgs {
    pub(crate) description: String,
    pub(crate) prompt: String,
    pub(crate) run_in_background: Option<bool>,
}

impl DelegationArgs {
    /// Parses the model's arguments, moving the strings out of them.
    /// Undeclared keys are ignored, except `run_in_background`, which must be
    /// a boolean when present.
    pub(crate) fn parse(args: Value) -> Result<Self, ToolError> {
        let Value::Object(mut object) = args else {
            return Err(ToolError::invalid_arguments(wording::arguments_not_object(json_kind(
                &args,
            ))));
        };
        // One pass over the entries instead of a hashed lookup per field:
        // the object is tiny, and SipHash dominated the lookups.
        let (mut description, mut prompt, mut run_in_background) = (None, None, None);
        for (key, value) in &mut object {
            match key.as_str() {
                "description" => description = Some(value),
                "prompt" => prompt = Some(value),
                "run_in_background" => run_in_background = Some(value),
                _ => {}
            }
        }
        let text = |field: &str, value: Option<&mut Value>| -> Result<String, ToolError> {
            match value {
                None => Err(ToolError::invalid_arguments(wording::argument_missing(field))),
                Some(Value::String(text)) if text.trim().is_empty() => {
                    Err(ToolError::invalid_arguments(wording::argument_empty(field)))
                }
                Some(Value::String(text)) => Ok(std::mem::take(text)),
                Some(other) => Err(ToolError::invalid_arguments(wording::argument_wrong_type(
                    field,
                    "a string",
                    json_kind(other),
                ))),
            }
        };
        let description = text("description", description)?;
        let prompt = text("prompt", prompt)?;
        let run_in_background = match run_in_background {
            None => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(other) => {
                return Err(ToolError::invalid_arguments(wording::argument_wrong_type(
                    "run_in_background",
                    "a boolean",
                    json_kind(other),
                )));
            }
        };
        Ok(Self {
            description,
            prompt,
            run_in_background,
        })
    }
}
