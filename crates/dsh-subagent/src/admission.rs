//! Admission: every child start passes its tree's gate, and leaves with its
//! lineage (deadline, budgets, place in the tree) and its time limit.
//!
//! [`Admission`] is the service's: its limits, and the default tree of
//! agents that carry none. A start is admitted in two steps.
//! [`Admission::reserve`] is synchronous: it refuses a start over a limit at
//! once (a spent budget, the tree at `max_children`, a full queue) and takes
//! a slot or a place in the queue, so a background call is refused or
//! queued in call order before it returns. A queued reservation then waits
//! for its slot ([`wait`], announcing the wait; a cancellation leaves the
//! queue), and [`Reservation::admitted`] computes what the child inherits.
//! [`Admitted::bind`] ties the slot and the time limit to the published run.
//! [`Reservation::admit`] is the two in one, for the control service's
//! starts.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dsh_subagent_api::{
    AgentId, AgentRef, BudgetScope, CancellationToken, CostBudget, Lineage, RunMode, StopReason, SubagentError,
    SubagentRun, TokenBudget,
};
use dsh_tasks::TextStore;
use tokio::time::Instant;

use crate::events::{Events, QueuedInfo, SubagentEvent, WaitInfo};
use crate::gate::{Node, Queued, Slot, Ticket};
use crate::{Limits, trace, wording};

pub(crate) use crate::gate::Counts;

/// What a start asks of its tree's gate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Demand {
    /// Whether it is a new child of the tree or a continuation of one.
    pub(crate) counts: Counts,
    /// Whether the caller waits for the child (then it may lend its slot).
    pub(crate) mode: RunMode,
    /// The child's own wall-time limit.
    pub(crate) timeout: Option<Duration>,
    /// The child's own token limit: the size of its own budget.
    pub(crate) token_limit: Option<dsh_subagent_api::TokenLimit>,
}

/// Who is waiting, for the queue's announcements.
pub(crate) struct Caller<'a> {
    pub(crate) provider: &'a str,
    pub(crate) parent: &'a AgentId,
    pub(crate) depth: u64,
    pub(crate) label: Option<&'a str>,
}

/// A start that passed the synchronous checks: a slot, a place in the
/// queue, or (no tree has limits) nothing to wait for.
pub(crate) struct Reservation {
    ticket: Option<Ticket>,
    demand: Demand,
    parent_deadline: Option<Instant>,
    parent_budget: Option<Arc<TokenBudget>>,
    /// The tree's money budget, which the child spends from too.
    cost_budget: Option<Arc<CostBudget>>,
    /// The parent's place in its tree, when it has one: passed on to a
    /// child that gets no slot (its tree has no limits), so that the
    /// child's own outputs are kept with its tree's.
    tree: Option<Arc<Node>>,
}

/// An admitted start: its slot and its time limit, bound to the run it
/// publishes ([`Admitted::bind`]).
pub(crate) struct Admitted {
    /// The announced id of a run that waited (its `RunQueued` event's).
    pub(crate) run_id: Option<u64>,
    slot: Option<Slot>,
    timer: Option<Timer>,
}

/// The child's own time limit, earlier than any deadline it inherits.
struct Timer {
    at: Instant,
    limit: Duration,
    stop: CancellationToken,
}

/// A handle on one delegation tree: give its [`DelegationTree::lineage`] to
/// the tree's top-level agent (`AgentRef::with_lineage`), and every child
/// below it passes this tree's gate and spends from its budget.
///
/// Opened with [`SubagentService::open_tree`](crate::SubagentService::open_tree);
/// cheap to clone. The tree lives as long as a handle, an agent or a run of
/// it does.
#[derive(Clone)]
pub struct DelegationTree {
    root: Arc<Node>,
}

impl DelegationTree {
    /// The lineage of the tree's top-level agent: its place at the root of
    /// the gate, and the tree's token and money budgets, when the limits
    /// set them.
    pub fn lineage(&self) -> Lineage {
        let mut lineage = Lineage::new().with_admission(self.root.clone());
        if let Some(budget) = self.root.tree_budget() {
            lineage = lineage.with_token_budget(budget.clone());
        }
        if let Some(budget) = self.root.cost_budget() {
            lineage = lineage.with_cost_budget(budget.clone());
        }
        lineage
    }
}

impl std::fmt::Debug for DelegationTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationTree")
            .field("budget", &self.root.tree_budget())
            .finish_non_exhaustive()
    }
}

/// The admission of one service's starts: the limits of its trees, the
/// tree of agents that carry none, and the outputs kept for agents in no
/// tree at all.
#[derive(Default)]
pub(crate) struct Admission {
    limits: Limits,
    /// The tree of agents that carry none of their own (see [`Admission::open_tree`]).
    default_tree: OnceLock<Arc<Node>>,
    /// Where the outputs of every tree of the service are kept, and those
    /// of agents that belong to no tree (a service without limits has no
    /// default tree): a store of its own when the limits set one, else the
    /// process's.
    texts: TextStore,
}

impl Admission {
    /// Admission under `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            default_tree: OnceLock::new(),
            texts: limits.kept_output().map_or_else(TextStore::process, TextStore::new),
        }
    }

    /// The limits of every tree.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Opens a new delegation tree under these limits.
    pub(crate) fn open_tree(&self) -> DelegationTree {
        DelegationTree {
            root: Node::root(self.limits, self.texts.clone()),
        }
    }

    /// The store of `agent`'s kept outputs: its tree's (a tree of another
    /// service keeps them in that service's store), else this service's.
    pub(crate) fn texts(&self, agent: &AgentRef) -> TextStore {
        agent
            .lineage()
            .admission::<Node>()
            .map_or_else(|| self.texts.clone(), |node| node.texts().clone())
    }

    /// The tree of agents that carry none: created with the first of them,
    /// and only when some limit is set.
    fn default_root(&self) -> Option<Arc<Node>> {
        if self.limits.is_none() {
            return None;
        }
        Some(
            self.default_tree
                .get_or_init(|| Node::root(self.limits, self.texts.clone()))
                .clone(),
        )
    }

    /// The synchronous half of admission: refuses at once a start over a
    /// spent budget, the tree's `max_children` or a full queue, and
    /// otherwise takes a slot or a place in the queue.
    pub(crate) fn reserve(&self, parent: &AgentRef, demand: Demand) -> Result<Reservation, SubagentError> {
        let lineage = parent.lineage();
        let tree = lineage.admission::<Node>();
        let node = tree.clone().or_else(|| self.default_root()).filter(|node| node.gates());
        let parent_budget = lineage
            .token_budget()
            .cloned()
            .or_else(|| node.as_ref().and_then(|node| node.tree_budget().cloned()));
        if let Some(spent) = parent_budget.as_deref().and_then(TokenBudget::spent_budget) {
            let error = SubagentError::TokenBudgetSpent {
                scope: spent.scope(),
                spent: spent.spent(),
                limit: spent.limit(),
            };
            trace::refused(&error);
            return Err(error);
        }
        let cost_budget = lineage
            .cost_budget()
            .cloned()
            .or_else(|| node.as_ref().and_then(|node| node.cost_budget().cloned()));
        if let Some(spent) = cost_budget.as_deref().filter(|budget| budget.is_spent()) {
            let error = SubagentError::CostBudgetSpent {
                spent: spent.spent(),
                limit: spent.limit(),
                estimated: spent.is_estimated(),
            };
            trace::refused(&error);
            return Err(error);
        }
        let ticket = node
            .map(|node| node.reserve(demand.counts, demand.mode))
            .transpose()
            .inspect_err(trace::refused)?;
        Ok(Reservation {
            ticket,
            demand,
            parent_deadline: lineage.deadline(),
            parent_budget,
            cost_budget,
            tree,
        })
    }

    /// The admission of a start that runs nothing: a recovered child whose
    /// last run had ended only hands back the result it recorded. It passes
    /// no limit and takes no slot: the parent that waits for it may hold the
    /// tree's last slot, and a spent budget must not lose a result already
    /// paid for.
    pub(crate) fn pass(&self, parent: &AgentRef) -> Reservation {
        let lineage = parent.lineage();
        let tree = lineage.admission::<Node>();
        let node = tree.clone().or_else(|| self.default_root());
        let parent_budget = lineage
            .token_budget()
            .cloned()
            .or_else(|| node.as_ref().and_then(|node| node.tree_budget().cloned()));
        let cost_budget = lineage
            .cost_budget()
            .cloned()
            .or_else(|| node.as_ref().and_then(|node| node.cost_budget().cloned()));
        Reservation {
            ticket: None,
            demand: Demand::continuation(),
            parent_deadline: lineage.deadline(),
            parent_budget,
            cost_budget,
            tree,
        }
    }
}

/// Waits in the queue for a slot (announced on `events` as
/// [`SubagentEvent::RunQueued`], then [`SubagentEvent::RunAdmitted`]),
/// or leaves the queue when `cancel` fires
/// ([`SubagentEvent::RunWithdrawn`]; the start fails with the cancelled
/// headline and nothing is started). Returns the slot and the run id
/// its wait was announced with.
///
/// The wait is announced (and traced) when this is called, with what
/// `caller` says; the returned future holds only what the wait needs, and
/// `queued` stays in its reservation: a waiting call (every call in a full
/// tree's queue) holds neither twice.
///
/// The cancellation always wins: a slot that arrives as `cancel` fires
/// is given back. Its callers start the child without awaiting anything
/// else first, so this is the last look at the token before the start,
/// and a call of a cancelled turn never reaches its provider.
pub(crate) fn wait<'a>(
    queued: &'a mut Queued,
    cancel: &'a CancellationToken,
    caller: &Caller<'_>,
    events: &'a Events,
) -> impl Future<Output = Result<(Slot, Option<u64>), SubagentError>> + Send + use<'a> {
    let run_id = announce_queued(events, caller, queued.ahead());
    trace::queued(queued.ahead());
    // An `async` block, so its captures are held once (an `async fn`
    // would hold its arguments twice).
    async move {
        let since = Instant::now();
        // The cancellation wins over a slot: a turn that is cancelled
        // frees the slot of its running child as it settles, and that
        // slot may reach this call in the same instant as the
        // cancellation. Then the slot is given back (dropping it hands it
        // to the next call) and nothing of the cancelled turn starts.
        let slot = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            slot = queued.admitted() => slot,
        }
        .filter(|_| !cancel.is_cancelled());
        let waited = since.elapsed();
        let Some(slot) = slot else {
            queued.leave();
            trace::withdrawn(waited);
            if let Some(run_id) = run_id {
                events.notify(&SubagentEvent::RunWithdrawn(WaitInfo { run_id, waited }));
            }
            return Err(SubagentError::aborted(wording::RUN_CANCELLED));
        };
        trace::admitted(waited);
        if let Some(run_id) = run_id {
            events.notify(&SubagentEvent::RunAdmitted(WaitInfo { run_id, waited }));
        }
        Ok((slot, run_id))
    }
}

/// Announces a wait in the queue, when someone hears run events; returns
/// the run id it is announced with.
fn announce_queued(events: &Events, caller: &Caller<'_>, ahead: usize) -> Option<u64> {
    if !events.announces_runs() {
        return None;
    }
    let run_id = events.next_run_id();
    events.notify(&SubagentEvent::RunQueued(QueuedInfo {
        run_id,
        provider: caller.provider.to_owned(),
        parent: caller.parent.clone(),
        depth: caller.depth,
        label: caller.label.map(str::to_owned),
        ahead,
    }));
    Some(run_id)
}

impl Reservation {
    /// The waiting half of admission in one step, for the control service's
    /// starts: waits when the reservation is queued ([`wait`]), then returns
    /// the admitted start, the child's lineage and the token its start must
    /// use.
    pub(crate) async fn admit(
        mut self,
        cancel: &CancellationToken,
        caller: Caller<'_>,
        events: &Events,
    ) -> Result<(Admitted, Lineage, CancellationToken), SubagentError> {
        let waited = match self.queued() {
            Some(queued) => Some(wait(queued, cancel, &caller, events).await?),
            None => None,
        };
        let (admitted, lineage, stop) = self.admitted(waited, cancel);
        Ok((admitted, lineage, stop.unwrap_or_else(|| cancel.clone())))
    }

    /// The place in the queue, when the reservation has to wait for its
    /// slot. It stays in the reservation (dropping the reservation leaves
    /// the queue) while [`wait`] borrows it.
    pub(crate) fn queued(&mut self) -> Option<&mut Queued> {
        match &mut self.ticket {
            Some(Ticket::Queued(queued)) => Some(queued),
            Some(Ticket::Ready(_)) | None => None,
        }
    }

    /// What the admitted child inherits: the admitted start (its slot, its
    /// own time limit), its lineage (deadline, budgets, place in the tree) and,
    /// when it has a time limit of its own, the token its start must use
    /// instead of `cancel` (a child of it, which the limit cancels).
    /// `waited` is what a wait got (its slot and announced run id);
    /// otherwise the reservation's own slot, if any.
    pub(crate) fn admitted(
        self,
        waited: Option<(Slot, Option<u64>)>,
        cancel: &CancellationToken,
    ) -> (Admitted, Lineage, Option<CancellationToken>) {
        let Self {
            ticket,
            demand,
            parent_deadline,
            parent_budget,
            cost_budget,
            tree,
        } = self;
        let (slot, run_id) = match (waited, ticket) {
            (Some((slot, run_id)), _) => (Some(slot), run_id),
            (None, Some(Ticket::Ready(slot))) => (Some(slot), None),
            (None, Some(Ticket::Queued(_)) | None) => (None, None),
        };
        let own_deadline = demand.timeout.map(|timeout| Instant::now() + timeout);
        let deadline = match (own_deadline, parent_deadline) {
            (Some(own), Some(inherited)) => Some(own.min(inherited)),
            (own, inherited) => own.or(inherited),
        };
        let budget = match demand.token_limit {
            Some(limit) => Some(TokenBudget::new(BudgetScope::Child, limit.tokens(), parent_budget)),
            None => parent_budget,
        };
        let mut lineage = Lineage::new();
        if let Some(deadline) = deadline {
            lineage = lineage.with_deadline(deadline);
        }
        if let Some(budget) = budget {
            lineage = lineage.with_token_budget(budget);
        }
        if let Some(budget) = cost_budget {
            lineage = lineage.with_cost_budget(budget);
        }
        match (&slot, tree) {
            (Some(slot), _) => lineage = lineage.with_admission(slot.node().clone()),
            (None, Some(tree)) => lineage = lineage.with_admission(tree),
            (None, None) => {}
        }
        // The child's own limit needs a timer only when it comes first; an
        // earlier inherited deadline ends the parent, and with it the child.
        let timer = match (own_deadline, demand.timeout) {
            (Some(at), Some(limit)) if parent_deadline.is_none_or(|inherited| at < inherited) => Some(Timer {
                at,
                limit,
                stop: cancel.child_token(),
            }),
            _ => None,
        };
        let stop = timer.as_ref().map(|timer| timer.stop.clone());
        (Admitted { run_id, slot, timer }, lineage, stop)
    }
}

impl Admitted {
    /// Ties the slot and the time limit to the published run: the slot is
    /// freed when the run's result settles (or the run is dropped), and a
    /// run still going at its time limit is cancelled, its result read as
    /// `time limit of … reached` with its partial output kept.
    pub(crate) fn bind(self, run: SubagentRun) -> SubagentRun {
        let Self { mut slot, timer, .. } = self;
        if let Some(slot) = &mut slot {
            slot.published();
        }
        if slot.is_none() && timer.is_none() {
            return run;
        }
        run.map_result(move |result| async move {
            let _slot = slot;
            let Some(timer) = timer else {
                return result.await;
            };
            tokio::pin!(result);
            tokio::select! {
                biased;
                outcome = &mut result => outcome,
                () = tokio::time::sleep_until(timer.at) => {
                    timer.stop.cancel();
                    result.await.map(|mut settled| {
                        if settled.stop_reason == StopReason::Aborted {
                            settled.stop_reason = StopReason::Other(wording::time_limit_reached(timer.limit));
                        }
                        settled
                    })
                }
            }
        })
    }
}

impl Demand {
    /// What a continuation of a child asks (`send_message`): a slot like
    /// any run, but it is no new child of the tree, and it runs in the
    /// background.
    pub(crate) fn continuation() -> Self {
        Self {
            counts: Counts::Continuation,
            mode: RunMode::Background,
            timeout: None,
            token_limit: None,
        }
    }

    /// What the start of a new child asks: its request's mode, timeout and
    /// budget.
    pub(crate) fn new_child(request: &dsh_subagent_api::StartRequest) -> Self {
        Self {
            counts: Counts::NewChild,
            mode: request.mode,
            timeout: request.settings().timeout,
            token_limit: request.settings().token_limit,
        }
    }
}
