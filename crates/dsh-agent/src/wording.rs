//! Every text of the agent loop and the child driver that a model or a person reads.
//!
//! The rule: model-facing texts, errors (their `#[error]` attributes call the
//! items here), stop reasons as shown, transcript diagnostics and log
//! messages are written here, and the rest of the crate only calls these
//! items. The `pub` items are the texts a model reads; the `pub(crate)` ones
//! reach a person through this crate's error types, `Display` impls or
//! `tracing`. Names a program matches stay beside the code: transcript JSON
//! keys, OpenTelemetry attribute and span names, error codes. How a recorded
//! stop reads, and the transcript format's own errors, are the
//! `dsh-transcript` crate's (two of its stop reasons are re-exported here).

/// The stop reasons a program matches on, from the transcript format.
pub use dsh_transcript::wording::{ANSWER_CUT_STOP, CONTEXT_WINDOW_STOP};

/// The runtime context every in-process child receives after its system
/// prompt (docs/contract.md, "Persona").
pub const DELEGATION_CONTEXT: &str = "You are a delegated subagent: your permission scope was fixed when you were started and cannot be widened from inside this session — operations that require approval are rejected automatically. When the task needs access beyond that scope, do not retry the denied operation; state the limitation in your reply so the delegating agent can handle it.";

/// A start cancelled before the child was published (in-process driver).
pub const ABORTED_BEFORE_PUBLICATION: &str = "subagent request was aborted before child publication";

/// A tool hidden by the agent's filter was called anyway.
pub fn tool_not_available(name: &str) -> String {
    format!("tool \"{name}\" is not available to this agent")
}

/// A tool call whose arguments are not JSON.
pub fn arguments_not_json(name: &str, error: &str) -> String {
    format!("the arguments of tool \"{name}\" are not valid JSON ({error}); send a JSON object")
}

/// A tool filter naming a tool that does not exist.
pub fn unknown_filter_tool(name: &str, known: &[String]) -> String {
    format!(
        "subagent toolFilter names unknown tool \"{name}\" (available: {})",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    )
}

/// The diagnostic of a child that used up its model calls.
pub fn max_turns_diagnostic(limit: u32) -> String {
    format!("the child made its limit of {limit} model calls without giving a final answer")
}

/// The diagnostic of a child whose model call failed.
pub fn model_error_diagnostic(message: &str) -> String {
    format!("the child's model call failed: {message}")
}

/// The diagnostic of a child whose model's answer was cut off: its
/// partial output, which follows, is not an answer.
pub fn answer_cut_diagnostic(message: &str) -> String {
    format!("the child's partial output is not an answer: {message}")
}

/// A start on behalf of an agent that is not an in-process dsh agent.
pub const NOT_IN_PROCESS_PARENT: &str =
    "in-process subagent providers need an in-process parent: the calling agent carries no dsh-agent handle";

/// The child's task panicked.
pub fn child_panicked(message: &str) -> String {
    format!("subagent child stopped unexpectedly: {message}")
}

/// The structured-output tool's name.
pub const STRUCTURED_OUTPUT_TOOL: &str = "structured_output";

/// The structured-output tool's description (docs/contract.md, "Structured output").
pub const STRUCTURED_OUTPUT_DESCRIPTION: &str = "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly.";

/// The structured-output tool's acknowledgement (docs/contract.md, "Structured output").
pub const STRUCTURED_OUTPUT_ACK: &str = "Structured output recorded.";

/// The instruction added to a child's system prompt when a schema is requested.
pub const STRUCTURED_OUTPUT_INSTRUCTION: &str = "When your answer is complete, deliver it by calling the structured_output tool exactly once; its arguments are your final result and must match its parameter schema.";

/// A second call of the structured-output tool.
pub const STRUCTURED_OUTPUT_TWICE: &str = "structured output was already recorded; call structured_output exactly once";

/// Structured-output arguments that do not match the schema.
pub fn structured_output_mismatch(detail: &str) -> String {
    format!("the arguments do not match the structured_output schema: {detail}; call it again with a matching object")
}

/// An output schema that does not compile.
pub fn invalid_output_schema(detail: &str) -> String {
    format!("subagent outputSchema is not a valid JSON Schema: {detail}")
}

/// A child that finished without delivering its structured result.
pub const STRUCTURED_OUTPUT_MISSING: &str = "the child finished without calling structured_output";

/// The user message that carries an agent's pending notices: one per line.
pub fn notices(notices: &[String]) -> String {
    notices.join("\n")
}

/// Continuable children need transcripts on disk (docs/contract.md, "send_message", adapted to
/// dsh: the data directory is the persistence backend).
pub const PERSISTENCE_UNAVAILABLE: &str =
    "continuable subagents require session persistence (give the agent runtime a data directory)";

/// A child id with no readable transcript (docs/contract.md, "send_message").
pub fn child_unavailable(id: &str) -> String {
    format!("subagent \"{id}\" is unavailable")
}

/// A child resumed on behalf of an agent that did not start it (docs/contract.md, "send_message").
pub fn foreign_child(id: &str) -> String {
    format!("subagent \"{id}\" belongs to another parent session")
}

/// A diagnostic for a torn transcript found on resume: the interrupted turn's
/// messages are not part of the resumed history.
pub fn interrupted_turn_dropped(count: usize) -> String {
    format!("{count} message(s) of an interrupted run are not part of the resumed history")
}

/// A message steered into a child that has not started its turn
/// (docs/contract.md, "Live delivery").
pub fn steer_not_running(child: &str) -> String {
    format!("subagent child \"{child}\" is not running; the message was not delivered")
}

/// A message steered into a child whose turn has already ended.
pub fn steer_turn_closed(child: &str) -> String {
    format!("subagent child \"{child}\" turn has already closed; the message was not delivered")
}

/// A message steered into a child that has already delivered its structured answer.
pub fn steer_structured_reported(child: &str) -> String {
    format!("subagent child \"{child}\" already reported its structured result; the message was not delivered")
}

/// [`SteerRefused::NotRunning`](crate::SteerRefused::NotRunning).
pub(crate) const AGENT_NOT_RUNNING: &str = "the agent is not running";

/// [`SteerRefused::TurnClosed`](crate::SteerRefused::TurnClosed).
pub(crate) const AGENT_TURN_CLOSED: &str = "the agent's turn has already closed";

/// An agent of a tree with a money budget, whose model has no price.
pub(crate) fn unpriced_model(model: &str) -> String {
    format!(
        "model {model:?} has no price, and this agent's delegation tree has a cost budget: what it spends could never be counted (give the model a price on the runtime)"
    )
}

/// An agent whose transcript file could not be created.
pub(crate) fn transcript_not_created(id: &dyn std::fmt::Display, error: &dyn std::fmt::Display) -> String {
    format!("cannot create the transcript for agent {id}: {error}")
}

/// A transcript without its header entry.
pub(crate) fn transcript_without_header(path: &std::path::Path) -> String {
    format!("transcript {} has no header", path.display())
}

/// Log line: an entry could not be appended to the transcript.
pub(crate) fn log_transcript_write_failed(error: &dyn std::fmt::Display) -> String {
    format!("transcript write failed: {error}")
}

/// Log line: the transcript could not be flushed at the end of a turn.
pub(crate) fn log_transcript_flush_failed(error: &dyn std::fmt::Display) -> String {
    format!("transcript flush failed: {error}")
}

/// Log line: one unreadable transcript skipped while listing children.
pub(crate) fn log_transcript_skipped(path: &std::path::Path, error: &dyn std::fmt::Display) -> String {
    format!("skipping transcript {}: {error}", path.display())
}

/// A schema violation and where in the arguments it is, for
/// [`structured_output_mismatch`].
pub(crate) fn schema_violation(error: &dyn std::fmt::Display, at: &dyn std::fmt::Display) -> String {
    format!("{error} at {at}")
}

/// Log line: the server counted `tokens` prompt tokens of a request the
/// loop estimated at `estimate`, when asked because its streams count none.
pub(crate) fn log_prompt_counted(tokens: u64, estimate: u64, model: &str) -> String {
    format!("the server counted {tokens} prompt tokens where dsh estimated {estimate}, for model {model}")
}

/// Log line, at warn so that it shows by default: asked to count a request
/// because its streams count none, `model`'s server gave no count, so the
/// loop goes on with its estimate and does not ask again.
pub(crate) fn log_prompt_not_counted(model: &str, why: &str) -> String {
    format!("the server of model {model} did not count a request's prompt tokens when asked ({why}); estimating them")
}

/// Log line, at warn so that it shows by default: asked to count, `model`'s
/// server did not answer in time; the loop goes on with its estimate and
/// asks again at the next round it would cut.
pub(crate) fn log_prompt_not_counted_yet(model: &str, why: &str) -> String {
    format!("the server of model {model} did not count a request's prompt tokens in time ({why}); estimating them")
}

/// Why a server asked to count gave no count: its answer had no usage.
pub(crate) const NO_USAGE: &str = "its answer had no usage";

/// Why a server asked to count gave no count: it refused the request for
/// its length without counting it.
pub(crate) const REFUSED_UNCOUNTED: &str = "it refused the request for its length without counting it";

/// Log line, at warn so that it shows by default: a server's refusal named
/// a context window that was not known for `model`.
pub(crate) fn log_window_learned(window: u64, model: &str) -> String {
    format!("learned context window {window} for model {model} from the server's refusal")
}

/// Log line, at warn so that it shows by default: a server's refusal named
/// another window for `model` than the one kept from an earlier run; the
/// newest answer wins.
pub(crate) fn log_kept_window_corrected(window: u64, kept: u64, model: &str) -> String {
    format!(
        "learned context window {window} for model {model} from the server's refusal, in place of the window {kept} an earlier run kept"
    )
}

/// Log line, at warn so that it shows by default: the server counted a
/// prompt of `model` larger than the window kept from an earlier run, so
/// that window was wrong (the server's was made larger since) and is
/// forgotten.
pub(crate) fn log_kept_window_forgotten(tokens: u64, kept: u64, model: &str) -> String {
    format!(
        "the server counted {tokens} prompt tokens for model {model}, more than the window {kept} an earlier run kept: that window is forgotten"
    )
}

/// Log line, at info: what an earlier run kept of `model` is used.
pub(crate) fn log_kept_used(model: &str, path: &std::path::Path) -> String {
    format!(
        "model {model} starts from what an earlier run kept in {}",
        path.display()
    )
}

/// Log line, at warn: what was learned could not be kept.
pub(crate) fn log_kept_not_written(path: &std::path::Path, error: &dyn std::fmt::Display) -> String {
    format!("could not keep what was learned in {}: {error}", path.display())
}

/// A kept-facts file not read as learned: the file, and why.
pub(crate) fn kept_ignored(path: &std::path::Path, why: &str) -> String {
    format!(
        "ignored what an earlier run kept in {}: {why}; nothing of it is used, and the next lesson replaces it",
        path.display()
    )
}

/// Why: the file could not be read.
pub(crate) fn kept_unreadable(error: &dyn std::fmt::Display) -> String {
    format!("it cannot be read ({error})")
}

/// Why: the file is not whole JSON (a torn write, a damaged file).
pub(crate) fn kept_torn(error: &dyn std::fmt::Display) -> String {
    format!("it is not whole JSON ({error})")
}

/// Why: the file is JSON of another kind.
pub(crate) const KEPT_NOT_KEPT_FACTS: &str = "it is not a file of learned facts (no \"format\": \"dsh-learned\")";

/// Why: the file is of another version.
pub(crate) fn kept_version(found: &dyn std::fmt::Display, expected: u64) -> String {
    format!("it is of version {found}, and this dsh reads version {expected}")
}

/// Why: the file keeps another endpoint's facts.
pub(crate) fn kept_other_endpoint(found: &str, expected: &str) -> String {
    format!("it keeps what {found:?} taught, not {expected:?}")
}

/// Why: it has no table of models.
pub(crate) const KEPT_NO_MODELS: &str = "it has no \"models\" object";

/// Why: one model's facts cannot be learned.
pub(crate) fn kept_model_invalid(model: &str, why: &str) -> String {
    format!("model {model:?}: {why}")
}

/// Why a model's facts cannot be learned: a window of 0.
pub(crate) const KEPT_WINDOW_ZERO: &str = "a context window of 0 tokens";

/// A transcript that names another agent, or another parent, than the
/// child it should hold.
pub(crate) fn transcript_not_of(path: &std::path::Path, child: &str) -> String {
    format!(
        "transcript {} is not the record of child {child} of this agent",
        path.display()
    )
}

/// A transcript whose torn tail could not be cut off.
pub(crate) fn transcript_not_repaired(path: &std::path::Path, error: &dyn std::fmt::Display) -> String {
    format!("transcript {} could not be repaired: {error}", path.display())
}

/// The diagnostic of a child that was interrupted and cannot go on: which
/// child (and task), and why. Its last text follows as partial output.
pub fn child_disconnected(child: &str, task_id: Option<&str>, why: &str) -> String {
    match task_id {
        Some(task) => format!("subagent {child} (task {task}) was interrupted and cannot be resumed: {why}"),
        None => format!("subagent {child} was interrupted and cannot be resumed: {why}"),
    }
}

/// Why a background child that had not begun its run cannot be recovered:
/// its prompt is not in its records.
pub(crate) const NEVER_BEGAN: &str = "it was interrupted before its run began, and its records hold no prompt";

/// A child its parent's transcript names, whose own transcript is gone.
pub(crate) fn transcript_missing(path: &std::path::Path) -> String {
    format!("no transcript at {}", path.display())
}
