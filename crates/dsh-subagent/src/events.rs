//! Service events: providers coming and going, runs starting and ending,
//! and the subscribers who hear them ([`Events`]).
//!
//! Run events are the one report of a child's lifecycle for every provider,
//! in-process or not: a harness shows "a child started" and "a child ended"
//! from them. What happens inside an in-process agent's run (streamed text,
//! model calls, tool calls) is the agent loop's to report; see "Observation"
//! in `docs/design.md`.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use dsh_subagent_api::{
    AgentId, CancellationToken, ContentBlock, RunMode, StopReason, SubagentError, SubagentProvider, SubagentRun,
    concat_text,
};
use dsh_tools::budget::TextSize;
use dsh_tools::panic_message;

use crate::wording;

/// What a run-started event says about a run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunInfo {
    /// The number of the run's announcement: 1, 2, 3… in the order runs
    /// are announced by this [`SubagentService`](crate::SubagentService)
    /// (each service counts its own, from 1; a run announced while nobody
    /// listens takes no number). So it tells the runs of one service apart
    /// while it lives, even when provider and child ids repeat; it is not
    /// unique across services, processes or restarts.
    pub run_id: u64,
    /// The provider's name.
    pub provider: String,
    /// The run handle's id, as its provider names it
    /// ([`SubagentRun::id`](dsh_subagent_api::SubagentRun::id)): no
    /// uniqueness is promised beyond what the provider gives.
    pub id: String,
    /// The delegating agent.
    pub parent: AgentId,
    /// The child's delegation depth: its parent's depth plus one.
    pub depth: u64,
    /// The child's display label, when the request had one.
    pub label: Option<String>,
    /// The start of the child's task: its prompt's text, at most
    /// [`TASK_PREVIEW_CHARS`] characters (cut with `…`); absent when the
    /// prompt has no text, or for a continuation.
    pub task: Option<String>,
    /// Whether its caller waits for it (a foreground delegation) or goes on
    /// while it runs (a background task, a continuable child).
    pub mode: RunMode,
}

/// The most characters of a child's task a [`RunInfo`] carries: enough to
/// show what it was asked, never the whole of a long prompt.
pub const TASK_PREVIEW_CHARS: usize = 200;

/// The start of a prompt's text for [`RunInfo::task`], read without copying
/// the whole prompt: at most [`TASK_PREVIEW_CHARS`] characters, the last
/// one `…` when cut; `None` when it has no text.
pub(crate) fn task_preview(prompt: &[ContentBlock]) -> Option<String> {
    preview(
        prompt
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .flat_map(str::chars),
    )
}

/// The start of a task's text as [`RunInfo::task`] gives it: at most
/// [`TASK_PREVIEW_CHARS`] characters, the last one `…` when cut, trimmed;
/// `None` when nothing is left. A record of a child's prompt read back
/// (a transcript) shows the same start as its live run did.
///
/// ```
/// assert_eq!(dsh_subagent::task_preview_text("  read the docs "), Some("read the docs".to_owned()));
/// assert_eq!(dsh_subagent::task_preview_text(&"x".repeat(500)).unwrap().chars().count(), 200);
/// assert_eq!(dsh_subagent::task_preview_text(" "), None);
/// ```
pub fn task_preview_text(text: &str) -> Option<String> {
    preview(text.chars())
}

fn preview(mut chars: impl Iterator<Item = char>) -> Option<String> {
    let mut preview: String = chars.by_ref().take(TASK_PREVIEW_CHARS).collect();
    if chars.next().is_some() {
        preview.pop();
        preview.push('…');
    }
    let preview = preview.trim();
    (!preview.is_empty()).then(|| preview.to_owned())
}

/// Who a published run is, for its announcement ([`Events::announce`]).
pub(crate) struct RunStart {
    /// The delegating agent.
    pub(crate) parent: AgentId,
    /// The child's depth: its parent's plus one.
    pub(crate) depth: u64,
    /// Its display label.
    pub(crate) label: Option<String>,
    /// The start of its task ([`task_preview`]).
    pub(crate) task: Option<String>,
    /// Whether its caller waits for it.
    pub(crate) mode: RunMode,
    /// The token that cancels this run alone (its start's), kept while it
    /// runs for [`SubagentService::cancel_run`](crate::SubagentService::cancel_run).
    pub(crate) cancel: Option<CancellationToken>,
}

/// What a run-ended event adds: how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunEndInfo {
    /// The run, as announced when it started.
    pub run: RunInfo,
    /// Why it stopped (`error` when the result itself failed).
    pub stop_reason: StopReason,
    /// The text of its output; absent when the output was empty.
    pub last_assistant_message: Option<String>,
    /// Its provider's explanation of a stop that is not a success (say, the
    /// line of a `context-window` stop), when it gave one.
    pub diagnostic: Option<String>,
}

/// What a run-queued event says: a start that waits for a slot of its
/// delegation tree.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedInfo {
    /// The run's id: its [`RunInfo::run_id`] once it starts.
    pub run_id: u64,
    /// The provider's name.
    pub provider: String,
    /// The delegating agent.
    pub parent: AgentId,
    /// The child's delegation depth.
    pub depth: u64,
    /// The child's display label, when the request had one.
    pub label: Option<String>,
    /// Calls ahead of it in the queue.
    pub ahead: usize,
}

/// What a result-cut event says: a delegation's result was longer than its
/// result budget, so the model read only part of it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CutInfo {
    /// The agent that reads the result.
    pub parent: AgentId,
    /// The child's delegation depth: its parent's depth plus one.
    pub depth: u64,
    /// The child's display label, when the request had one.
    pub label: Option<String>,
    /// The size of the whole result.
    pub full: TextSize,
    /// How much of it the model reads (the notice not counted).
    pub shown: TextSize,
    /// The task whose output keeps the whole result for paged reads
    /// (`task_output` with an `offset`), when it is kept.
    pub task_id: Option<String>,
    /// Whether the cut result is the child's answer or an error.
    pub outcome: CutOutcome,
}

/// What a cut result was ([`CutInfo::outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CutOutcome {
    /// The child completed: its answer was cut.
    Completed,
    /// The run failed: its error, partial output included, was cut.
    Failed,
}

impl CutInfo {
    /// A cut of the result of `parent`'s child at `depth`: `full` in all,
    /// `shown` of it read.
    pub fn new(parent: AgentId, depth: u64, outcome: CutOutcome, full: TextSize, shown: TextSize) -> Self {
        Self {
            parent,
            depth,
            label: None,
            full,
            shown,
            task_id: None,
            outcome,
        }
    }

    /// Sets the child's display label.
    #[must_use]
    pub fn label(mut self, label: Option<String>) -> Self {
        self.label = label;
        self
    }

    /// Sets the task that keeps the whole result.
    #[must_use]
    pub fn task_id(mut self, task_id: Option<String>) -> Self {
        self.task_id = task_id;
        self
    }
}

/// How long a queued start waited, when it left the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitInfo {
    /// The run's id, as its [`QueuedInfo`] announced it.
    pub run_id: u64,
    /// How long it waited.
    pub waited: Duration,
}

/// A change in the service.
#[derive(Clone)]
#[non_exhaustive]
pub enum SubagentEvent {
    /// A provider was registered. A listener that fails rolls the registration back.
    ProviderAdded(Arc<dyn SubagentProvider>),
    /// A provider was unregistered. Runs it already returned are untouched.
    ProviderRemoved(String),
    /// A run was published. Always precedes its [`SubagentEvent::RunEnded`].
    RunStarted(RunInfo),
    /// A run's result settled.
    RunEnded(RunEndInfo),
    /// A start waits for a slot of its delegation tree. Followed by
    /// [`SubagentEvent::RunAdmitted`] or [`SubagentEvent::RunWithdrawn`].
    RunQueued(QueuedInfo),
    /// A queued start got its slot; its [`SubagentEvent::RunStarted`]
    /// follows once the provider publishes it.
    RunAdmitted(WaitInfo),
    /// A queued start was cancelled and left the queue: nothing started.
    RunWithdrawn(WaitInfo),
    /// A foreground run's result, after its [`SubagentEvent::RunEnded`],
    /// was longer than its result budget: the model read part of it, and
    /// the rest is kept for paged reads when the caller has `task_output`.
    ResultCut(CutInfo),
}

impl SubagentEvent {
    /// The event's name, as used in logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ProviderAdded(_) => "subagent/provider-added",
            Self::ProviderRemoved(_) => "subagent/provider-removed",
            Self::RunStarted(_) => "subagent/start",
            Self::RunEnded(_) => "subagent/end",
            Self::RunQueued(_) => "subagent/queued",
            Self::RunAdmitted(_) => "subagent/admitted",
            Self::RunWithdrawn(_) => "subagent/withdrawn",
            Self::ResultCut(_) => "subagent/result-cut",
        }
    }

    /// Whether it is an event of a run (heard only by run subscribers).
    pub fn is_run_event(&self) -> bool {
        !matches!(self, Self::ProviderAdded(_) | Self::ProviderRemoved(_))
    }
}

impl fmt::Debug for SubagentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProviderAdded(provider) => f.debug_tuple("ProviderAdded").field(&provider.name()).finish(),
            Self::ProviderRemoved(name) => f.debug_tuple("ProviderRemoved").field(name).finish(),
            Self::RunStarted(info) => f.debug_tuple("RunStarted").field(info).finish(),
            Self::RunEnded(info) => f.debug_tuple("RunEnded").field(info).finish(),
            Self::RunQueued(info) => f.debug_tuple("RunQueued").field(info).finish(),
            Self::RunAdmitted(info) => f.debug_tuple("RunAdmitted").field(info).finish(),
            Self::RunWithdrawn(info) => f.debug_tuple("RunWithdrawn").field(info).finish(),
            Self::ResultCut(info) => f.debug_tuple("ResultCut").field(info).finish(),
        }
    }
}

/// A subscriber. Called synchronously, in registration order, outside the
/// service's locks. Returning `Err` from a [`SubagentEvent::ProviderAdded`]
/// call rolls that registration back; for other events it is logged.
pub type Listener = Arc<dyn Fn(&SubagentEvent) -> Result<(), SubagentError> + Send + Sync>;

/// Which events a subscriber hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hears {
    /// Every event: providers and runs.
    Everything,
    /// Provider events only; such a subscriber costs runs nothing.
    Providers,
}

/// One listener and what it hears.
#[derive(Clone)]
struct Subscriber {
    id: u64,
    listener: Listener,
    hears: Hears,
}

impl Subscriber {
    fn hears(&self, event: &SubagentEvent) -> bool {
        self.hears == Hears::Everything || !event.is_run_event()
    }
}

/// The subscribers of one service, and the numbering of its announced runs.
#[derive(Default)]
pub(crate) struct Events {
    /// Copy-on-write: an event clones the `Arc`, not the list.
    subscribers: Mutex<Arc<Vec<Subscriber>>>,
    next_subscriber: AtomicU64,
    /// Subscribers that hear run events; with none, runs are not announced
    /// and carry no observer.
    run_listeners: AtomicUsize,
    next_run: AtomicU64,
    /// The announced runs that can be cancelled by id.
    pub(crate) running: crate::running::Running,
}

impl Events {
    /// Adds a subscriber; dropping the returned handle removes it.
    pub(crate) fn subscribe(self: &Arc<Self>, listener: Listener, hears: Hears) -> Subscription {
        let id = self.next_subscriber.fetch_add(1, Ordering::Relaxed) + 1;
        let mut subscribers = self.subscribers.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::make_mut(&mut subscribers).push(Subscriber { id, listener, hears });
        if hears == Hears::Everything {
            self.run_listeners.fetch_add(1, Ordering::SeqCst);
        }
        Subscription {
            events: Arc::downgrade(self),
            id,
        }
    }

    /// A snapshot of the subscribers, taken without copying the list.
    fn subscribers(&self) -> Arc<Vec<Subscriber>> {
        self.subscribers.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Calls every listener that hears `event`; the first failure (error or
    /// panic) is returned.
    pub(crate) fn dispatch(&self, event: &SubagentEvent) -> Result<(), SubagentError> {
        for Subscriber { listener, .. } in self.subscribers().iter().filter(|s| s.hears(event)) {
            match catch_unwind(AssertUnwindSafe(|| listener(event))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(panic) => {
                    return Err(SubagentError::failed(wording::listener_panicked(
                        event.name(),
                        &panic_message(&*panic),
                    )));
                }
            }
        }
        Ok(())
    }

    /// Calls every listener that hears `event`; failures are logged, never
    /// propagated.
    pub(crate) fn notify(&self, event: &SubagentEvent) {
        for Subscriber { listener, .. } in self.subscribers().iter().filter(|s| s.hears(event)) {
            match catch_unwind(AssertUnwindSafe(|| listener(event))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!("{}", wording::listener_threw(event.name(), &error)),
                Err(panic) => {
                    tracing::warn!("{}", wording::listener_threw(event.name(), panic_message(&*panic)))
                }
            }
        }
    }

    /// Whether some subscriber hears run events now.
    pub(crate) fn announces_runs(&self) -> bool {
        self.run_listeners.load(Ordering::SeqCst) > 0
    }

    /// A fresh run id for an announcement.
    pub(crate) fn next_run_id(&self) -> u64 {
        self.next_run.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Announces a published run: [`SubagentEvent::RunStarted`] now,
    /// [`SubagentEvent::RunEnded`] when its result settles. Returns the run
    /// and its announced [`RunInfo::run_id`], or the run unchanged and
    /// `None` when nobody hears run events. `start` says who the run is;
    /// `run_id` is the id its wait in its tree's queue was announced with,
    /// if it waited. Its cancellation token is kept, for
    /// [`SubagentService::cancel_run`](crate::SubagentService::cancel_run),
    /// until it settles or is dropped.
    pub(crate) fn announce(
        self: &Arc<Self>,
        provider_name: &str,
        start: RunStart,
        run: SubagentRun,
        run_id: Option<u64>,
    ) -> (SubagentRun, Option<u64>) {
        if !self.announces_runs() {
            return (run, None);
        }
        let run_id = run_id.unwrap_or_else(|| self.next_run_id());
        let RunStart {
            parent,
            depth,
            label,
            task,
            mode,
            cancel,
        } = start;
        let info = RunInfo {
            run_id,
            provider: provider_name.to_owned(),
            id: run.id().to_owned(),
            parent,
            depth,
            label,
            task,
            mode,
        };
        let cancellable = cancel.map(|token| self.running.keep(&info.id, run_id, token));
        // Announce first, then move the same info into the settlement
        // observer: no copy. Nobody can poll the result before we return it.
        let started = SubagentEvent::RunStarted(info);
        self.notify(&started);
        let SubagentEvent::RunStarted(end_info) = started else {
            return (run, Some(run_id));
        };
        let observer = Arc::downgrade(self);
        let run = run.map_result(move |result| async move {
            let mut outcome = result.await;
            // Settled: no longer cancellable by id.
            drop(cancellable);
            if let Some(events) = observer.upgrade() {
                let (stop_reason, text, diagnostic) = match &mut outcome {
                    Ok(result) => (
                        result.stop_reason.clone(),
                        lend_text(&mut result.output),
                        result.diagnostic.clone(),
                    ),
                    Err(_) => (StopReason::Error, String::new(), None),
                };
                let ended = SubagentEvent::RunEnded(RunEndInfo {
                    run: end_info,
                    stop_reason,
                    last_assistant_message: (!text.is_empty()).then_some(text),
                    diagnostic,
                });
                events.notify(&ended);
                if let (Ok(result), SubagentEvent::RunEnded(end)) = (&mut outcome, ended) {
                    give_back(&mut result.output, end.last_assistant_message);
                }
            }
            outcome
        });
        (run, Some(run_id))
    }
}

/// The text of a run's output for its run-ended event. An output of one
/// text block (the usual answer) lends its text, which [`give_back`]
/// returns once the listeners have heard it, so a long answer is not copied
/// for the event; any other output's text is concatenated.
fn lend_text(output: &mut [ContentBlock]) -> String {
    match output {
        [ContentBlock::Text { text, .. }] => std::mem::take(text),
        blocks => concat_text(blocks),
    }
}

/// Returns the text [`lend_text`] lent out of a one-text-block output.
fn give_back(output: &mut [ContentBlock], lent: Option<String>) {
    if let ([ContentBlock::Text { text, .. }], Some(lent)) = (output, lent)
        && text.is_empty()
    {
        *text = lent;
    }
}

/// A subscription to service events. Dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct Subscription {
    events: Weak<Events>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(events) = self.events.upgrade() {
            let removed = {
                let mut subscribers = events.subscribers.lock().unwrap_or_else(PoisonError::into_inner);
                let subscribers = Arc::make_mut(&mut subscribers);
                subscribers
                    .iter()
                    .position(|subscriber| subscriber.id == self.id)
                    .map(|index| subscribers.remove(index))
            };
            if removed
                .as_ref()
                .is_some_and(|subscriber| subscriber.hears == Hears::Everything)
            {
                events.run_listeners.fetch_sub(1, Ordering::SeqCst);
            }
            drop(removed);
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}
