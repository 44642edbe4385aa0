//! The control service's bookkeeping: every child's activation slot under
//! the one lock that orders a send, an activation's end and a kill, and the
//! live runs heard on the service's run events (docs/design.md, "Races are
//! linearized").
//!
//! Lock order: the slots' lock, then the live runs' lock (never the other
//! way round). Nothing here awaits, and no lock is held across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_subagent_api::{AgentId, Steerer, SubagentRun};

use crate::events::SubagentEvent;

/// The slots of every child this service knows, behind their lock, and the
/// live runs it hears of.
pub(super) struct Slots {
    state: Mutex<State>,
    live: LiveRuns,
}

/// The slots, as the lock's holder sees them.
#[derive(Default)]
pub(super) struct State {
    slots: HashMap<String, Slot>,
    next_serial: u64,
}

/// What the service knows of one child.
#[derive(Default)]
pub(super) struct Slot {
    /// The child's parent, once known (at start, or from a lookup).
    pub(super) parent: Option<AgentId>,
    /// The activation holding the child, if any.
    pub(super) activation: Option<Activation>,
}

/// The activation holding a child's slot.
pub(super) struct Activation {
    /// Tells this activation from a later one of the same child.
    pub(super) serial: u64,
    /// The agent its task belongs to.
    pub(super) owner: AgentId,
    /// `None` only while the task is being registered, under the lock.
    pub(super) task_id: Option<String>,
    /// How far its run has got, and whether it can be steered.
    pub(super) run: ActivationRun,
    /// The announcement of its published run ([`crate::RunInfo::run_id`]).
    pub(super) run_id: Option<u64>,
}

/// An activation's run, as a `send_message` sees it.
#[derive(Default)]
pub(super) enum ActivationRun {
    /// The provider has not published the run yet.
    #[default]
    Starting,
    /// Published, and its provider offers no live delivery.
    Unsteerable,
    /// Published, with the handle that delivers into its running turn.
    Steerable(Steerer),
}

/// A run announced on the service's run events whose result has not settled.
#[derive(Clone, Copy, Debug)]
pub(super) struct LiveRun {
    pub(super) run_id: u64,
    /// Whether it is the run of one of this service's activations.
    pub(super) owned: bool,
}

/// Live runs by run id (for in-process children, the child's id), each
/// with the agent that started it.
#[derive(Clone, Default)]
pub(super) struct LiveRuns(Arc<Mutex<HashMap<String, (LiveRun, AgentId)>>>);

impl LiveRuns {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (LiveRun, AgentId)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows the service's run events.
    pub(super) fn hear(&self, event: &SubagentEvent) {
        match event {
            SubagentEvent::RunStarted(info) => {
                let run = LiveRun {
                    run_id: info.run_id,
                    owned: false,
                };
                self.lock().insert(info.id.clone(), (run, info.parent.clone()));
            }
            SubagentEvent::RunEnded(end) => {
                let mut runs = self.lock();
                if runs
                    .get(&end.run.id)
                    .is_some_and(|(run, _)| run.run_id == end.run.run_id)
                {
                    runs.remove(&end.run.id);
                }
            }
            _ => {}
        }
    }

    /// Marks the announced run `run_id` as an activation's own.
    fn own(&self, id: &str, run_id: u64) {
        if let Some((run, _)) = self.lock().get_mut(id).filter(|(run, _)| run.run_id == run_id) {
            run.owned = true;
        }
    }

    /// The live run `id`, if `caller` started it.
    fn get(&self, id: &str, caller: &AgentId) -> Option<LiveRun> {
        self.lock()
            .get(id)
            .filter(|(_, parent)| parent == caller)
            .map(|(run, _)| *run)
    }
}

impl Slots {
    /// Slots that know no child yet, over these live runs.
    pub(super) fn new(live: LiveRuns) -> Self {
        Self {
            state: Mutex::default(),
            live,
        }
    }

    /// Takes the one lock.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live run with the child's id, if `caller` started it. Another
    /// agent's runs are not shown: a message to one is routed like one to
    /// an unknown id, so that nothing tells the caller it exists. Read
    /// under the slots' lock when a send is routed.
    pub(super) fn live(&self, child: &str, caller: &AgentId) -> Option<LiveRun> {
        self.live.get(child, caller)
    }

    /// Frees the child's slot if `serial` still holds it, and forgets the
    /// child: an idle child is not kept here, so what the service holds is
    /// bounded by its running activations, not by every child it ever ran.
    /// A later send to it is routed like one to a child never seen: its
    /// activation looks it up in the child store, which knows its parent.
    pub(super) fn release(&self, child: &str, serial: u64) {
        let mut state = self.lock();
        if state
            .slots
            .get(child)
            .is_some_and(|slot| slot.activation.as_ref().is_some_and(|a| a.serial == serial))
        {
            state.slots.remove(child);
        }
    }

    /// Records the activation's published run, so sends can steer it.
    pub(super) fn publish(&self, child: &str, serial: u64, run: &SubagentRun, run_id: Option<u64>) {
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

    /// Records the child's parent, found by a lookup.
    pub(super) fn learn_parent(&self, child: &str, parent: &AgentId) {
        self.lock().slots.entry(child.to_owned()).or_default().parent = Some(parent.clone());
    }

    /// The child's parent, if known.
    pub(super) fn parent(&self, child: &str) -> Option<AgentId> {
        self.lock().slots.get(child).and_then(|slot| slot.parent.clone())
    }
}

impl State {
    /// How many children have a slot.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The child's slot, if it has one.
    pub(super) fn get(&self, child: &str) -> Option<&Slot> {
        self.slots.get(child)
    }

    /// Records the parent of a child about to start.
    pub(super) fn adopt(&mut self, child: &str, parent: AgentId) {
        self.slots.entry(child.to_owned()).or_default().parent = Some(parent);
    }

    /// Takes the child's slot for a new activation of `owner`'s, before its
    /// task exists, and returns the activation's serial.
    pub(super) fn take(&mut self, child: &str, owner: AgentId) -> u64 {
        self.next_serial += 1;
        let serial = self.next_serial;
        self.slots.entry(child.to_owned()).or_default().activation = Some(Activation {
            serial,
            owner,
            task_id: None,
            run: ActivationRun::Starting,
            run_id: None,
        });
        serial
    }

    /// Records the task of the activation `serial`, once it is registered.
    pub(super) fn registered(&mut self, child: &str, serial: u64, task_id: &str) {
        if let Some(activation) = self
            .slots
            .get_mut(child)
            .and_then(|slot| slot.activation.as_mut())
            .filter(|activation| activation.serial == serial)
        {
            activation.task_id = Some(task_id.to_owned());
        }
    }

    /// Frees the slot of an activation whose task was refused, so never ran.
    pub(super) fn refused(&mut self, child: &str) {
        self.slots.entry(child.to_owned()).or_default().activation = None;
    }
}
