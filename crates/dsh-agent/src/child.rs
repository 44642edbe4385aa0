//! The in-process child driver shared by the spawn and fork providers.

use dsh_subagent_api::{
    ContentBlock, StartRequest, StopReason, SubagentError, SubagentResult, SubagentRun, child_depth, concat_text,
};
use std::sync::{Arc, PoisonError};

use futures::FutureExt;

use crate::structured::{Captured, StructuredOutput};
use crate::{Agent, AgentStop, RunOutcome, wording};

/// What the child starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildContext {
    /// An empty conversation (spawn).
    Fresh,
    /// The parent's completed turns, never its turn in flight (fork).
    InheritParent,
}

/// Starts one in-process child of the calling agent and publishes it.
///
/// The parent must be a dsh [`Agent`] (found through the request's
/// [`AgentRef`](dsh_tools::AgentRef) handle). The child shares the parent's
/// runtime; `agentOptions` override the parent's model and token cap; a
/// persona replaces the parent's system prompt; a tool filter hides and
/// refuses tools (naming an unknown tool fails the start); the child's depth
/// is the parent's + 1, checked against `max_depth`. Every child's system
/// prompt ends with the delegation context. An output schema gives the child
/// a `structured_output` tool of its own; the captured, schema-checked value
/// becomes the result's `structured`, and a run that completes without it is
/// an `error`.
///
/// The child runs on its own task. The result is its final assistant text;
/// cancelling the request's token stops it (`aborted`, partial text kept);
/// `dispose` cancels it and returns once its task has ended.
pub fn start_child(request: StartRequest, context: ChildContext) -> Result<SubagentRun, SubagentError> {
    if request.cancel.is_cancelled() {
        return Err(SubagentError::aborted(wording::ABORTED_BEFORE_PUBLICATION));
    }
    let parent = request
        .parent
        .handle::<Agent>()
        .ok_or_else(|| SubagentError::failed_with_code(wording::NOT_IN_PROCESS_PARENT, "NOT_IN_PROCESS"))?;
    let depth = child_depth(request.parent.depth(), request.max_depth)?;
    let options = request.agent_options.clone().unwrap_or_default();
    let mut system_prompt = match request.persona.as_deref().or(parent.system_prompt()) {
        Some(prompt) => format!("{prompt}\n\n{}", wording::DELEGATION_CONTEXT),
        None => wording::DELEGATION_CONTEXT.to_owned(),
    };
    let structured = match request.output_schema.clone() {
        Some(schema) => {
            let (tool, captured) = StructuredOutput::new(schema)
                .map_err(|message| SubagentError::failed_with_code(message, "INVALID_OUTPUT_SCHEMA"))?;
            system_prompt.push_str("\n\n");
            system_prompt.push_str(wording::STRUCTURED_OUTPUT_INSTRUCTION);
            Some((Arc::new(tool), captured))
        }
        None => None,
    };
    let mut builder = Agent::builder(parent.runtime().clone())
        .parent(parent.id().clone())
        .depth(depth)
        .label(request.label.clone())
        .system_prompt(system_prompt)
        .model(options.model.or_else(|| parent.model_override().map(str::to_owned)))
        .max_tokens(options.max_tokens.or(parent.max_tokens()))
        .max_turns(parent.max_turns());
    if let Some(filter) = request.tool_filter.clone() {
        builder = builder.tool_filter(filter);
    }
    if let Some((tool, _)) = &structured {
        builder = builder.local_tool(tool.clone());
    }
    if context == ChildContext::InheritParent {
        builder = builder.seed(parent.history());
    }
    let child = builder
        .build()
        .map_err(|error| SubagentError::failed_with_code(error.to_string(), "CHILD_SETUP_FAILED"))?;

    // Publication: from here the caller owns the child.
    let prompt = concat_text(&request.prompt);
    let stop = request.cancel.child_token();
    let run_token = stop.clone();
    let id = child.id().to_string();
    let captured = structured.map(|(_, captured)| captured);
    let task = tokio::spawn(async move {
        let outcome = child.run(prompt, &run_token).await;
        parent.add_child_usage(child.usage().total());
        outcome
    });
    let done = async move {
        match task.await {
            Ok(outcome) => Ok(with_structured(result_of(outcome), captured)),
            Err(error) => Err(SubagentError::failed(wording::child_panicked(&error.to_string()))),
        }
    }
    .boxed()
    .shared();
    let result = done.clone();
    Ok(SubagentRun::new(id, result, move || async move {
        stop.cancel();
        // Waits until the child's task has ended; its outcome stays on `result`.
        let _ = done.await;
        Ok(())
    }))
}

/// A requested structured answer: attached when captured; a completed run
/// without one is a failure, never a success without its structure.
fn with_structured(result: SubagentResult, captured: Option<Captured>) -> SubagentResult {
    let Some(captured) = captured else { return result };
    let value = captured.lock().unwrap_or_else(PoisonError::into_inner).take();
    match (result.stop_reason.is_completed(), value) {
        (true, Some(value)) => result.with_structured(value),
        (true, None) => {
            SubagentResult::new(StopReason::Error, result.output).with_diagnostic(wording::STRUCTURED_OUTPUT_MISSING)
        }
        (false, _) => result,
    }
}

/// Maps a run outcome to the seam's result (reference-contract §4, in-process driver).
fn result_of(outcome: RunOutcome) -> SubagentResult {
    let output = if outcome.text.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(outcome.text)]
    };
    match outcome.stop {
        AgentStop::Completed => SubagentResult::new(StopReason::Completed, output),
        AgentStop::MaxTokens => SubagentResult::new(StopReason::MaxTokens, output),
        AgentStop::Refusal => SubagentResult::new(StopReason::Refusal, output),
        AgentStop::Cancelled => SubagentResult::new(StopReason::Aborted, output),
        AgentStop::MaxTurns(limit) => {
            SubagentResult::new(StopReason::Error, output).with_diagnostic(wording::max_turns_diagnostic(limit))
        }
        AgentStop::Error(message) => {
            SubagentResult::new(StopReason::Error, output).with_diagnostic(wording::model_error_diagnostic(&message))
        }
    }
}
