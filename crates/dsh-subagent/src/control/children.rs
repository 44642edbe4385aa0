//! The control service's bookkeeping: every child's one activation under
//! the one lock that orders a send, an activation's end and a kill, and the
//! live runs heard on the service's run events (docs/design.md, "Races are
//! linearized").
//!
//! Lock order: the children's lock, then the live runs' lock (never the
//! other way round). Nothing here awaits, and no lock is held across an await.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_subagent_api::{AgentId, Steerer, SubagentRun};

use crate::events::SubagentEvent;

/// Every child this service knows, behind one lock, and the
/// live runs it hears of.
pub(super) struct Children {
    state: Mutex<State>,
    live: LiveRuns,
}

/// The children, as the lock's holder sees them.
#[derive(Default)]
pub(super) struct State {
    children: HashMap<String, ChildEntry>,
    next_serial: u64,
}

/// What the service knows of one child.
#[derive(Default)]
pub(super) struct ChildEntry {
    /// The child's parent, once known (at start, or from a lookup).
    pub(super) parent: Option<AgentId>,
    /// The activation holding the child, if any.
    pub(super) activation: Option<Activation>,
}

/// A child's current activation.
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

impl Children {
    /// Children that know no child yet, over these live runs.
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
    /// under the children's lock when a send is routed.
    pub(super) fn live(&self, child: &str, caller: &AgentId) -> Option<LiveRun> {
        self.live.get(child, caller)
    }

    /// Ends the child's activation if it is still `serial`, and forgets the
    /// child: an idle child is not kept here, so what the service holds is
    /// bounded by its running activations, not by every child it ever ran.
    /// A later send to it is routed like one to a child never seen: its
    /// activation looks it up in the child store, which knows its parent.
    pub(super) fn release(&self, child: &str, serial: u64) {
        let mut state = self.lock();
        if state
            .children
            .get(child)
            .is_some_and(|entry| entry.activation.as_ref().is_some_and(|a| a.serial == serial))
        {
            state.children.remove(child);
        }
    }

    /// Records the activation's published run, so sends can steer it.
    pub(super) fn publish(&self, child: &str, serial: u64, run: &SubagentRun, run_id: Option<u64>) {
        if let Some(run_id) = run_id {
            self.live.own(run.id(), run_id);
        }
        let mut state = self.lock();
        if let Some(activation) = state
            .children
            .get_mut(child)
            .and_then(|entry| entry.activation.as_mut())
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
        self.lock().children.entry(child.to_owned()).or_default().parent = Some(parent.clone());
    }

    /// The child's parent, if known.
    pub(super) fn parent(&self, child: &str) -> Option<AgentId> {
        self.lock().children.get(child).and_then(|entry| entry.parent.clone())
    }
}

impl State {
    /// How many children are known.
    pub(super) fn len(&self) -> usize {
        self.children.len()
    }

    /// What is known of the child, if anything.
    pub(super) fn get(&self, child: &str) -> Option<&ChildEntry> {
        self.children.get(child)
    }

    /// Records the parent of a child about to start.
    pub(super) fn adopt(&mut self, child: &str, parent: AgentId) {
        self.children.entry(child.to_owned()).or_default().parent = Some(parent);
    }

    /// Records a new activation of the child, `owner`'s, before its
    /// task exists, and returns the activation's serial.
    pub(super) fn begin(&mut self, child: &str, owner: AgentId) -> u64 {
        self.next_serial += 1;
        let serial = self.next_serial;
        self.children.entry(child.to_owned()).or_default().activation = Some(Activation {
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
            .children
            .get_mut(child)
            .and_then(|entry| entry.activation.as_mut())
            .filter(|activation| activation.serial == serial)
        {
            activation.task_id = Some(task_id.to_owned());
        }
    }

    /// Clears an activation whose task was refused, so never ran.
    pub(super) fn refused(&mut self, child: &str) {
        self.children.entry(child.to_owned()).or_default().activation = None;
    }
}
