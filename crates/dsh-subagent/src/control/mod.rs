//! The control service: continuable children as a series of task-backed
//! activations (docs/contract.md, "send_message" and "Live delivery").
//!
//! A continuable child is one durable transcript plus, at any moment, at most
//! one *activation*: a background task that runs one turn of it and settles
//! like the one-shot route (`completed` with the child's text, `failed`,
//! `killed`). [`SubagentControl::start_continuable`] creates the child and
//! its first activation; [`SubagentControl::send_message`] starts the next
//! one, which cold-resumes the child from its transcript, also after a
//! restart.
//!
//! # One owner per child
//!
//! The service's lock is the one owner of every child's activation
//! (docs/design.md, "Races are linearized"). A send, an activation's end
//! and a kill are ordered by it, so a message is either **steered** into
//! the running activation, **started** as a new task, or **refused**
//! synchronously with "the message was not delivered" — never acknowledged
//! and then dropped:
//!
//! - The activation is recorded, under the lock, before the task exists,
//!   and cleared only after the run has been released, just before the
//!   task settles. Two activations of one child never overlap.
//! - While the activation is recorded, a send is live delivery into the
//!   running turn through the run's [`Steerer`](dsh_subagent_api::Steerer). The
//!   child itself decides, under the lock that also ends its turn, whether
//!   the message joined (its answer to this turn, the task's output, has
//!   seen it) or arrived too late (refused: "stopped before delivery"). A
//!   lost race never falls through to a new activation in the same call.
//! - A started follow-up looks the child up inside its task: an unknown,
//!   foreign or descriptor-less id settles that task `failed`.
//! - A kill cancels the activation's run, which settles `killed` together
//!   with every message that joined it; the activation is cleared the same
//!   way.
//!
//! Every activation's run is announced on the service's run events, like a
//! one-shot start.
//!
//! # Ownership and persistence
//!
//! The service hears every run the provider service announces, so it knows
//! which ids name a live child. A message to a live child it does not own
//! (a running one-shot child, say) is refused synchronously, never adopted;
//! so is one whose live run is not its current activation's. Without a
//! durable child store no child can be continued: starts and follow-ups are
//! refused before any task exists.
//!
//! # Layout
//!
//! - `children`: the bookkeeping behind the lock (each child's parent and
//!   activation, the live runs heard on the run events).
//! - `route`: where a `send_message` goes, a pure decision over what the
//!   lock shows of the child (refuse, fail a started task, steer, or
//!   activate); [`SubagentControl::send_message`] takes the lock, decides,
//!   and carries the decision out.
//! - `activation`: an activation's task, recorded under the lock before
//!   the task exists and cleared after the run's release, and the lookups of a follow-up. Its task is spawned, and its run started,
//!   settled and traced, the way the `subagent` tool's one-shot tasks are
//!   ([`start_as_task`](crate::SubagentService::start_as_task)).

mod activation;
mod children;
mod error;
mod recovery;
mod route;

use std::sync::Arc;

use dsh_subagent_api::{
    AgentId, AgentRef, CancellationToken, ChildStart, ChildStore, ContentBlock, ContinuationDescriptor, RunMode,
    SpanOrigin, StartRequest, SubagentProvider,
};
use dsh_tasks::{TaskOutcome, TaskRegistry, TaskStatus};

use self::activation::{FollowUp, activate, follow_up_label, resume};
use self::children::{Children, LiveRuns, State};
use self::route::{ChildView, Decision};
use crate::admission::{Caller, Demand};
use crate::events::SubagentEvent;
use crate::{SubagentService, Subscription, task, trace};

pub use error::ControlError;
pub use recovery::{Fate, RecoveredChild, RecoveryReport};

/// A continuable child and its first activation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Started {
    /// The durable child id, for `send_message`.
    pub child_id: String,
    /// The task of its first activation, for `task_output` / `task_kill`.
    pub task_id: String,
}

/// How a message was routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The message joined the running activation's turn; its effect is in
    /// that task's result.
    Steered,
    /// The message started a new activation task that continues the child.
    Started,
}

/// A routed message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// How it was routed.
    pub route: Route,
    /// The task that carries it; its output is the child's answer.
    pub task_id: String,
}

struct Inner {
    service: SubagentService,
    tasks: TaskRegistry,
    /// `None`: no persistence, so nothing can be continued.
    store: Option<Arc<dyn ChildStore>>,
    /// Every child's activation, behind the one lock.
    children: Children,
    /// Keeps the children's live runs following the service's run events.
    _runs: Subscription,
}

impl Inner {
    /// The durable child store, or the refusal to continue anything.
    fn store(&self) -> Result<Arc<dyn ChildStore>, ControlError> {
        self.store.clone().ok_or(ControlError::PersistenceUnavailable)
    }

    /// What the lock (`state`) shows of `child` to `caller`, for routing a
    /// message to it.
    fn view<'a>(&self, state: &'a State, child: &'a str, caller: &'a AgentId) -> ChildView<'a> {
        let entry = state.get(child);
        let task_status = entry
            .and_then(|entry| entry.activation.as_ref())
            .filter(|activation| activation.owner == *caller)
            .and_then(|activation| activation.task_id.as_ref())
            .map(|task_id| {
                self.tasks
                    .get(task_id, caller)
                    .map_or(TaskStatus::Running, |task| task.status)
            });
        ChildView {
            child,
            caller,
            entry,
            live: self.children.live(child, caller),
            task_status,
            persistent: self.store.is_some(),
        }
    }
}

/// Continuable children of in-process parents: start them, and continue
/// them by id. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct SubagentControl {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SubagentControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentControl")
            .field("children", &self.inner.children.lock().len())
            .finish()
    }
}

impl SubagentControl {
    /// A control service over these providers, this task registry (which
    /// runs and owns the activations) and this durable child store.
    ///
    /// It follows the service's run events from now on (so every later run
    /// is announced), to tell live children it does not own from its own.
    pub fn new(service: SubagentService, tasks: TaskRegistry, store: Arc<dyn ChildStore>) -> Self {
        Self::build(service, tasks, Some(store))
    }

    /// A control service without persistence: every continuable start and
    /// every follow-up is refused synchronously with
    /// [`ControlError::PersistenceUnavailable`], before any task exists.
    ///
    /// For tests only (the `testing` feature): a program that has no store
    /// mounts no control service.
    #[cfg(feature = "testing")]
    pub fn without_persistence(service: SubagentService, tasks: TaskRegistry) -> Self {
        Self::build(service, tasks, None)
    }

    fn build(service: SubagentService, tasks: TaskRegistry, store: Option<Arc<dyn ChildStore>>) -> Self {
        let live = LiveRuns::default();
        let hearing = live.clone();
        let runs = service.subscribe(Arc::new(move |event: &SubagentEvent| {
            hearing.hear(event);
            Ok(())
        }));
        Self {
            inner: Arc::new(Inner {
                service,
                tasks,
                store,
                children: Children::new(live),
                _runs: runs,
            }),
        }
    }

    /// The task registry activations run on.
    pub fn tasks(&self) -> &TaskRegistry {
        &self.inner.tasks
    }

    /// Starts a continuable child and its first activation, and returns at
    /// once with both ids.
    ///
    /// Checked synchronously, before anything starts: the service has
    /// persistence ([`ControlError::PersistenceUnavailable`]); the provider
    /// exists, supports every optional field the request sets, and has the
    /// continuation capability; the request's shape and depth cap; the
    /// provider accepts the parent
    /// ([`check_continuable`](dsh_subagent_api::ContinuableProvider::check_continuable),
    /// e.g. its runtime persists transcripts). The child's id is a
    /// fresh UUID; its descriptor is recorded before its first turn. The task
    /// (owned by the request's parent, labelled `label`) starts the child
    /// and settles with its outcome; a failed start fails the task (or
    /// settles it `killed` when it was killed and the provider rolled back
    /// cleanly).
    pub fn start_continuable(
        &self,
        provider: &str,
        label: String,
        mut request: StartRequest,
    ) -> Result<Started, ControlError> {
        self.inner.store()?;
        if let Some(started) = self.started_before(&request) {
            return Ok(started);
        }
        let checked = self.check(provider, &request)?;
        request.mode = RunMode::Background;
        let reservation = self
            .inner
            .service
            .reserve(&request.parent, Demand::new_child(&request))
            .map_err(|source| ControlError::Start { source })?;
        let descriptor = ContinuationDescriptor::for_request(provider, &request);
        let recorded_descriptor = descriptor.to_value();
        let prompt = dsh_subagent_api::concat_text(&request.prompt);
        let call_id = request.provenance().call_id.clone();
        let parent = request.parent.clone();
        let announced_label = request.label.clone();
        let depth = request.parent.depth().saturating_add(1);
        let child_id = uuid::Uuid::new_v4().to_string();
        let owner = request.parent.id().clone();
        let spec = task::spec(label, owner.clone(), self.inner.service.texts(&request.parent));
        // The activation's span follows from the call that started it (the
        // request's origin); the child's span sits under it.
        let span = trace::task_span(&request.origin);
        request.origin = SpanOrigin::ChildOf(span.clone());
        let service = self.inner.service.clone();
        let mut state = self.inner.children.lock();
        state.adopt(&child_id, owner.clone());
        let task_id = activate(
            &self.inner,
            &mut state,
            &child_id,
            owner,
            spec,
            span,
            move |activation, control| async move {
                let checked = &checked;
                let task_id = control.id().to_owned();
                let start = move |kill: CancellationToken| async move {
                    let mut request = request;
                    request.provenance_mut().task_id = Some(task_id);
                    let caller = Caller {
                        provider: checked.name(),
                        parent: request.parent.id(),
                        depth,
                        label: announced_label.as_deref(),
                    };
                    let (admitted, lineage, cancel) = reservation.admit(&kill, caller, service.events()).await?;
                    request.cancel = cancel;
                    request.lineage = lineage;
                    let Some(continuable) = checked.continuation() else {
                        return Err(ControlError::NoContinuation {
                            provider: checked.name().to_owned(),
                        }
                        .into_subagent_error());
                    };
                    let run = continuable
                        .start_continuable(activation.child.clone(), descriptor, request)
                        .await?;
                    Ok(activation.announce(checked.name(), depth, announced_label, run, admitted, &kill))
                };
                task::run(control, checked.name(), start).await
            },
        )
        .map_err(|source| ControlError::StartRefused { source })?;
        drop(state);
        // Before the call returns: a process that ends before the child
        // keeps records of its own can still start it again, under these ids.
        let mut start = ChildStart::new(task_id.clone(), recorded_descriptor, prompt);
        start.call_id = call_id;
        parent.record_child_start(&child_id, &start);
        Ok(Started { child_id, task_id })
    }

    /// A call run again after an interruption that had started its child
    /// already ([`Rerun`](dsh_subagent_api::Rerun)): the recovery restored
    /// that child's task ([`SubagentControl::recover`]), so the call answers
    /// as it did, with the same ids, and starts nothing. `None` for any
    /// other call, or when the child's task is not known here.
    fn started_before(&self, request: &StartRequest) -> Option<Started> {
        let child = request.provenance().rerun.as_ref()?.child.as_ref()?;
        let task_id = child.task_id.clone()?;
        self.inner.tasks.get(&task_id, request.parent.id()).ok()?;
        Some(Started {
            child_id: child.id.clone(),
            task_id,
        })
    }

    /// Sends a message to a continuable child of `parent`.
    ///
    /// - A live run has this id but this service does not own it (a running
    ///   one-shot child) → refused: [`ControlError::OwnershipConflict`]; the
    ///   child's activation has a live run other than its own →
    ///   [`ControlError::RegistryMismatch`]. Checked first; never adopted.
    /// - The child has an activation → **live delivery** ([`Route::Steered`],
    ///   the activation's task id; no task is created). Refused, with nothing
    ///   delivered, when its task is no longer running
    ///   ([`ControlError::ActivationSettling`]), its run is not published yet
    ///   ([`ControlError::ActivationStarting`]), its provider cannot steer
    ///   ([`ControlError::NoLiveDelivery`]), or its turn ended first
    ///   ([`ControlError::StoppedBeforeDelivery`]: send again to start the
    ///   next activation).
    /// - Known to belong to another parent → a started task that fails with
    ///   `subagent "<id>" is unavailable`, as for an unknown id (another
    ///   parent's live runs are not even seen: the caller learns nothing of
    ///   another parent's children).
    /// - Otherwise, without persistence → refused:
    ///   [`ControlError::PersistenceUnavailable`], no task.
    /// - Otherwise → [`Route::Started`]: a new task owned by `parent`,
    ///   labelled from the message, whose producer looks the child up
    ///   (`… is unavailable`, for an unknown id and another parent's alike,
    ///   `… has no supported continuation descriptor` fail the task), then
    ///   resumes it with `message` and settles with the child's answer.
    ///
    /// The route is decided under the lock from what it shows of the child
    /// (`route::decide`), then carried out.
    pub fn send_message(&self, parent: &AgentRef, child_id: &str, message: &str) -> Result<Delivery, ControlError> {
        let caller = parent.id().clone();
        let spec = task::spec(
            follow_up_label(message),
            caller.clone(),
            self.inner.service.texts(parent),
        );
        let mut state = self.inner.children.lock();
        let decision = route::decide(&self.inner.view(&state, child_id, &caller));
        match decision {
            Decision::Refuse(refusal) => Err(refusal),
            Decision::Fail(error) => {
                drop(state);
                let detail = error.to_string();
                let task_id = self
                    .inner
                    .tasks
                    .spawn(spec, move |_control| async move { TaskOutcome::Failed { detail } })
                    .map_err(|source| ControlError::FollowUpRefused { source })?;
                Ok(Delivery {
                    route: Route::Started,
                    task_id,
                })
            }
            Decision::Steer { task_id, steerer } => {
                drop(state);
                // Outside the lock: the child decides, under its own turn
                // lock, whether the message joined; a steerer may take any
                // lock.
                match steerer.steer(vec![ContentBlock::text(message)]) {
                    Ok(()) => Ok(Delivery {
                        route: Route::Steered,
                        task_id,
                    }),
                    Err(cause) => Err(ControlError::StoppedBeforeDelivery {
                        child: child_id.to_owned(),
                        cause,
                    }),
                }
            }
            Decision::Activate => {
                let store = self.inner.store()?;
                let reservation = self
                    .inner
                    .service
                    .reserve(parent, Demand::continuation())
                    .map_err(|source| ControlError::Start { source })?;
                let inner = self.inner.clone();
                // The new activation's span follows from this call (a
                // `send_message`'s); the child's span sits under it.
                let span = trace::task_span(&SpanOrigin::follows_current());
                let follow_up = FollowUp {
                    store,
                    parent: parent.clone(),
                    prompt: vec![ContentBlock::text(message)],
                    origin: SpanOrigin::ChildOf(span.clone()),
                    reservation,
                };
                let task_id = activate(
                    &self.inner,
                    &mut state,
                    child_id,
                    caller,
                    spec,
                    span,
                    move |activation, control| async move { resume(&inner, follow_up, activation, control).await },
                )
                .map_err(|source| ControlError::FollowUpRefused { source })?;
                Ok(Delivery {
                    route: Route::Started,
                    task_id,
                })
            }
        }
    }

    /// The service's start checks, then the continuation capability and
    /// the provider's own check of the parent (e.g. its persistence).
    fn check(&self, provider_name: &str, request: &StartRequest) -> Result<Arc<dyn SubagentProvider>, ControlError> {
        let provider = self
            .inner
            .service
            .checked_provider(provider_name, request)
            .map_err(|source| ControlError::Start { source })?;
        let Some(continuable) = provider.continuation() else {
            return Err(ControlError::NoContinuation {
                provider: provider_name.to_owned(),
            });
        };
        continuable
            .check_continuable(&request.parent)
            .map_err(|source| ControlError::Start { source })?;
        Ok(provider)
    }
}
