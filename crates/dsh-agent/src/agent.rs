//! The agent: its place in a delegation tree, its conversation, limits and
//! transcript, and the builder that makes one. One run of its loop (model →
//! tool calls → tool results → model, until a final answer, a limit, or
//! cancellation) is in [`run`]; fitting it to a context window in [`fit`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use dsh_llm::{Message, Usage};
use dsh_subagent_api::{ChildLog, Lineage, RecordedChild, RemoteChild, ToolFilter};
use dsh_tools::{AgentId, AgentRef};

use crate::transcript::{
    OpenTurn, StartRecord, TRANSCRIPT_VERSION, Transcript, TranscriptEntry, TranscriptWriter, transcript_path,
};
use crate::usage::{Priced, UsageTotals, add_reported};
use crate::{AgentInfo, AgentRuntime, ContextWindow, ToolView};

mod fit;
mod run;

use fit::ContextState;

/// The default limit of model calls per run.
pub const DEFAULT_MAX_TURNS: u32 = 16;

/// An agent: an id, a place in a delegation tree, a model, a system prompt,
/// a tool view, limits, a conversation and a transcript.
///
/// Cheap to clone; clones are the same agent. One run at a time: a second
/// [`Agent::run`] waits for the first. The conversation keeps only completed
/// runs, so a fork always sees balanced turns (every tool call answered).
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    info: AgentInfo,
    runtime: Arc<AgentRuntime>,
    system_prompt: Option<String>,
    model_override: Option<String>,
    max_tokens: Option<u64>,
    max_turns: u32,
    context_window: Option<ContextWindow>,
    tools: ToolView,
    lineage: Lineage,
    state: Mutex<State>,
    transcript: Option<TranscriptWriter>,
    run_lock: tokio::sync::Mutex<()>,
    runs: Runs,
    /// The turn an interrupted agent had not ended, and the children its
    /// records name by call, taken by its next run ([`Agent::resume`]).
    resumable: Mutex<Option<Resumable>>,
}

/// What a resumed agent's next run goes on with.
#[derive(Debug, Default)]
pub(crate) struct Resumable {
    pub(crate) open: Option<OpenTurn>,
    pub(crate) children: BTreeMap<String, RecordedChild>,
}

/// How many runs an agent makes, and so whether it keeps its conversation
/// after a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Runs {
    /// Any number: each run's turn joins the conversation the next one
    /// continues.
    #[default]
    Many,
    /// One: a child a provider starts or resumes, whose continuation is a new
    /// agent read back from its transcript. Nothing reads its conversation
    /// after its run, so the run's answer moves into its outcome instead of
    /// being copied there, and a long answer is held once.
    Once,
}

#[derive(Default)]
struct State {
    history: Vec<Message>,
    usage: UsageTotals,
    inbox: Inbox,
    context: ContextState,
    /// How long the next run's start waited for a slot, recorded on its
    /// turn's end once.
    queued_ms: Option<u64>,
}

/// Messages steered into the run in progress ([`Agent::steer`]).
#[derive(Default)]
struct Inbox {
    phase: Phase,
    /// Accepted, not yet read by the run.
    pending: Vec<String>,
}

/// Whether the agent's turn accepts steered messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// No run has started yet.
    #[default]
    Idle,
    /// A run is open: messages join it.
    Open,
    /// The last run closed its turn.
    Closed,
}

/// Why [`Agent::steer`] refused a message. Nothing of it was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SteerRefused {
    /// The agent has not run yet.
    #[error("{}", crate::wording::AGENT_NOT_RUNNING)]
    NotRunning,
    /// The agent's last run has already closed its turn.
    #[error("{}", crate::wording::AGENT_TURN_CLOSED)]
    TurnClosed,
}

/// Why an agent could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The tool filter is invalid (names an unknown tool).
    #[error("{0}")]
    ToolFilter(String),
    /// The transcript file could not be created.
    #[error("{}", crate::wording::transcript_not_created(id, source))]
    Transcript {
        /// The agent.
        id: AgentId,
        /// The cause.
        source: std::io::Error,
    },
    /// The agent's tree has a money budget, and its model has no price
    /// ([`AgentRuntime::with_price`]): what it spends could never be counted.
    #[error("{}", crate::wording::unpriced_model(model))]
    Unpriced {
        /// The model without a price.
        model: String,
    },
}

/// Builds an [`Agent`].
#[must_use]
pub struct AgentBuilder {
    runtime: Arc<AgentRuntime>,
    id: Option<AgentId>,
    parent: Option<AgentId>,
    depth: u64,
    label: Option<String>,
    system_prompt: Option<String>,
    model_override: Option<String>,
    max_tokens: Option<u64>,
    max_turns: u32,
    context_window: Option<ContextWindow>,
    tool_filter: Option<ToolFilter>,
    local_tools: Vec<Arc<dyn dsh_tools::Tool>>,
    seed: Vec<Message>,
    descriptor: Option<serde_json::Value>,
    lineage: Lineage,
    continued: bool,
    start: Option<StartRecord>,
    queued: Option<std::time::Duration>,
    runs: Runs,
    resumable: Option<Resumable>,
}

// By hand: local tools are shown by name.
impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("id", &self.id)
            .field("parent", &self.parent)
            .field("depth", &self.depth)
            .field("label", &self.label)
            .field("model_override", &self.model_override)
            .field("max_turns", &self.max_turns)
            .field("tool_filter", &self.tool_filter)
            .field(
                "local_tools",
                &self.local_tools.iter().map(|tool| tool.name()).collect::<Vec<_>>(),
            )
            .field("continued", &self.continued)
            .field("resumable", &self.resumable)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// Records a continuable child's descriptor in its new transcript, right
    /// after the header (and seed), before its first turn.
    pub fn descriptor(mut self, descriptor: serde_json::Value) -> Self {
        self.descriptor = Some(descriptor);
        self
    }

    /// Continues an existing agent: `history` is its conversation so far and
    /// its transcript is appended to, with no new header (set the same
    /// [`id`](Self::id)). Repair a torn transcript tail first
    /// ([`repair_torn_tail`](crate::transcript::repair_torn_tail)).
    pub fn continue_from(mut self, history: Vec<Message>) -> Self {
        self.seed = history;
        self.continued = true;
        self
    }

    /// Continues the agent whose transcript is `transcript` (set the same
    /// [`id`](Self::id); repair a torn tail first with
    /// [`repair_for_resume`](crate::transcript::repair_for_resume)): its
    /// ended turns are its history, and the turn it had not ended, if any, is
    /// what its next run goes on with ([`Agent::resume`]), the children its
    /// records name included.
    pub fn resume_from(mut self, transcript: &Transcript) -> Self {
        let turns = transcript.turns();
        self.resumable = Some(Resumable {
            open: turns.open,
            children: transcript.children_by_call(),
        });
        self.continue_from(turns.history)
    }

    /// Gives this agent a tool of its own, outside the shared registry.
    pub fn local_tool(mut self, tool: Arc<dyn dsh_tools::Tool>) -> Self {
        self.local_tools.push(tool);
        self
    }

    /// Sets the id (default: a random UUID).
    pub fn id(mut self, id: impl Into<AgentId>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the parent, for a child.
    pub fn parent(mut self, parent: AgentId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Sets the delegation depth (0 for a top-level agent).
    pub fn depth(mut self, depth: u64) -> Self {
        self.depth = depth;
        self
    }

    /// Sets the display label.
    pub fn label(mut self, label: Option<String>) -> Self {
        self.label = label;
        self
    }

    /// Sets the system prompt.
    pub fn system_prompt(mut self, system_prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(system_prompt.into());
        self
    }

    /// Names a model on the runtime's client (default: the client's own).
    pub fn model(mut self, model: Option<String>) -> Self {
        self.model_override = model;
        self
    }

    /// Caps the output tokens of each model call.
    pub fn max_tokens(mut self, max_tokens: Option<u64>) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the context window of the agent's model: each request is fitted
    /// into it, less a reserve for the answer (its `max_tokens`, or
    /// [`DEFAULT_ANSWER_RESERVE`](crate::DEFAULT_ANSWER_RESERVE)). Without
    /// one the runtime's window applies when the agent uses the runtime's
    /// model ([`AgentRuntime::with_context_window`]); otherwise the window is
    /// learned from the server's first refusal that names it.
    pub fn context_window(mut self, window: Option<ContextWindow>) -> Self {
        self.context_window = window;
        self
    }

    /// Caps the model calls of each run (default [`DEFAULT_MAX_TURNS`]).
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = max_turns;
        self
    }

    /// Hides and refuses the tools the filter does not permit.
    pub fn tool_filter(mut self, filter: ToolFilter) -> Self {
        self.tool_filter = Some(filter);
        self
    }

    /// Places the agent in its delegation tree: a top-level agent gets its
    /// tree's lineage, a child the one its start request carries. Its model
    /// calls stop once a budget of the lineage is spent, and its own
    /// delegations pass the tree's gate.
    pub fn lineage(mut self, lineage: Lineage) -> Self {
        self.lineage = lineage;
        self
    }

    /// Records how a child came about (the tool that asked for it, the
    /// provider that runs it) in its transcript's header, and how long its
    /// start waited for a slot on its first run's end. A tree view reads
    /// both back ([`StartRecord`], [`TurnTimes`](crate::transcript::TurnTimes)).
    /// `mode` says whether its caller went on while it ran (a background
    /// child, which a resume restores as a task).
    pub fn provenance(mut self, provenance: &dsh_subagent_api::Provenance, mode: dsh_subagent_api::RunMode) -> Self {
        let start = StartRecord::new(
            provenance.tool.clone(),
            provenance.call_id.clone(),
            provenance.provider.clone(),
        )
        .with_task_id(provenance.task_id.clone())
        .in_background(mode == dsh_subagent_api::RunMode::Background);
        self.start = (!start.is_empty()).then_some(start);
        self.queued = (!provenance.queued.is_zero()).then_some(provenance.queued);
        self
    }

    /// Makes an agent that runs once ([`Runs::Once`]).
    pub(crate) fn runs_once(mut self) -> Self {
        self.runs = Runs::Once;
        self
    }

    /// Seeds the conversation (a fork's inherited turns).
    pub fn seed(mut self, messages: Vec<Message>) -> Self {
        self.seed = messages;
        self
    }

    /// Builds the agent and, with a data directory, starts its transcript.
    pub fn build(mut self) -> Result<Agent, AgentError> {
        let mut tools = match self.tool_filter.take() {
            Some(filter) => ToolView::filtered(self.runtime.tools().clone(), filter)
                .map_err(|error| AgentError::ToolFilter(error.to_string()))?,
            None => ToolView::all(self.runtime.tools().clone()),
        };
        for tool in std::mem::take(&mut self.local_tools) {
            tools = tools.with_local(tool);
        }
        let id = self
            .id
            .take()
            .unwrap_or_else(|| AgentId::new(uuid::Uuid::new_v4().to_string()));
        let model = self
            .model_override
            .clone()
            .unwrap_or_else(|| self.runtime.model().model_name().to_owned());
        if self.lineage.cost_budget().is_some() && self.runtime.price(&model).is_none() {
            return Err(AgentError::Unpriced { model });
        }
        let info = AgentInfo {
            id: id.clone(),
            parent: self.parent.take(),
            depth: self.depth,
            label: self.label.take(),
            model,
        };
        let transcript = match self.runtime.data_dir() {
            Some(dir) => {
                let writer = TranscriptWriter::open(transcript_path(dir, &id))
                    .map_err(|source| AgentError::Transcript { id: id.clone(), source })?;
                if self.continued {
                    return Ok(self.finish(info, tools, Some(writer)));
                }
                let header = TranscriptEntry::Header {
                    version: TRANSCRIPT_VERSION,
                    id: id.clone(),
                    parent: info.parent.clone(),
                    depth: info.depth,
                    label: info.label.clone(),
                    model: info.model.clone(),
                    system_prompt: self.system_prompt.clone(),
                    created_at_ms: SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |elapsed| elapsed.as_millis() as u64),
                    start: self.start.clone(),
                };
                writer
                    .append(&header)
                    .map_err(|source| AgentError::Transcript { id: id.clone(), source })?;
                if !self.seed.is_empty() {
                    writer
                        .append(&TranscriptEntry::Seed {
                            messages: self.seed.clone(),
                        })
                        .map_err(|source| AgentError::Transcript { id: id.clone(), source })?;
                }
                if let Some(descriptor) = &self.descriptor {
                    writer
                        .append(&TranscriptEntry::Descriptor {
                            descriptor: descriptor.clone(),
                        })
                        .and_then(|()| writer.flush())
                        .map_err(|source| AgentError::Transcript { id: id.clone(), source })?;
                }
                Some(writer)
            }
            None => None,
        };
        Ok(self.finish(info, tools, transcript))
    }

    fn finish(self, info: AgentInfo, tools: ToolView, transcript: Option<TranscriptWriter>) -> Agent {
        Agent {
            inner: Arc::new(Inner {
                info,
                runtime: self.runtime,
                system_prompt: self.system_prompt,
                model_override: self.model_override,
                max_tokens: self.max_tokens,
                max_turns: self.max_turns,
                context_window: self.context_window,
                tools,
                lineage: self.lineage,
                state: Mutex::new(State {
                    history: self.seed,
                    usage: UsageTotals::default(),
                    inbox: Inbox::default(),
                    context: ContextState::default(),
                    queued_ms: self
                        .queued
                        .map(|queued| u64::try_from(queued.as_millis()).unwrap_or(u64::MAX)),
                }),
                transcript,
                run_lock: tokio::sync::Mutex::new(()),
                runs: self.runs,
                resumable: Mutex::new(self.resumable),
            }),
        }
    }
}

impl Agent {
    /// A builder for an agent on `runtime`.
    pub fn builder(runtime: Arc<AgentRuntime>) -> AgentBuilder {
        AgentBuilder {
            runtime,
            id: None,
            parent: None,
            depth: 0,
            label: None,
            system_prompt: None,
            model_override: None,
            max_tokens: None,
            max_turns: DEFAULT_MAX_TURNS,
            context_window: None,
            tool_filter: None,
            local_tools: Vec::new(),
            seed: Vec::new(),
            descriptor: None,
            lineage: Lineage::default(),
            continued: false,
            start: None,
            queued: None,
            runs: Runs::Many,
            resumable: None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.inner.info.id
    }

    /// Who the agent is.
    pub fn info(&self) -> &AgentInfo {
        &self.inner.info
    }

    /// The runtime it shares with its tree.
    pub fn runtime(&self) -> &Arc<AgentRuntime> {
        &self.inner.runtime
    }

    /// Its system prompt.
    pub fn system_prompt(&self) -> Option<&str> {
        self.inner.system_prompt.as_deref()
    }

    /// The model it names on the runtime's client, if not the default.
    pub fn model_override(&self) -> Option<&str> {
        self.inner.model_override.as_deref()
    }

    /// Its per-call output-token cap.
    pub fn max_tokens(&self) -> Option<u64> {
        self.inner.max_tokens
    }

    /// The context window set on the agent itself
    /// ([`AgentBuilder::context_window`]), not the runtime's or a learned one.
    pub fn context_window(&self) -> Option<ContextWindow> {
        self.inner.context_window
    }

    /// The window its requests are fitted into now, in tokens: its own or
    /// the runtime's for its model, or the smaller window a server named
    /// when it refused a request to that model. A window an earlier run
    /// kept stands in for a configured one only where none is configured:
    /// the configuration is the newer word.
    pub fn effective_context_window(&self) -> Option<u64> {
        let runtime = &self.inner.runtime;
        let model = &self.inner.info.model;
        let configured = self.inner.context_window.or_else(|| {
            runtime
                .context_window()
                .filter(|_| runtime.model().model_name() == model.as_str())
        });
        let learned = runtime.learned().window(model);
        match (configured.map(ContextWindow::tokens), learned) {
            (Some(configured), Some(learned)) if !learned.kept => Some(configured.min(learned.tokens)),
            (Some(configured), _) => Some(configured),
            (None, learned) => learned.map(|learned| learned.tokens),
        }
    }

    /// Its per-run model-call cap.
    pub fn max_turns(&self) -> u32 {
        self.inner.max_turns
    }

    /// The tools it may see and call.
    pub fn tools(&self) -> &ToolView {
        &self.inner.tools
    }

    /// The conversation of completed runs (a seed first, for a fork).
    pub fn history(&self) -> Vec<Message> {
        self.lock().history.clone()
    }

    /// Tokens spent by this agent and by its children, and what they cost
    /// where their prices are known.
    pub fn usage(&self) -> UsageTotals {
        self.lock().usage
    }

    /// Adds a finished child's total to this agent's children usage.
    pub fn add_child_usage(&self, usage: Usage) {
        let mut state = self.lock();
        state.usage.children = add_reported(state.usage.children, Some(usage));
    }

    /// Adds a finished child's total cost ([`UsageTotals::total_cost`]) to
    /// this agent's children cost: [`Priced::Unknown`] for a child whose
    /// tokens, or some of its children's, have no price.
    pub fn add_child_cost(&self, cost: Priced) {
        let mut state = self.lock();
        state.usage.children_cost = state.usage.children_cost + cost;
    }

    /// Its transcript file, when transcripts are kept.
    pub fn transcript_path(&self) -> Option<&std::path::Path> {
        self.inner.transcript.as_ref().map(TranscriptWriter::path)
    }

    /// A reference for tool calls made on this agent's behalf; in-process
    /// providers recover the agent from it with `handle::<Agent>()`.
    ///
    /// It also records in this agent's transcript (when it keeps one) the
    /// children that run in another process ([`ChildLog`]).
    pub fn agent_ref(&self) -> AgentRef {
        let agent = Arc::new(self.clone());
        let agent_ref = AgentRef::new(self.id().clone())
            .with_depth(self.inner.info.depth)
            .with_lineage(self.inner.lineage.clone())
            .with_handle(agent.clone());
        if self.inner.transcript.is_some() {
            agent_ref.with_child_log(agent)
        } else {
            agent_ref
        }
    }

    fn record(&self, entry: &TranscriptEntry) {
        if let Some(transcript) = &self.inner.transcript
            && let Err(error) = transcript.append(entry)
        {
            tracing::warn!(agent = %self.id(), "{}", crate::wording::log_transcript_write_failed(&error));
        }
    }

    /// Records in this agent's transcript that its in-process child `child`
    /// began a run, started by this agent's tool call `call_id` (on its
    /// first run).
    pub(crate) fn record_child(&self, child: &AgentId, call_id: Option<String>) {
        self.record(&TranscriptEntry::Child {
            id: child.clone(),
            call_id,
            elsewhere: None,
        });
    }

    fn record_message(&self, message: &Message, notices: &[String]) {
        if let Some(transcript) = &self.inner.transcript
            && let Err(error) = transcript.append_message(message, notices)
        {
            tracing::warn!(agent = %self.id(), "{}", crate::wording::log_transcript_write_failed(&error));
        }
    }

    /// Delivers `message` into the run in progress, strictly: it joins the
    /// open turn, or it is refused and nothing is recorded.
    ///
    /// A joined message becomes a user message of the current turn before
    /// the next model call. The turn does not end on a final answer while a
    /// joined message is unread: the model is called again, so the run's
    /// answer has seen every message that joined it. Acceptance and the
    /// turn's end are decided under one lock, so a message is never accepted
    /// by a turn that has already ended. A turn that ends otherwise
    /// (cancellation, a limit, an error) records unread messages before its
    /// end, so an accepted message is always in the transcript and history.
    pub fn steer(&self, message: impl Into<String>) -> Result<(), SteerRefused> {
        let mut state = self.lock();
        match state.inbox.phase {
            Phase::Idle => Err(SteerRefused::NotRunning),
            Phase::Closed => Err(SteerRefused::TurnClosed),
            Phase::Open => {
                state.inbox.pending.push(message.into());
                Ok(())
            }
        }
    }

    /// Opens the turn to steered messages before the run that will read them
    /// has been polled: a child is steerable from its publication on, not
    /// only once its task first runs. The caller must start that run.
    pub(crate) fn open_turn(&self) {
        self.lock().inbox.phase = Phase::Open;
    }
}

/// A child in another process: recorded in this agent's transcript, since
/// it keeps none beside it.
impl ChildLog for Agent {
    fn remote_child(&self, id: &str, child: &RemoteChild) {
        self.record(&TranscriptEntry::Child {
            id: AgentId::new(id),
            call_id: None,
            elsewhere: Some(child.clone()),
        });
    }

    fn child_starting(&self, id: &str, start: &dsh_subagent_api::ChildStart) {
        self.record(&TranscriptEntry::ChildStart {
            id: AgentId::new(id),
            start: start.clone(),
        });
    }
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("info", &self.inner.info).finish()
    }
}
