//! The in-process child driver shared by the spawn and fork providers.
//!
//! Besides starting children, it finds them again after an interruption
//! (its `recover` module): a call run again on resume names the child it had
//! started ([`Rerun`](dsh_subagent_api::Rerun)), and a background child is
//! recovered through [`ContinuableProvider::recover`].

mod recover;

use dsh_subagent_api::ErrorCode as SubagentCode;
use dsh_subagent_api::{
    ContentBlock, ContinuableProvider, ContinuationDescriptor, RecordedChild, RecoverRequest, ResumeRequest,
    SpanOrigin, StartRequest, Steerer, StopReason, SubagentError, SubagentResult, SubagentRun, child_depth,
    concat_text,
};
use dsh_tools::{AgentId, AgentRef, CancellationToken};
use std::sync::{Arc, PoisonError};

use futures::future::BoxFuture;

use crate::answer::TranscriptAnswer;
use crate::structured::{Captured, StructuredOutput};
use crate::transcript::{Transcript, TranscriptEntry, read_transcript, repair_for_resume, transcript_path};
use crate::{Agent, AgentBuilder, AgentStop, ContextWindow, ErrorCode, RunOutcome, SteerRefused, wording};
use recover::Found;

/// What the child starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildContext {
    /// An empty conversation (spawn).
    Fresh,
    /// The parent's completed turns, never its turn in flight (fork).
    InheritParent,
}

impl ChildContext {
    /// The continuation capability of an in-process provider whose children
    /// start from this context (a continuable child gets its id and records
    /// its descriptor before its first turn; a resumed one continues from its
    /// transcript), for [`SubagentProvider::continuation`](dsh_subagent_api::SubagentProvider::continuation).
    pub fn continuation(self) -> &'static dyn ContinuableProvider {
        static FRESH: InProcessContinuation = InProcessContinuation(ChildContext::Fresh);
        static INHERIT_PARENT: InProcessContinuation = InProcessContinuation(ChildContext::InheritParent);
        match self {
            Self::Fresh => &FRESH,
            Self::InheritParent => &INHERIT_PARENT,
        }
    }
}

/// Continuable in-process children starting from one context.
struct InProcessContinuation(ChildContext);

impl ContinuableProvider for InProcessContinuation {
    /// An in-process parent whose runtime has no data directory cannot
    /// persist a child's transcript: refused before anything starts. Other
    /// parents are left to `start_continuable`, which names what is wrong.
    fn check_continuable(&self, parent: &AgentRef) -> Result<(), SubagentError> {
        match parent.handle::<Agent>() {
            Some(agent) if agent.runtime().data_dir().is_none() => Err(persistence_unavailable()),
            _ => Ok(()),
        }
    }

    fn start_continuable(
        &self,
        child_id: String,
        descriptor: ContinuationDescriptor,
        request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { start_continuable_child(request, self.0, child_id, &descriptor) })
    }

    fn resume(&self, request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { resume_child(request) })
    }

    fn recover(&self, request: RecoverRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { recover_child(request) })
    }
}

/// Starts one in-process child of the calling agent and publishes it.
///
/// The parent must be a dsh [`Agent`] (found through the request's
/// [`AgentRef`] handle). The child shares the parent's
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
    start(request, context, None)
}

/// Starts a *continuable* in-process child: as [`start_child`], but the child
/// gets the id `child_id` and its transcript records `descriptor` before its
/// first turn, so [`resume_child`] can continue it later, also after a
/// restart. Needs a data directory on the runtime.
fn start_continuable_child(
    request: StartRequest,
    context: ChildContext,
    child_id: String,
    descriptor: &ContinuationDescriptor,
) -> Result<SubagentRun, SubagentError> {
    start(request, context, Some((child_id, descriptor.to_value())))
}

/// Continues a persisted child with a new prompt: the same id, the committed
/// history from its transcript, its recorded system prompt, and the model and
/// tool filter of its descriptor. The caller must be the child's parent.
///
/// A transcript whose last line was torn by a crash is repaired first (the
/// torn bytes are cut off and recorded in a `repair` entry with the
/// diagnostic); every earlier turn stays intact. The depth is the recorded
/// one, never less than the parent's + 1.
fn resume_child(request: ResumeRequest) -> Result<SubagentRun, SubagentError> {
    let parent = in_process_parent(&request.cancel, &request.parent)?;
    let data_dir = parent.runtime().data_dir().ok_or_else(persistence_unavailable)?;
    let id = AgentId::new(request.child_id.clone());
    let unavailable =
        || SubagentError::failed_with_code(wording::child_unavailable(id.as_str()), SubagentCode::NotResumable);
    let path = transcript_path(data_dir, &id);
    let transcript = read_transcript(&path).map_err(|_| unavailable())?;
    let Some(TranscriptEntry::Header {
        id: recorded,
        parent: recorded_parent,
        depth: recorded_depth,
        label,
        system_prompt,
        ..
    }) = transcript.entries.first().cloned()
    else {
        return Err(unavailable());
    };
    if recorded != id {
        return Err(unavailable());
    }
    if recorded_parent.as_ref() != Some(parent.id()) {
        return Err(SubagentError::failed_with_code(
            wording::foreign_child(id.as_str()),
            SubagentCode::Unauthorized,
        ));
    }
    for diagnostic in repair_for_resume(&path, &transcript)
        .map_err(|error| SubagentError::failed_with_code(error.to_string(), ErrorCode::TranscriptRepairFailed))?
    {
        tracing::warn!(child = %id, "{diagnostic}");
    }
    let depth = child_depth(request.parent.depth(), None)?.max(recorded_depth);
    let continued = Continued {
        id,
        depth,
        label,
        system_prompt,
        transcript: &transcript,
    };
    let child = continued.build(&parent, &request.descriptor, request.lineage.clone())?;
    Ok(publish(
        child,
        parent,
        Go::Resume(Some(concat_text(&request.prompt))),
        &request.cancel,
        None,
        request.origin,
        None,
    ))
}

/// A persisted child continued from its transcript: who it is, and the
/// records it goes on from.
struct Continued<'a> {
    id: AgentId,
    depth: u64,
    label: Option<String>,
    system_prompt: Option<String>,
    transcript: &'a Transcript,
}

impl Continued<'_> {
    /// The child as its descriptor and transcript make it: the same id,
    /// history and open turn, system prompt, model and tool filter.
    fn build(
        self,
        parent: &Agent,
        descriptor: &ContinuationDescriptor,
        lineage: dsh_subagent_api::Lineage,
    ) -> Result<Agent, SubagentError> {
        let model = descriptor
            .agent_model
            .clone()
            .or_else(|| parent.model_override().map(str::to_owned));
        let mut builder = Agent::builder(parent.runtime().clone())
            .runs_once()
            .id(self.id)
            .parent(parent.id().clone())
            .depth(self.depth)
            .label(self.label)
            .context_window(inherited_window(parent, model.as_deref()))
            .model(model)
            .max_tokens(parent.max_tokens())
            .max_turns(parent.max_turns())
            .lineage(lineage)
            .resume_from(self.transcript);
        if let Some(system_prompt) = self.system_prompt {
            builder = builder.system_prompt(system_prompt);
        }
        if let Some(filter) = descriptor.tool_filter.clone() {
            builder = builder.tool_filter(filter);
        }
        builder
            .build()
            .map_err(|error| SubagentError::failed_with_code(error.to_string(), ErrorCode::ChildSetupFailed))
    }
}

/// Recovers a persisted (continuable) child after an interruption
/// ([`ContinuableProvider::recover`]): a child whose last run ended hands
/// back its result at once; one whose turn is open goes on with it; one
/// whose records are torn past repair, or that had not begun its run, is
/// [disconnected](StopReason::Disconnected).
fn recover_child(request: RecoverRequest) -> Result<SubagentRun, SubagentError> {
    let parent = in_process_parent(&request.cancel, &request.parent)?;
    let data_dir = parent.runtime().data_dir().ok_or_else(persistence_unavailable)?;
    let id = AgentId::new(request.child_id.clone());
    let transcript = match recover::find(data_dir, &id, parent.id(), None) {
        Found::Ended(result) => return Ok(recorded_run(id.as_str(), result)),
        Found::Disconnected(result) => return Ok(recorded_run(id.as_str(), result)),
        Found::Open(transcript) => transcript,
    };
    let Some(TranscriptEntry::Header {
        depth,
        label,
        system_prompt,
        ..
    }) = transcript.entries.first().cloned()
    else {
        return Ok(recorded_run(
            id.as_str(),
            recover::disconnected(id.as_str(), None, wording::NEVER_BEGAN, String::new()),
        ));
    };
    if transcript.turns().open.is_none() {
        let result = recover::disconnected(id.as_str(), None, wording::NEVER_BEGAN, String::new());
        return Ok(recorded_run(id.as_str(), result));
    }
    let depth = child_depth(request.parent.depth(), None)?.max(depth);
    let continued = Continued {
        id,
        depth,
        label,
        system_prompt,
        transcript: &transcript,
    };
    let child = continued.build(&parent, &request.descriptor, request.lineage.clone())?;
    Ok(publish(
        child,
        parent,
        Go::Resume(None),
        &request.cancel,
        None,
        request.origin,
        None,
    ))
}

/// A run that is over already: a recovered child's recorded result.
fn recorded_run(id: &str, result: SubagentResult) -> SubagentRun {
    SubagentRun::new(id, async move { Ok(result) }, || async { Ok(()) })
}

/// Refuses a start cancelled before publication, then finds the calling
/// agent: in-process children need a dsh [`Agent`] parent.
fn persistence_unavailable() -> SubagentError {
    SubagentError::failed_with_code(wording::PERSISTENCE_UNAVAILABLE, SubagentCode::PersistenceUnavailable)
}

fn in_process_parent(cancel: &CancellationToken, parent: &AgentRef) -> Result<Arc<Agent>, SubagentError> {
    if cancel.is_cancelled() {
        return Err(SubagentError::aborted(wording::ABORTED_BEFORE_PUBLICATION));
    }
    parent
        .handle::<Agent>()
        .ok_or_else(|| SubagentError::failed_with_code(wording::NOT_IN_PROCESS_PARENT, ErrorCode::NotInProcess))
}

fn start(
    request: StartRequest,
    context: ChildContext,
    continuation: Option<(String, serde_json::Value)>,
) -> Result<SubagentRun, SubagentError> {
    let parent = in_process_parent(&request.cancel, &request.parent)?;
    let (mut builder, structured) = child_builder(&request, &parent)?;
    if let Some(filter) = request.settings().tool_filter.clone() {
        builder = builder.tool_filter(filter);
    }
    if let Some((tool, _)) = &structured {
        builder = builder.local_tool(tool.clone());
    }
    let captured = structured.map(|(_, captured)| captured);
    let prompt = concat_text(&request.prompt);
    // A call run again after an interruption finds the child it had started.
    let recorded = request
        .provenance()
        .rerun
        .as_ref()
        .and_then(|rerun| rerun.child.as_ref());
    if let Some(child) = recorded.filter(|child| child.remote.is_none()) {
        return rerun_recorded(child, builder, parent, &request, captured, prompt);
    }
    if context == ChildContext::InheritParent {
        builder = builder.seed(parent.history());
    }
    if let Some((child_id, descriptor)) = continuation {
        if parent.runtime().data_dir().is_none() {
            return Err(persistence_unavailable());
        }
        builder = builder.id(child_id).descriptor(descriptor);
    }
    let child = builder
        .build()
        .map_err(|error| SubagentError::failed_with_code(error.to_string(), ErrorCode::ChildSetupFailed))?;
    let call_id = request.provenance().call_id.clone();
    Ok(publish(
        child,
        parent,
        Go::Prompt(prompt),
        &request.cancel,
        captured,
        request.origin,
        call_id,
    ))
}

/// The structured-output tool a child answers through, and what it
/// captures, when the request sets an output schema.
type Structured = Option<(Arc<StructuredOutput>, Captured)>;

/// The child's agent as the request and its parent set it: its depth,
/// system prompt (the persona or the parent's, with the delegation
/// context), model, context window and limits; and its structured-output
/// tool, when the request sets an output schema.
fn child_builder(request: &StartRequest, parent: &Agent) -> Result<(AgentBuilder, Structured), SubagentError> {
    let settings = request.settings();
    let depth = child_depth(request.parent.depth(), settings.max_depth)?;
    let options = settings.agent_options.clone().unwrap_or_default();
    let mut system_prompt = match settings.persona.as_deref().or(parent.system_prompt()) {
        Some(prompt) => format!("{prompt}\n\n{}", wording::DELEGATION_CONTEXT),
        None => wording::DELEGATION_CONTEXT.to_owned(),
    };
    let structured = match settings.output_schema.clone() {
        Some(schema) => {
            let (tool, captured) = StructuredOutput::new(schema)
                .map_err(|message| SubagentError::failed_with_code(message, SubagentCode::InvalidOutputSchema))?;
            system_prompt.push_str("\n\n");
            system_prompt.push_str(wording::STRUCTURED_OUTPUT_INSTRUCTION);
            Some((Arc::new(tool), captured))
        }
        None => None,
    };
    let model = options.model.or_else(|| parent.model_override().map(str::to_owned));
    let context_window = options
        .context_window
        .or_else(|| inherited_window(parent, model.as_deref()));
    let builder = Agent::builder(parent.runtime().clone())
        .runs_once()
        .parent(parent.id().clone())
        .depth(depth)
        .label(request.label.clone())
        .system_prompt(system_prompt)
        .model(model)
        .context_window(context_window)
        .max_tokens(options.max_tokens.or(parent.max_tokens()))
        .max_turns(parent.max_turns())
        .lineage(request.lineage.clone())
        .provenance(request.provenance(), request.mode);
    Ok((builder, structured))
}

/// A call run again after an interruption, whose child had started in
/// this process: its recorded result when it had ended, else the child
/// resumed from its transcript (its prompt run now if it had not begun
/// its turn).
fn rerun_recorded(
    child: &RecordedChild,
    builder: AgentBuilder,
    parent: Arc<Agent>,
    request: &StartRequest,
    captured: Option<Captured>,
    prompt: String,
) -> Result<SubagentRun, SubagentError> {
    let data_dir = parent.runtime().data_dir().ok_or_else(persistence_unavailable)?;
    let id = AgentId::new(child.id.clone());
    let task_id = child.task_id.as_deref().or(request.provenance().task_id.as_deref());
    let transcript = match recover::find(data_dir, &id, parent.id(), task_id) {
        Found::Ended(result) | Found::Disconnected(result) => return Ok(recorded_run(id.as_str(), result)),
        Found::Open(transcript) => transcript,
    };
    if let Some(captured) = &captured {
        *captured.lock().unwrap_or_else(PoisonError::into_inner) = recover::structured_answer(&transcript.messages());
    }
    let go = match transcript.turns().open {
        Some(_) => Go::Resume(None),
        None => Go::Prompt(prompt),
    };
    let child = builder
        .id(id)
        .resume_from(&transcript)
        .build()
        .map_err(|error| SubagentError::failed_with_code(error.to_string(), ErrorCode::ChildSetupFailed))?;
    Ok(publish(
        child,
        parent,
        go,
        &request.cancel,
        captured,
        request.origin.clone(),
        None,
    ))
}

/// The context window a child inherits from its parent: the parent's own,
/// when the child uses the same model (`model`, or the runtime's default).
/// A child of another model has the runtime's window for it, or learns one.
fn inherited_window(parent: &Agent, model: Option<&str>) -> Option<ContextWindow> {
    let model = model.unwrap_or_else(|| parent.runtime().model().model_name());
    parent.context_window().filter(|_| parent.info().model == model)
}

/// What a published child's task runs.
enum Go {
    /// A new run of this prompt.
    Prompt(String),
    /// Its interrupted turn, gone on with; the message joins it when given.
    Resume(Option<String>),
}

/// Publication: from here the caller owns the child.
///
/// The run's answer is not copied on its way out: the result future takes
/// the child's outcome by value, and the release waits for the child's
/// task to end through a token, not by awaiting (and copying) the outcome
/// too. A completed run whose agent writes a transcript says where its
/// answer can be read again ([`TranscriptAnswer`]).
fn publish(
    child: Agent,
    parent: Arc<Agent>,
    go: Go,
    cancel: &dsh_tools::CancellationToken,
    captured: Option<Captured>,
    origin: SpanOrigin,
    call_id: Option<String>,
) -> SubagentRun {
    let stop = cancel.child_token();
    let run_token = stop.clone();
    let id = child.id().to_string();
    parent.record_child(child.id(), call_id);
    let steerer = steerer(child.clone(), captured.clone());
    // Cancelled when the child's task has ended, however it ended.
    let ended = CancellationToken::new();
    let ended_guard = ended.clone().drop_guard();
    child.open_turn();
    let task = tokio::spawn(async move {
        let _ended = ended_guard;
        let outcome = match go {
            Go::Prompt(prompt) => child.run_from(prompt, &run_token, &origin).await,
            Go::Resume(message) => child.resume_from_origin(message, &run_token, &origin).await,
        };
        if let Some(spent) = child.usage().total() {
            parent.add_child_usage(spent);
        }
        parent.add_child_cost(child.usage().total_cost());
        let answer = match outcome.stop {
            AgentStop::Completed => child.transcript_path().and_then(TranscriptAnswer::of_last_run),
            _ => None,
        };
        (outcome, answer)
    });
    let result = async move {
        match task.await {
            Ok((outcome, answer)) => {
                let result = with_structured(result_of(outcome), captured);
                Ok(match answer {
                    Some(answer) => result.with_text_source(Arc::new(answer)),
                    None => result,
                })
            }
            Err(error) => Err(SubagentError::failed(wording::child_panicked(&error.to_string()))),
        }
    };
    SubagentRun::new(id, result, move || async move {
        stop.cancel();
        // Waits until the child's task has ended; its outcome stays with the result.
        ended.cancelled().await;
        Ok(())
    })
    .with_steerer(steerer)
}

/// Strict live delivery into the child's turn ([`Agent::steer`]); refused
/// once a requested structured answer has been captured, since the run's
/// result is then decided.
fn steerer(child: Agent, captured: Option<Captured>) -> Steerer {
    Steerer::new(move |content| {
        let refused = |text: String| SubagentError::failed_with_code(text, SubagentCode::NotDelivered);
        let id = child.id().as_str();
        if let Some(captured) = &captured
            && captured.lock().unwrap_or_else(PoisonError::into_inner).is_some()
        {
            return Err(refused(wording::steer_structured_reported(id)));
        }
        child.steer(concat_text(&content)).map_err(|refusal| match refusal {
            SteerRefused::NotRunning => refused(wording::steer_not_running(id)),
            SteerRefused::TurnClosed => refused(wording::steer_turn_closed(id)),
        })
    })
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

/// Maps a run outcome to the seam's result (docs/contract.md, "Stop reasons").
fn result_of(outcome: RunOutcome) -> SubagentResult {
    let output = if outcome.text.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(outcome.text)]
    };
    let result = SubagentResult::new(stop_reason(&outcome.stop), output);
    match outcome.stop {
        AgentStop::MaxTurns(limit) => result.with_diagnostic(wording::max_turns_diagnostic(limit)),
        AgentStop::Error(message) => result.with_diagnostic(wording::model_error_diagnostic(&message)),
        AgentStop::AnswerCut(message) => result.with_diagnostic(wording::answer_cut_diagnostic(&message)),
        AgentStop::ContextWindow(context) => result.with_diagnostic(context.line()),
        _ => result,
    }
}

/// The seam's stop reason of a run that stopped `stop`.
pub(crate) fn stop_reason(stop: &AgentStop) -> StopReason {
    match stop {
        AgentStop::Completed => StopReason::Completed,
        AgentStop::MaxTokens | AgentStop::TokenBudget(_) | AgentStop::CostBudget(_) => StopReason::MaxTokens,
        AgentStop::Refusal => StopReason::Refusal,
        AgentStop::Cancelled => StopReason::Aborted,
        AgentStop::Interrupted => StopReason::Interrupted,
        AgentStop::MaxTurns(_) | AgentStop::Error(_) | AgentStop::AnswerCut(_) => StopReason::Error,
        AgentStop::ContextWindow(_) => StopReason::Other(wording::CONTEXT_WINDOW_STOP.to_owned()),
    }
}
