//! The tool trait and the values that flow through one call.

use std::borrow::Cow;
use std::fmt;

use crate::CancellationToken;
use futures::future::BoxFuture;
use serde_json::Value;

use dsh_subagent_api::SubagentError;

use crate::budget::{self, Cut, Excerpt, PagedRead};
use crate::{AgentRef, ErrorCode, wording};

/// A model-facing tool: a name, a description, a JSON-schema for its
/// arguments, and an async `execute`.
///
/// `execute` returns `Ok` for a success the model should read as a result and
/// `Err` for a failure; [`ToolResult::from_outcome`] renders either into what
/// the model sees (a failure reads `Error: <message>`). Implementations must
/// not panic on bad arguments: return a [`ToolError`] that names the field.
pub trait Tool: Send + Sync + 'static {
    /// The unique, model-visible name.
    fn name(&self) -> &str;

    /// The model-visible description.
    fn description(&self) -> &str;

    /// The JSON schema of the arguments; its root is `"type": "object"`.
    fn parameters(&self) -> &Value;

    /// Runs one call. `exec` carries the cancellation token and the caller.
    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>>;
}

/// The context of one tool call: its cancellation token and its caller.
///
/// The token is always present: a harness with nothing to cancel passes a
/// fresh one that never fires.
#[derive(Clone, Debug)]
pub struct ToolExecution {
    cancel: CancellationToken,
    agent: Option<AgentRef>,
    /// Boxed, not a `String`: every call in flight carries this context
    /// (twice, as the harness's and as the registry's), so it is kept small.
    call_id: Option<Box<str>>,
}

impl ToolExecution {
    /// A call with the given cancellation token and no calling agent.
    pub fn new(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            agent: None,
            call_id: None,
        }
    }

    /// Sets the id the model gave this call (recorded on its `execute_tool` span).
    #[must_use]
    pub fn with_call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into().into_boxed_str());
        self
    }

    /// The id the model gave this call, when the harness supplied one.
    pub fn call_id(&self) -> Option<&str> {
        self.call_id.as_deref()
    }

    /// Sets the calling agent.
    #[must_use]
    pub fn with_agent(mut self, agent: AgentRef) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Cancelled when the caller gives up on this call.
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The calling agent, when the harness supplied one.
    pub fn agent(&self) -> Option<&AgentRef> {
        self.agent.as_ref()
    }
}

/// A successful tool output: the text the model reads.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// How the text was cut to its budget, when it was (boxed: most
    /// outputs are not cut, and an output is moved through every layer).
    pub cut: Option<Box<Cut>>,
}

impl ToolOutput {
    /// A text output.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            cut: None,
        }
    }

    /// A cut text: what the model reads, and how it was cut.
    pub fn excerpt(excerpt: Excerpt) -> Self {
        Self {
            text: excerpt.text,
            cut: Some(Box::new(excerpt.cut)),
        }
    }

    /// `text` within `allowance` bytes: unchanged when it fits, otherwise
    /// its head and tail around a notice that names `read`, the call that
    /// reads the rest ([`budget::head_and_tail`]).
    pub fn within(text: String, allowance: usize, read: Option<PagedRead>) -> Self {
        match budget::head_and_tail(&text, allowance, read) {
            Some(excerpt) => Self::excerpt(excerpt),
            None => Self::text(text),
        }
    }
}

/// A tool failure: a model-facing message plus an optional stable code.
///
/// The message is what follows `Error: ` in the tool result, so it should say
/// what failed and, where it can, what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    message: String,
    code: Option<Cow<'static, str>>,
    cut: Option<Box<Cut>>,
}

impl ToolError {
    /// A failure with this message and no code.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            cut: None,
        }
    }

    /// A failure whose message was cut to its budget (its partial output,
    /// say): the message is the excerpt's text.
    pub fn excerpt(excerpt: Excerpt) -> Self {
        Self {
            message: excerpt.text,
            code: None,
            cut: Some(Box::new(excerpt.cut)),
        }
    }

    /// How the message was cut to its budget, when it was.
    pub fn cut(&self) -> Option<&Cut> {
        self.cut.as_deref()
    }

    /// Malformed arguments (code `INVALID_ARGUMENTS`); the message names the field.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(message).with_code(INVALID_ARGUMENTS)
    }

    /// Attaches a stable machine-readable code, such as `UNSUPPORTED_CAPABILITY`.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<Cow<'static, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The model-facing message (without the `Error: ` prefix).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, moved out (a long one, to be cut, is not copied).
    pub fn into_message(self) -> String {
        self.message
    }

    /// The stable code, when there is one.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// Whether the stable code is `code` (any crate's `ErrorCode`, or text).
    ///
    /// ```
    /// use dsh_tools::{ErrorCode, ToolError};
    /// let error = ToolError::invalid_arguments("argument \"prompt\" is required");
    /// assert!(error.has_code(ErrorCode::InvalidArguments));
    /// assert_eq!(error.code(), Some(ErrorCode::InvalidArguments.as_str()));
    /// ```
    pub fn has_code(&self, code: impl AsRef<str>) -> bool {
        self.code() == Some(code.as_ref())
    }
}

/// A subagent service or provider failure, as the model reads it: its text,
/// and its stable code kept.
impl From<SubagentError> for ToolError {
    fn from(error: SubagentError) -> Self {
        let code = error.code().as_str().to_owned();
        Self::new(error.to_string()).with_code(code)
    }
}

/// The code of [`ToolError::invalid_arguments`].
pub const INVALID_ARGUMENTS: &str = ErrorCode::InvalidArguments.as_str();

/// How a JSON value's kind reads in an error message: `null`, `a boolean`,
/// `a number`, `a string`, `an array`, `an object`.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => wording::KIND_NULL,
        Value::Bool(_) => wording::EXPECTED_BOOLEAN,
        Value::Number(_) => wording::KIND_NUMBER,
        Value::String(_) => wording::EXPECTED_STRING,
        Value::Array(_) => wording::KIND_ARRAY,
        Value::Object(_) => wording::KIND_OBJECT,
    }
}

/// What the model sees for one call: text and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    /// The model-visible text.
    pub text: String,
    /// `true` when the call failed.
    pub is_error: bool,
    /// The failure behind an error result, kept for logs and tests.
    pub error: Option<ToolError>,
    /// How the text was cut, when it was: by the tool's own budget, or to
    /// fit a context window ([`ToolResult::cut_to`]).
    pub cut: Option<Box<Cut>>,
}

impl ToolResult {
    /// Renders an execute outcome: `Ok` as its text, `Err` as `Error: <message>`.
    pub fn from_outcome(outcome: Result<ToolOutput, ToolError>) -> Self {
        match outcome {
            Ok(output) => Self {
                text: output.text,
                is_error: false,
                error: None,
                cut: output.cut,
            },
            Err(error) => {
                let cut = error
                    .cut
                    .clone()
                    .map(|cut| Box::new(cut.after_prefix(crate::wording::ERROR_PREFIX.len())));
                Self {
                    text: crate::wording::error_result(&error.message),
                    is_error: true,
                    error: Some(error),
                    cut,
                }
            }
        }
    }

    /// Cuts the text to at most `allowance` bytes, when it is longer
    /// ([`budget::recut`]): a result its tool cut already keeps its paged
    /// read. Returns whether it cut.
    pub fn cut_to(&mut self, allowance: usize) -> bool {
        match budget::recut(&self.text, self.cut.as_deref(), allowance) {
            Some(excerpt) => {
                self.text = excerpt.text;
                self.cut = Some(Box::new(excerpt.cut));
                true
            }
            None => false,
        }
    }
}

impl From<ToolError> for ToolResult {
    fn from(error: ToolError) -> Self {
        Self::from_outcome(Err(error))
    }
}

impl fmt::Display for ToolResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_render_with_the_error_prefix_and_keep_their_code() {
        let result = ToolResult::from(ToolError::new("it broke").with_code("BROKEN"));
        assert_eq!(result.text, "Error: it broke");
        assert!(result.is_error);
        assert_eq!(result.error.as_ref().and_then(ToolError::code), Some("BROKEN"));
    }

    #[test]
    fn outputs_render_verbatim() {
        let result = ToolResult::from_outcome(Ok(ToolOutput::text("hi")));
        assert_eq!(result.text, "hi");
        assert!(!result.is_error);
    }
}
