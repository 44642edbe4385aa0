//! A scripted provider: deterministic children for tests, examples and benchmarks.
//!
//! Every stage (start, result, dispose) can be told to succeed, fail, hang or
//! panic, and counters record what happened, so suites can pin the tool's
//! behaviour at every point of a child's life without a model.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dsh_subagent_api::{
    Capabilities, ContentBlock, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentResult, SubagentRun,
};
use futures::future::BoxFuture;
use serde_json::json;

use crate::Gate;

/// The reply a scripted child gives unless told otherwise.
pub const DEFAULT_REPLY: &str = "scripted subagent reply";

/// The rejection of a start cancelled before publication.
pub const START_ABORTED: &str = "scripted subagent start aborted before publication";

/// What `start` does.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum StartBehavior {
    /// Publish a run.
    #[default]
    Publish,
    /// Wait at the gate first (a cancellation while waiting rejects), then publish.
    Gated(Gate),
    /// Reject with this message.
    Fail(String),
    /// Never return, ignoring cancellation.
    Hang,
    /// Panic.
    Panic,
}

/// What the run's result does.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum ResultBehavior {
    /// Settle at once with the scripted stop reason (`aborted` if already cancelled).
    #[default]
    Settle,
    /// Wait at the gate, then settle; a cancellation while waiting settles `aborted`.
    Gated(Gate),
    /// Settle only when cancelled, as `aborted`.
    UntilCancelled,
    /// Reject with this message (an infrastructure fault, not a stop reason).
    Fail(String),
    /// Never settle, ignoring cancellation.
    Hang,
    /// Panic.
    Panic,
}

/// What `dispose` does.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum DisposeBehavior {
    /// Release and succeed.
    #[default]
    Release,
    /// Release and fail with this message.
    Fail(String),
    /// Never finish.
    Hang,
    /// Panic.
    Panic,
}

/// Counters of what a [`ScriptedProvider`] was asked to do.
#[derive(Debug, Default)]
pub struct ScriptedStats {
    starts: AtomicUsize,
    published: AtomicUsize,
    disposes: AtomicUsize,
    released: AtomicUsize,
    cancels_observed: AtomicUsize,
    requests: Mutex<Vec<StartRequest>>,
}

impl ScriptedStats {
    /// Calls of `start`.
    pub fn starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }

    /// Runs published.
    pub fn published(&self) -> usize {
        self.published.load(Ordering::SeqCst)
    }

    /// Runs whose release code ran (at most once per run).
    pub fn disposes(&self) -> usize {
        self.disposes.load(Ordering::SeqCst)
    }

    /// Published runs not yet released: what would still be running.
    pub fn live(&self) -> usize {
        self.published() - self.released.load(Ordering::SeqCst)
    }

    /// Times a run saw its token cancelled (at most once per run).
    pub fn cancels_observed(&self) -> usize {
        self.cancels_observed.load(Ordering::SeqCst)
    }

    /// Copies of every start request received, in order (none when recording
    /// is off: [`ScriptedProviderBuilder::record_requests`]).
    pub fn requests(&self) -> Vec<StartRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The last start request received (`None` when recording is off).
    pub fn last_request(&self) -> Option<StartRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned()
    }
}

/// A provider whose children follow a script instead of a model.
///
/// Defaults follow the reference fixture: every capability, a fresh (not
/// inherited) context, reply [`DEFAULT_REPLY`], stop reason `completed`, run id
/// `scripted-subagent:<name>:<parent id>`, a diagnostic only on non-completed
/// results, and a structured value (`{"reply": …}` unless scripted) only when
/// an output schema was requested.
///
/// ```
/// use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, SubagentProvider};
/// use dsh_subagent_testing::ScriptedProvider;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let provider = ScriptedProvider::builder("mock").reply("hello from fixture").build();
///
/// let request = StartRequest::text("hi", AgentRef::new("parent-1"), CancellationToken::new());
/// let mut run = provider.start(request).await.unwrap();
/// assert_eq!(run.id(), "scripted-subagent:mock:parent-1");
/// assert_eq!(run.result().await.unwrap().text(), "hello from fixture");
/// run.dispose().await.unwrap();
/// assert_eq!(provider.stats().disposes(), 1);
/// # });
/// ```
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    inherits_parent_context: bool,
    script: Arc<Script>,
    start: StartBehavior,
    /// Shared by every run: a held run carries a pointer, not the behaviour.
    result: Arc<ResultBehavior>,
    dispose: DisposeBehavior,
    holds: Holds,
    record_requests: bool,
    stats: Arc<ScriptedStats>,
}

/// What a settled result says; shared by every run, read only when it settles.
#[derive(Clone, Debug)]
struct Script {
    capabilities: Capabilities,
    reply: String,
    stop_reason: StopReason,
    diagnostic: Option<String>,
    structured: Option<serde_json::Value>,
}

/// Gates each stage waits at before its scripted behaviour.
#[derive(Clone, Debug, Default)]
struct Holds {
    start: Option<Gate>,
    result: Option<Gate>,
    dispose: Option<Gate>,
}

/// Builds a [`ScriptedProvider`].
#[derive(Debug)]
#[must_use]
pub struct ScriptedProviderBuilder(ScriptedProvider);

impl ScriptedProvider {
    /// A builder for a provider registered under `name`.
    pub fn builder(name: impl Into<String>) -> ScriptedProviderBuilder {
        ScriptedProviderBuilder(Self {
            name: name.into(),
            inherits_parent_context: false,
            script: Arc::new(Script {
                capabilities: Capabilities::ALL,
                reply: DEFAULT_REPLY.to_owned(),
                stop_reason: StopReason::Completed,
                diagnostic: None,
                structured: None,
            }),
            start: StartBehavior::default(),
            result: Arc::default(),
            dispose: DisposeBehavior::default(),
            holds: Holds::default(),
            record_requests: true,
            stats: Arc::default(),
        })
    }

    /// What the provider has been asked to do so far.
    pub fn stats(&self) -> &Arc<ScriptedStats> {
        &self.stats
    }
}

/// How a scripted run settles: on its own, or because it was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// It ran to its scripted end.
    Ran,
    /// Its token was cancelled first.
    Cancelled,
}

impl Script {
    /// The settled result: `aborted` when cancelled, else the scripted stop reason.
    fn outcome(&self, wants_structured: bool, settled: Settled) -> SubagentResult {
        let stop_reason = match settled {
            Settled::Cancelled => StopReason::Aborted,
            Settled::Ran => self.stop_reason.clone(),
        };
        let mut result = SubagentResult::new(stop_reason, vec![ContentBlock::text(self.reply.clone())]);
        if !result.stop_reason.is_completed()
            && let Some(diagnostic) = &self.diagnostic
        {
            result = result.with_diagnostic(diagnostic.clone());
        }
        if wants_structured && self.capabilities.output_schema {
            let structured = self
                .structured
                .clone()
                .unwrap_or_else(|| json!({ "reply": self.reply }));
            result = result.with_structured(structured);
        }
        result
    }
}

impl ScriptedProviderBuilder {
    fn script(&mut self) -> &mut Script {
        // The builder is the script's only owner, so this never copies.
        Arc::make_mut(&mut self.0.script)
    }

    /// The capabilities to advertise (default: all).
    pub fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.script().capabilities = capabilities;
        self
    }

    /// Whether children inherit the parent's context (default: no).
    pub fn inherits_parent_context(mut self, inherits: bool) -> Self {
        self.0.inherits_parent_context = inherits;
        self
    }

    /// The child's answer text.
    pub fn reply(mut self, reply: impl Into<String>) -> Self {
        self.script().reply = reply.into();
        self
    }

    /// The stop reason of a run that is not cancelled.
    pub fn stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.script().stop_reason = stop_reason;
        self
    }

    /// A diagnostic attached to non-completed results.
    pub fn diagnostic(mut self, diagnostic: impl Into<String>) -> Self {
        self.script().diagnostic = Some(diagnostic.into());
        self
    }

    /// The structured value returned when an output schema is requested.
    pub fn structured(mut self, structured: serde_json::Value) -> Self {
        self.script().structured = Some(structured);
        self
    }

    /// What `start` does.
    pub fn on_start(mut self, behavior: StartBehavior) -> Self {
        self.0.start = behavior;
        self
    }

    /// What the result does.
    pub fn on_result(mut self, behavior: ResultBehavior) -> Self {
        self.0.result = Arc::new(behavior);
        self
    }

    /// What `dispose` does.
    pub fn on_dispose(mut self, behavior: DisposeBehavior) -> Self {
        self.0.dispose = behavior;
        self
    }

    /// Holds every `start` at `gate` before its scripted behaviour. The hold
    /// ignores cancellation, like a provider busy in setup: once the gate
    /// opens, the behaviour runs (and a publish still rejects if the token
    /// was cancelled meanwhile).
    pub fn hold_start(mut self, gate: Gate) -> Self {
        self.0.holds.start = Some(gate);
        self
    }

    /// Holds every run's result at `gate` before its scripted behaviour,
    /// ignoring cancellation; once open, a [`ResultBehavior::Settle`] run that
    /// was cancelled meanwhile settles `aborted`.
    pub fn hold_result(mut self, gate: Gate) -> Self {
        self.0.holds.result = Some(gate);
        self
    }

    /// Holds every release at `gate` before its scripted behaviour, ignoring
    /// cancellation. The release counts in [`ScriptedStats::disposes`] on
    /// arrival.
    pub fn hold_dispose(mut self, gate: Gate) -> Self {
        self.0.holds.dispose = Some(gate);
        self
    }

    /// Whether `start` keeps a copy of every request for
    /// [`ScriptedStats::requests`] (default: yes). Turn it off where many
    /// starts run (benchmarks, soak tests): the record grows without bound.
    pub fn record_requests(mut self, record: bool) -> Self {
        self.0.record_requests = record;
        self
    }

    /// The provider, ready to register.
    pub fn build(self) -> Arc<ScriptedProvider> {
        Arc::new(self.0)
    }
}

impl SubagentProvider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        self.script.capabilities
    }

    fn inherits_parent_context(&self) -> bool {
        self.inherits_parent_context
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move {
            self.stats.starts.fetch_add(1, Ordering::SeqCst);
            if self.record_requests {
                self.stats
                    .requests
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(request.clone());
            }
            if request.cancel.is_cancelled() {
                return Err(SubagentError::aborted(START_ABORTED));
            }
            if let Some(gate) = &self.holds.start {
                gate.pass().await;
            }
            match &self.start {
                StartBehavior::Publish => {}
                StartBehavior::Gated(gate) => {
                    tokio::select! {
                        () = gate.pass() => {}
                        () = request.cancel.cancelled() => return Err(SubagentError::aborted(START_ABORTED)),
                    }
                }
                StartBehavior::Fail(message) => return Err(SubagentError::failed(message.clone())),
                StartBehavior::Hang => futures::future::pending::<()>().await,
                StartBehavior::Panic => panic!("scripted subagent start panicked"),
            }
            // The handoff window: a cancellation that landed while publishing still rejects.
            if request.cancel.is_cancelled() {
                return Err(SubagentError::aborted(START_ABORTED));
            }
            Ok(self.publish(request))
        })
    }
}

/// The start of every scripted run id: `scripted-subagent:<name>:<parent id>`.
const PREFIX: &str = "scripted-subagent:";

impl ScriptedProvider {
    fn publish(&self, request: StartRequest) -> SubagentRun {
        self.stats.published.fetch_add(1, Ordering::SeqCst);
        // Built by hand: `format!` costs several times as much on this path.
        let parent = request.parent.id().as_str();
        let mut id = String::with_capacity(PREFIX.len() + self.name.len() + 1 + parent.len());
        for part in [PREFIX, &self.name, ":", parent] {
            id.push_str(part);
        }
        let run_token = request.cancel.child_token();
        let wants_structured = request.settings().output_schema.is_some();
        drop(request);
        let script = self.script.clone();
        let stats = self.stats.clone();
        let watch_token = run_token.clone();
        let behavior = self.result.clone();
        let hold = self.holds.result.clone();
        // Kept small, as a real provider's would be: a bench holds one of
        // these per delegation in flight.
        let result = async move {
            if let Some(gate) = hold {
                gate.pass().await;
            }
            let settled = match &*behavior {
                ResultBehavior::Settle if watch_token.is_cancelled() => Settled::Cancelled,
                ResultBehavior::Settle => Settled::Ran,
                ResultBehavior::Gated(gate) => tokio::select! {
                    () = gate.pass() => Settled::Ran,
                    () = watch_token.cancelled() => {
                        stats.cancels_observed.fetch_add(1, Ordering::SeqCst);
                        Settled::Cancelled
                    }
                },
                ResultBehavior::UntilCancelled => {
                    watch_token.cancelled().await;
                    stats.cancels_observed.fetch_add(1, Ordering::SeqCst);
                    Settled::Cancelled
                }
                ResultBehavior::Fail(message) => return Err(SubagentError::failed(message.clone())),
                ResultBehavior::Hang => futures::future::pending().await,
                ResultBehavior::Panic => panic!("scripted subagent result panicked"),
            };
            Ok(script.outcome(wants_structured, settled))
        };
        let stats = self.stats.clone();
        let behavior = self.dispose.clone();
        let hold = self.holds.dispose.clone();
        let dispose = move || async move {
            stats.disposes.fetch_add(1, Ordering::SeqCst);
            run_token.cancel();
            if let Some(gate) = hold {
                gate.pass().await;
            }
            match behavior {
                DisposeBehavior::Release => {
                    stats.released.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
                DisposeBehavior::Fail(message) => {
                    stats.released.fetch_add(1, Ordering::SeqCst);
                    Err(SubagentError::failed(message))
                }
                DisposeBehavior::Hang => futures::future::pending().await,
                DisposeBehavior::Panic => panic!("scripted subagent dispose panicked"),
            }
        };
        SubagentRun::new(id, result, dispose)
    }
}
