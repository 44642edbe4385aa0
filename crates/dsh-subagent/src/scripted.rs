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

    /// Copies of every start request received, in order.
    pub fn requests(&self) -> Vec<StartRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The last start request received.
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
/// use dsh_subagent::{scripted::ScriptedProvider, SubagentService};
/// use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let service = SubagentService::new();
/// let provider = ScriptedProvider::builder("mock").reply("hello from fixture").build();
/// let _registration = service.register_provider(provider.clone()).unwrap();
///
/// let request = StartRequest::text("hi", AgentRef::new("parent-1"), CancellationToken::new());
/// let mut run = service.start("mock", request).await.unwrap();
/// assert_eq!(run.id(), "scripted-subagent:mock:parent-1");
/// assert_eq!(run.result().await.unwrap().text(), "hello from fixture");
/// run.dispose().await.unwrap();
/// assert_eq!(provider.stats().disposes(), 1);
/// # });
/// ```
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    capabilities: Capabilities,
    inherits_parent_context: bool,
    reply: String,
    stop_reason: StopReason,
    diagnostic: Option<String>,
    structured: Option<serde_json::Value>,
    start: StartBehavior,
    result: ResultBehavior,
    dispose: DisposeBehavior,
    stats: Arc<ScriptedStats>,
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
            capabilities: Capabilities::ALL,
            inherits_parent_context: false,
            reply: DEFAULT_REPLY.to_owned(),
            stop_reason: StopReason::Completed,
            diagnostic: None,
            structured: None,
            start: StartBehavior::default(),
            result: ResultBehavior::default(),
            dispose: DisposeBehavior::default(),
            stats: Arc::default(),
        })
    }

    /// What the provider has been asked to do so far.
    pub fn stats(&self) -> &Arc<ScriptedStats> {
        &self.stats
    }

    fn outcome(&self, request: &StartRequest, cancelled: bool) -> SubagentResult {
        let stop_reason = if cancelled {
            StopReason::Aborted
        } else {
            self.stop_reason.clone()
        };
        let mut result = SubagentResult::new(stop_reason, vec![ContentBlock::text(self.reply.clone())]);
        if !result.stop_reason.is_completed()
            && let Some(diagnostic) = &self.diagnostic
        {
            result = result.with_diagnostic(diagnostic.clone());
        }
        if request.output_schema.is_some() && self.capabilities.output_schema {
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
    /// The capabilities to advertise (default: all).
    pub fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.0.capabilities = capabilities;
        self
    }

    /// Whether children inherit the parent's context (default: no).
    pub fn inherits_parent_context(mut self, inherits: bool) -> Self {
        self.0.inherits_parent_context = inherits;
        self
    }

    /// The child's answer text.
    pub fn reply(mut self, reply: impl Into<String>) -> Self {
        self.0.reply = reply.into();
        self
    }

    /// The stop reason of a run that is not cancelled.
    pub fn stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.0.stop_reason = stop_reason;
        self
    }

    /// A diagnostic attached to non-completed results.
    pub fn diagnostic(mut self, diagnostic: impl Into<String>) -> Self {
        self.0.diagnostic = Some(diagnostic.into());
        self
    }

    /// The structured value returned when an output schema is requested.
    pub fn structured(mut self, structured: serde_json::Value) -> Self {
        self.0.structured = Some(structured);
        self
    }

    /// What `start` does.
    pub fn on_start(mut self, behavior: StartBehavior) -> Self {
        self.0.start = behavior;
        self
    }

    /// What the result does.
    pub fn on_result(mut self, behavior: ResultBehavior) -> Self {
        self.0.result = behavior;
        self
    }

    /// What `dispose` does.
    pub fn on_dispose(mut self, behavior: DisposeBehavior) -> Self {
        self.0.dispose = behavior;
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
        self.capabilities
    }

    fn inherits_parent_context(&self) -> bool {
        self.inherits_parent_context
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move {
            self.stats.starts.fetch_add(1, Ordering::SeqCst);
            self.stats
                .requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(request.clone());
            if request.cancel.is_cancelled() {
                return Err(SubagentError::aborted(START_ABORTED));
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

impl ScriptedProvider {
    fn publish(&self, request: StartRequest) -> SubagentRun {
        self.stats.published.fetch_add(1, Ordering::SeqCst);
        let id = format!("scripted-subagent:{}:{}", self.name, request.parent.id());
        let run_token = request.cancel.child_token();
        let settled = self.outcome(&request, false);
        let aborted = self.outcome(&request, true);
        let stats = self.stats.clone();
        let watch_token = run_token.clone();
        let behavior = self.result.clone();
        let result = async move {
            let cancelled = async {
                watch_token.cancelled().await;
                stats.cancels_observed.fetch_add(1, Ordering::SeqCst);
            };
            match behavior {
                ResultBehavior::Settle if watch_token.is_cancelled() => Ok(aborted),
                ResultBehavior::Settle => Ok(settled),
                ResultBehavior::Gated(gate) => tokio::select! {
                    () = gate.pass() => Ok(settled),
                    () = cancelled => Ok(aborted),
                },
                ResultBehavior::UntilCancelled => {
                    cancelled.await;
                    Ok(aborted)
                }
                ResultBehavior::Fail(message) => Err(SubagentError::failed(message)),
                ResultBehavior::Hang => futures::future::pending().await,
                ResultBehavior::Panic => panic!("scripted subagent result panicked"),
            }
        };
        let stats = self.stats.clone();
        let behavior = self.dispose.clone();
        let dispose = move || async move {
            stats.disposes.fetch_add(1, Ordering::SeqCst);
            run_token.cancel();
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
