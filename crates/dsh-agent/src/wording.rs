//! Every text of the agent loop and the child driver that a model reads.

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
