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
//! The service's lock is the one owner of every child's activation slot
//! (docs/design.md, "Races are linearized"). A send, an activation's end and a kill are ordered
//! by it, so a message is either **steered** into the running activation,
//! **started** as a new task, or **refused** synchronously with "the message
//! was not delivered" — never acknowledged and then dropped:
//!
//! - The slot is taken, under the lock, before the task exists, and freed
//!   only after the run has been released, just before the task settles.
//!   Two activations of one child never overlap.
//! - While the slot is taken, a send is live delivery into the running
//!   turn through the run's [`Steerer`]. The child itself decides, under the
//!   lock that also ends its turn, whether the message joined (its answer
//!   to this turn, the task's output, has seen it) or arrived too late
//!   (refused: "stopped before delivery"). A lost race never falls through
//!   to a new activation in the same call.
//! - A started follow-up looks the child up inside its task: an unknown,
//!   foreign or descriptor-less id settles that task `failed`.
//! - A kill cancels the activation's run, which settles `killed` together
//!   with every message that joined it; the slot is freed the same way.
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

mod error;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_subagent_api::{
    AgentId, AgentRef, ChildStore, ContentBlock, ContinuationDescriptor, ResumeRequest, SpanOrigin, StartRequest,
    Steerer, SubagentError, SubagentProvider, SubagentRun,
};
use dsh_tasks::{TaskControl, TaskOutcome, TaskRegistry, TaskSpec, TaskStatus};

use crate::events::SubagentEvent;
use crate::{SubagentService, Subscription, task, wording};

pub use error::ControlError;
use error::follow_up_label;

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

#[derive(Default)]
struct Slot {
    /// The child's parent, once known (at start, or from a lookup).
    parent: Option<AgentId>,
    /// The activation holding the child, if any.
    activation: Option<Activation>,
}

struct Activation {
    serial: u64,
    owner: AgentId,
    /// `None` only while the task is being registered, under the lock.
    task_id: Option<String>,
    /// How far its run has got, and whether it can be steered.
    run: ActivationRun,
    /// The announcement of its published run ([`crate::RunInfo::run_id`]).
    run_id: Option<u64>,
}

/// An activation's run, as a `send_message` sees it.
#[derive(Default)]
enum ActivationRun {
    /// The provider has not published the run yet.
    #[default]
    Starting,
    /// Published, and its provider offers no live delivery.
    Unsteerable,
    /// Published, with the handle that delivers into its running turn.
    Steerable(Steerer),
}

/// A run announced on the service's run events whose result has not settled.
#[derive(Clone, Copy)]
struct LiveRun {
    run_id: u64,
    /// Whether it is the run of one of this service's activations.
    owned: bool,
}

/// Live runs by run id (for in-process children, the child's id).
#[derive(Clone, Default)]
struct LiveRuns(Arc<Mutex<HashMap<String, LiveRun>>>);

impl LiveRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, LiveRun>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows the service's run events.
    fn hear(&self, event: &SubagentEvent) {
        match event {
            SubagentEvent::RunStarted(info) => {
                self.lock().insert(
                    info.id.clone(),
                    LiveRun {
                        run_id: info.run_id,
                        owned: false,
                    },
                );
            }
            SubagentEvent::RunEnded(end) => {
                let mut runs = self.lock();
                if runs.get(&end.run.id).is_some_and(|run| run.run_id == end.run.run_id) {
                    runs.remove(&end.run.id);
                }
            }
            _ => {}
        }
    }

    /// Marks the announced run `run_id` as an activation's own.
    fn own(&self, id: &str, run_id: u64) {
        if let Some(run) = self.lock().get_mut(id).filter(|run| run.run_id == run_id) {
            run.owned = true;
        }
    }

    fn get(&self, id: &str) -> Option<LiveRun> {
        self.lock().get(id).copied()
    }
}

#[derive(Default)]
struct State {
    slots: HashMap<String, Slot>,
    next_serial: u64,
}

struct Inner {
    service: SubagentService,
    tasks: TaskRegistry,
    /// `None`: no persistence, so nothing can be continued.
    store: Option<Arc<dyn ChildStore>>,
    state: Mutex<State>,
    live: LiveRuns,
    /// Keeps `live` following the service's run events.
    _runs: Subscription,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees the child's slot if `serial` still holds it.
    fn release(&self, child: &str, serial: u64) {
        let mut state = self.lock();
        if let Some(slot) = state.slots.get_mut(child)
            && slot.activation.as_ref().is_some_and(|a| a.serial == serial)
        {
            slot.activation = None;
            if slot.parent.is_none() {
                // An id that never resolved to a child of anyone: forget it.
                state.slots.remove(child);
            }
        }
    }

    /// Records the activation's published run, so sends can steer it.
    fn publish(&self, child: &str, serial: u64, run: &SubagentRun, run_id: Option<u64>) {
        if let Some(run_id) = run_id {
            self.live.own(run.id(), run_id);
        }
        let mut state = self.lock();
        if let Some(activation) = state
            .slots
            .get_mut(child)
            .and_then(|slot| slot.activation.as_mut())
            .filter(|activation| activation.serial == serial)
        {
            activation.run = match run.steerer() {
                Some(steerer) => ActivationRun::Steerable(steerer.clone()),
                None => ActivationRun::Unsteerable,
            };
            activation.run_id = run_id;
        }
    }

    /// Why a message to `child` must not be routed at all: a live run with
    /// its id that this service does not own, or that is not the run of
    /// the child's activation. Under the lock.
    fn ownership_conflict(&self, child: &str, activation: Option<&Activation>) -> Option<ControlError> {
        let live = self.live.get(child)?;
        let child = child.to_owned();
        match activation {
            None if !live.owned => Some(ControlError::OwnershipConflict { child }),
            Some(Activation { run_id: Some(ours), .. }) if *ours != live.run_id && !live.owned => {
                Some(ControlError::RegistryMismatch { child })
            }
            // An activation still starting has announced nothing yet; a
            // settled run of our own is on its way out.
            _ => None,
        }
    }

    /// The durable child store, or the refusal to continue anything.
    fn store(&self) -> Result<Arc<dyn ChildStore>, ControlError> {
        self.store.clone().ok_or(ControlError::PersistenceUnavailable)
    }

    fn learn_parent(&self, child: &str, parent: &AgentId) {
        self.lock().slots.entry(child.to_owned()).or_default().parent = Some(parent.clone());
    }
}

/// Frees an activation's slot when its producer ends, however it ends
/// (including a panic). Made inside the producer, so a task that never
/// starts never holds one.
struct SlotGuard {
    inner: Arc<Inner>,
    child: String,
    serial: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.inner.release(&self.child, self.serial);
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
            .field("children", &self.inner.lock().slots.len())
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
                state: Mutex::default(),
                live,
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
        request: StartRequest,
    ) -> Result<Started, ControlError> {
        self.inner.store()?;
        let checked = self.check(provider, &request)?;
        let descriptor = ContinuationDescriptor::for_request(provider, &request);
        let announced_label = request.label.clone();
        let depth = request.parent.depth().saturating_add(1);
        let child_id = uuid::Uuid::new_v4().to_string();
        let owner = request.parent.id().clone();
        let spec = task::spec(label, owner.clone());
        let mut state = self.inner.lock();
        state.slots.entry(child_id.clone()).or_default().parent = Some(owner.clone());
        let task_id = self
            .activate(&mut state, &child_id, owner, spec, move |activation, control| {
                let start = move |kill| async move {
                    let mut request = request;
                    request.cancel = kill;
                    let Some(continuable) = checked.continuation() else {
                        return Err(ControlError::NoContinuation {
                            provider: checked.name().to_owned(),
                        }
                        .into_subagent_error());
                    };
                    let run = continuable
                        .start_continuable(activation.child.clone(), descriptor, request)
                        .await?;
                    Ok(activation.announce(checked.name(), depth, announced_label, run))
                };
                task::run(control, start, |_| {})
            })
            .map_err(|source| ControlError::StartRefused { source })?;
        Ok(Started { child_id, task_id })
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
    ///   `subagent "<id>" belongs to another parent session`.
    /// - Otherwise, without persistence → refused:
    ///   [`ControlError::PersistenceUnavailable`], no task.
    /// - Otherwise → [`Route::Started`]: a new task owned by `parent`,
    ///   labelled from the message, whose producer looks the child up
    ///   (`… is unavailable`, `… belongs to another parent session`,
    ///   `… has no supported continuation descriptor` fail the task), then
    ///   resumes it with `message` and settles with the child's answer.
    pub fn send_message(&self, parent: &AgentRef, child_id: &str, message: &str) -> Result<Delivery, ControlError> {
        let caller = parent.id().clone();
        let spec = task::spec(follow_up_label(message), caller.clone());
        let mut state = self.inner.lock();
        let slot = state.slots.get(child_id);
        if let Some(conflict) = self
            .inner
            .ownership_conflict(child_id, slot.and_then(|slot| slot.activation.as_ref()))
        {
            return Err(conflict);
        }
        if slot
            .and_then(|slot| slot.parent.as_ref())
            .is_some_and(|known| *known != caller)
        {
            drop(state);
            let child = child_id.to_owned();
            let task_id = self
                .inner
                .tasks
                .spawn(spec, move |_control| async move {
                    TaskOutcome::Failed {
                        detail: ControlError::Foreign { child }.to_string(),
                    }
                })
                .map_err(|source| ControlError::FollowUpRefused { source })?;
            return Ok(Delivery {
                route: Route::Started,
                task_id,
            });
        }
        if let Some(activation) = slot.and_then(|slot| slot.activation.as_ref()) {
            let (task_id, steerer) = self.live_route(child_id, activation, &caller)?;
            drop(state);
            // Outside the lock: the child decides, under its own turn lock,
            // whether the message joined; a steerer may take any lock.
            return match steerer.steer(vec![ContentBlock::text(message)]) {
                Ok(()) => Ok(Delivery {
                    route: Route::Steered,
                    task_id,
                }),
                Err(cause) => Err(ControlError::StoppedBeforeDelivery {
                    child: child_id.to_owned(),
                    cause,
                }),
            };
        }
        let store = self.inner.store()?;
        let inner = self.inner.clone();
        let parent = parent.clone();
        let prompt = vec![ContentBlock::text(message)];
        // The new activation's trace follows from this call (a `send_message`'s).
        let origin = SpanOrigin::follows_current();
        let task_id = self
            .activate(
                &mut state,
                child_id,
                caller,
                spec,
                move |activation, control| async move {
                    resume(&inner, &*store, activation, parent, prompt, control, origin).await
                },
            )
            .map_err(|source| ControlError::FollowUpRefused { source })?;
        Ok(Delivery {
            route: Route::Started,
            task_id,
        })
    }

    /// The running activation's task and live-delivery handle, or why a
    /// message cannot join it. Under the lock.
    fn live_route(
        &self,
        child: &str,
        activation: &Activation,
        caller: &AgentId,
    ) -> Result<(String, Steerer), ControlError> {
        let starting = || ControlError::ActivationStarting {
            child: child.to_owned(),
        };
        let Some(task_id) = activation.task_id.as_ref().filter(|_| activation.owner == *caller) else {
            return Err(starting());
        };
        let status = self
            .inner
            .tasks
            .get(task_id, caller)
            .map_or(TaskStatus::Running, |task| task.status);
        if status != TaskStatus::Running {
            return Err(ControlError::ActivationSettling {
                child: child.to_owned(),
                task_id: task_id.clone(),
                status,
            });
        }
        match &activation.run {
            ActivationRun::Starting => Err(starting()),
            ActivationRun::Unsteerable => Err(ControlError::NoLiveDelivery {
                child: child.to_owned(),
            }),
            ActivationRun::Steerable(steerer) => Ok((task_id.clone(), steerer.clone())),
        }
    }

    /// Takes the child's slot and registers its activation task, all under
    /// the lock the caller holds. The producer gets its [`Activated`]
    /// handle; the slot is freed when the producer's future ends or is
    /// dropped.
    fn activate<F, Fut>(
        &self,
        state: &mut State,
        child: &str,
        owner: AgentId,
        spec: TaskSpec,
        producer: F,
    ) -> Result<String, dsh_tasks::TaskError>
    where
        F: FnOnce(Activated, TaskControl) -> Fut,
        Fut: Future<Output = TaskOutcome> + Send + 'static,
    {
        state.next_serial += 1;
        let serial = state.next_serial;
        state.slots.entry(child.to_owned()).or_default().activation = Some(Activation {
            serial,
            owner,
            task_id: None,
            run: ActivationRun::Starting,
            run_id: None,
        });
        let inner = self.inner.clone();
        let child_id = child.to_owned();
        let spawned = self.inner.tasks.spawn(spec, move |control| {
            let guard = SlotGuard {
                inner: inner.clone(),
                child: child_id.clone(),
                serial,
            };
            let activated = Activated {
                inner,
                child: child_id,
                serial,
            };
            let work = producer(activated, control);
            async move {
                let outcome = work.await;
                // Released (by `settle`) before the slot is freed, and the
                // slot freed before the task settles.
                drop(guard);
                outcome
            }
        });
        let slot = state.slots.entry(child.to_owned()).or_default();
        match spawned {
            Ok(task_id) => {
                if let Some(activation) = slot.activation.as_mut().filter(|a| a.serial == serial) {
                    activation.task_id = Some(task_id.clone());
                }
                Ok(task_id)
            }
            Err(error) => {
                slot.activation = None;
                Err(error)
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

/// What an activation's producer knows of itself: its child, and how to
/// make its published run steerable.
struct Activated {
    inner: Arc<Inner>,
    child: String,
    serial: u64,
}

impl Activated {
    /// The run is published: announce it like any other run (run events),
    /// then make it steerable.
    fn announce(&self, provider: &str, depth: u64, label: Option<String>, run: SubagentRun) -> SubagentRun {
        let parent = self
            .inner
            .lock()
            .slots
            .get(&self.child)
            .and_then(|slot| slot.parent.clone());
        let (run, run_id) = match parent {
            Some(parent) => self.inner.service.announce(provider, parent, depth, label, run),
            None => (run, None),
        };
        self.inner.publish(&self.child, self.serial, &run, run_id);
        run
    }
}

/// A follow-up activation: look the child up, then resume it.
async fn resume(
    inner: &Inner,
    store: &dyn ChildStore,
    activation: Activated,
    parent: AgentRef,
    prompt: Vec<ContentBlock>,
    control: TaskControl,
    origin: SpanOrigin,
) -> TaskOutcome {
    let child = activation.child.clone();
    let failed = |error: ControlError| TaskOutcome::Failed {
        detail: error.to_string(),
    };
    let record = match store.lookup(&child) {
        Ok(Some(record)) => record,
        Ok(None) => return failed(ControlError::Unavailable { child }),
        Err(error) => {
            tracing::warn!(child = %child, "{}", wording::lookup_failed(&error));
            return failed(ControlError::Unavailable { child });
        }
    };
    if control.token().is_cancelled() {
        return TaskOutcome::Killed;
    }
    if record.parent.as_ref() != Some(parent.id()) {
        return failed(ControlError::Foreign { child });
    }
    inner.learn_parent(&child, parent.id());
    if let Some(diagnostic) = &record.diagnostic {
        tracing::warn!(child = %child, "{}", wording::resuming_with_diagnostic(diagnostic));
    }
    let Some(descriptor) = record.descriptor else {
        return failed(ControlError::NoDescriptor { child });
    };
    let Some(provider) = inner.service.provider(&descriptor.provider) else {
        return TaskOutcome::Failed {
            detail: SubagentError::NoProvider {
                name: descriptor.provider,
            }
            .to_string(),
        };
    };
    let Some(continuable) = provider.continuation() else {
        return failed(ControlError::NoContinuation {
            provider: descriptor.provider,
        });
    };
    let depth = parent.depth().saturating_add(1);
    let (provider_name, label) = (descriptor.provider.clone(), descriptor.label.clone());
    let start = move |kill| async move {
        let mut request = ResumeRequest::new(child, prompt, parent, kill, descriptor);
        request.origin = origin;
        let run = continuable.resume(request).await?;
        Ok(activation.announce(&provider_name, depth, label, run))
    };
    task::run(control, start, |_| {}).await
}
