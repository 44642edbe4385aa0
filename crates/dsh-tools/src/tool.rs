//! The tool trait and the values that flow through one call.

use std::borrow::Cow;
use std::fmt;

use crate::CancellationToken;
use futures::future::BoxFuture;
use serde_json::Value;

use dsh_subagent_api::SubagentError;

use crate::budget::{self, Cut, Excerpt, PagedRead};
use crate::{AgentRef, ErrorCode, wording};

/// A model-facing tool: a name, a description, a JSON schema for its
/// arguments, and an asynchronous `execute` that turns one call's arguments
/// into the text the model reads.
///
/// A tool is mounted in a [`ToolRegistry`](crate::ToolRegistry) and called
/// through [`ToolRegistry::call`](crate::ToolRegistry::call) (or, outside a
/// registry, [`execute`](crate::execute)); both render the outcome into a
/// [`ToolResult`]. What follows is the contract between a tool and whoever
/// calls it: what a caller may do to a call, and what a tool owes it back.
///
/// # Definition
///
/// `name`, `description` and `parameters` are what the model sees. They
/// must not change while the tool is mounted: the registry files the tool
/// under the name it had when mounted, and the other two are read afresh
/// for every model request, every MCP `tools/list` and the catalog, so a
/// tool that changed them would show different models different tools.
/// The schema's root is `"type": "object"`; [`Arguments`](crate::Arguments)
/// makes it and checks each call against it.
///
/// # Calls at once
///
/// `execute` takes `&self`, and one tool serves many calls at the same
/// time: an agent runs all the tool calls of one model turn together (on
/// its own task, so they interleave on one thread), the MCP server of
/// `dsh-mcp` runs each call as a task of its own, and one registry serves
/// every agent of a harness. A call's own state lives in its future; state the calls
/// share sits behind the tool's own synchronisation, and no call may assume
/// it is alone or that calls end in the order they started. The future
/// borrows only `&self` and is `Send`, so a caller may spawn it
/// ([`ToolRegistry::call`](crate::ToolRegistry::call) returns one that
/// borrows nothing). A call must not block its thread: the calls it runs
/// beside would stall with it, so blocking work goes to
/// `tokio::task::spawn_blocking` or a thread of its own.
///
/// # Cancellation
///
/// [`ToolExecution::cancel`] fires when the caller gives up on the call: a
/// person pressed Ctrl-C, the calling agent's run was cancelled, an MCP
/// client sent `notifications/cancelled`, or its session ended. Once it
/// fires, the tool stops what it started for this call and returns
/// promptly. What it returns is its own choice, and the caller may never
/// show it (MCP sends no response to a cancelled request): the state as it
/// stands (`task_output` returns its task's current output), or an error
/// saying the call was cancelled (`subagent`, a mounted MCP tool). Every
/// wait that can be long is raced against the token.
///
/// The callers in this workspace cancel rather than drop: an agent cancels
/// the token and waits for every call to return, so that each is answered
/// in its transcript, and the MCP server waits for its calls (a bounded
/// time) when a session ends. So a tool that ignores the token holds its
/// caller up: an agent's run does not end before every call has returned.
/// The token belongs to this call (an agent hands each call a child of its
/// run's token): cancelling it cancels nothing of the caller's, and a tool
/// that stops its own work early derives a child token for that rather
/// than cancelling this one. Through a registry, a call whose token has
/// already fired is refused before `execute` runs
/// (`Error: tool call aborted before dispatch`, code
/// [`ABORTED_BEFORE_DISPATCH`](crate::ABORTED_BEFORE_DISPATCH)).
///
/// # Dropped mid-call
///
/// A caller may still drop the future at any `.await` without cancelling
/// first: a harness's own timeout or `select!`, a runtime shutting down.
/// Nothing polls it again and no result is read, so whatever the call
/// started that must not outlive it (a child process, a child agent, a
/// reservation) is released by a drop guard, or by a task the drop
/// spawns, exactly as a cancellation would release it. `subagent` does
/// this: a delegation dropped mid-run releases its child in the background.
///
/// # What a result holds
///
/// `Ok` is a success: [`ToolOutput::text`] is what the model reads,
/// verbatim. `Err` is a failure: the model reads `Error: ` and
/// [`ToolError::message`], which says what failed and what to do; its
/// [`code`](ToolError::code), when it has one, is for programs (a
/// harness matching it, a trace's `error.type`) and is not shown. A call
/// that failed after making some text is a failure that carries the text
/// in its message, never a success (a child's partial output reads after
/// an error headline).
/// Arguments the tool cannot use are a [`ToolError::invalid_arguments`]
/// naming the field, never a panic.
///
/// Text is all a result holds, and it is bounded by the tool: a tool whose
/// text can be long cuts it to its budget ([`ToolOutput::within`]), keeping
/// the head and the tail around a notice that names the call that reads the
/// rest, and records the [`Cut`]. The caller may cut any result further to
/// fit its model's context window ([`ToolResult::cut_to`]), keeping the
/// tool's notice; a long text the tool did not cut loses its middle there
/// with nothing to read it by.
///
/// # Panics
///
/// A tool should not panic. If it does, in `execute` itself or in the
/// future it returned, the registry and [`execute`](crate::execute) catch
/// it and the model reads `Error: tool "<name>" panicked: <message>`
/// (code `TOOL_PANICKED`); the tool stays mounted and is called again, so a
/// panic must not leave the state its calls share broken.
pub trait Tool: Send + Sync + 'static {
    /// The unique, model-visible name; the same for as long as the tool is
    /// mounted.
    fn name(&self) -> &str;

    /// The model-visible description.
    fn description(&self) -> &str;

    /// The JSON schema of the arguments; its root is `"type": "object"`.
    fn parameters(&self) -> &Value;

    /// Runs one call. `exec` carries the call's cancellation token, the
    /// calling agent and the call's id; see the trait's docs for what the
    /// caller may do to the future and what the result may hold.
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
    /// Set when the call is run again after an interruption (boxed: rare).
    rerun: Option<Box<dsh_subagent_api::Rerun>>,
}

impl ToolExecution {
    /// A call with the given cancellation token and no calling agent.
    pub fn new(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            agent: None,
            call_id: None,
            rerun: None,
        }
    }

    /// Marks the call as one made before an interruption and run again when
    /// its turn resumes, naming the child it had started, if any: a tool
    /// that starts children continues that child instead of starting another
    /// ([`Rerun`](dsh_subagent_api::Rerun)).
    #[must_use]
    pub fn with_rerun(mut self, rerun: dsh_subagent_api::Rerun) -> Self {
        self.rerun = Some(Box::new(rerun));
        self
    }

    /// Set when the call is run again after an interruption.
    pub fn rerun(&self) -> Option<&dsh_subagent_api::Rerun> {
        self.rerun.as_deref()
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
    /// A result read back from a transcript: the text the model was given.
    /// It reads as an error when it has the `Error: ` prefix every error
    /// result carries; how it was cut is not known any more.
    pub fn recorded(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            is_error: text.starts_with(crate::wording::ERROR_PREFIX),
            text,
            error: None,
            cut: None,
        }
    }

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
