//! Service events: providers coming and going, runs starting and ending.
//!
//! Run events are the one report of a child's lifecycle for every provider,
//! in-process or not: a harness shows "a child started" and "a child ended"
//! from them. What happens inside an in-process agent's run (streamed text,
//! model calls, tool calls) is the agent loop's to report; see "Observation"
//! in `docs/design.md`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use dsh_subagent_api::{AgentId, StopReason, SubagentError, SubagentProvider};

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
        }
    }
}

/// A subscriber. Called synchronously, in registration order, outside the
/// service's locks. Returning `Err` from a [`SubagentEvent::ProviderAdded`]
/// call rolls that registration back; for other events it is logged.
pub type Listener = Arc<dyn Fn(&SubagentEvent) -> Result<(), SubagentError> + Send + Sync>;
