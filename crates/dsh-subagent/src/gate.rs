//! The admission gate of one delegation tree: slots, a FIFO queue, and the
//! lending rule that keeps a tree of waiting parents from deadlocking.
//!
//! Every child of a tree needs a slot while it runs. There are
//! `max_concurrent` slots of the tree's own, taken first come first served;
//! past them a call waits in the queue (or is refused when `max_queued`
//! calls already wait).
//!
//! **Lending.** A parent that waits for a foreground child does no work of
//! its own until that child answers, so it lends its slot to the child: a
//! foreground child of a parent whose slot is not lent runs in that slot at
//! once, queue or not. A parent lends its slot to one child at a time; when
//! that child settles, the slot goes to the parent's next waiting
//! foreground child, if it has one. So each chain of waiting parents ends in
//! a child that holds a slot and is working, and every queued call either
//! gets a slot of the tree as one frees or its parent's slot: nothing waits
//! on a slot that only its own waiting ancestors hold. Background children
//! never borrow; their parents go on working.
//!
//! All state is under one lock per tree; grants are handed over after it is
//! released, so a grant nobody takes (its call was cancelled meanwhile) can
//! release its slot at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_subagent_api::{BudgetScope, ChildCount, CostBudget, RunMode, SubagentError, TokenBudget};
use dsh_tasks::TextStore;
use tokio::sync::oneshot;

use crate::Limits;

/// One delegation tree's gate, and the outputs it keeps.
pub(crate) struct Tree {
    limits: Limits,
    budget: Option<Arc<TokenBudget>>,
    cost_budget: Option<Arc<CostBudget>>,
    state: Mutex<TreeState>,
    /// Where the tree's outputs are kept for paged reads: its service's
    /// store ([`Limits::with_kept_output`]), else the process's.
    texts: TextStore,
}

#[derive(Default)]
struct TreeState {
    /// The tree's own slots in use (lent slots are not counted again).
    running: usize,
    /// Children started over the tree's life (reservations of new children).
    started: usize,
    queue: VecDeque<Waiter>,
    next_waiter: u64,
}

struct Waiter {
    id: u64,
    /// The waiting parent whose slot this foreground call may borrow.
    lender: Option<Arc<Node>>,
    counts: Counts,
    grant: oneshot::Sender<Slot>,
}

/// What a reservation counts against the tree's `max_children`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counts {
    /// A new child of the tree: it counts.
    NewChild,
    /// A continuation of a child the tree has (`send_message`): it does not.
    Continuation,
}

impl Counts {
    /// How many children it adds to the tree's count: 1 or 0.
    fn children(self) -> usize {
        match self {
            Self::NewChild => 1,
            Self::Continuation => 0,
        }
    }
}

/// Where a node sits in its tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The top-level agent: it holds no slot, so it has none to lend.
    Root,
    /// An admitted child: it holds a slot while it runs.
    Child,
}

/// An agent's place in its tree: the tree's root (its top-level agent, which
/// holds no slot) or an admitted child, which holds a slot while it runs.
pub(crate) struct Node {
    tree: Arc<Tree>,
    place: Place,
    /// The child holds its slot (it has not settled). Under the tree's lock.
    active: AtomicBool,
    /// The child's slot is lent to one of its foreground children. Under the tree's lock.
    lent: AtomicBool,
}

impl Node {
    /// The root of a new tree, its outputs kept in `texts`.
    pub(crate) fn root(limits: Limits, texts: TextStore) -> Arc<Self> {
        let tree = Arc::new(Tree {
            limits,
            budget: limits
                .token_limit()
                .map(|limit| TokenBudget::new(BudgetScope::Tree, limit.tokens(), None)),
            cost_budget: limits.cost_limit().map(|limit| CostBudget::new(limit.nanos())),
            state: Mutex::new(TreeState::default()),
            texts,
        });
        Arc::new(Self::new(tree, Place::Root))
    }

    fn new(tree: Arc<Tree>, place: Place) -> Self {
        Self {
            tree,
            place,
            active: AtomicBool::new(place == Place::Child),
            lent: AtomicBool::new(false),
        }
    }

    /// Whether the tree has any limit to keep (a tree without one needs no gate).
    pub(crate) fn gates(&self) -> bool {
        !self.tree.limits.is_none()
    }

    /// The tree's own budget, when it has one.
    pub(crate) fn tree_budget(&self) -> Option<&Arc<TokenBudget>> {
        self.tree.budget.as_ref()
    }

    /// The tree's money budget, when it has one.
    pub(crate) fn cost_budget(&self) -> Option<&Arc<CostBudget>> {
        self.tree.cost_budget.as_ref()
    }

    /// The store of the tree's kept outputs.
    pub(crate) fn texts(&self) -> &TextStore {
        &self.tree.texts
    }

    /// Whether this node's slot can be lent now. Under the tree's lock.
    fn can_lend(&self) -> bool {
        self.place == Place::Child && self.active.load(Ordering::Relaxed) && !self.lent.load(Ordering::Relaxed)
    }

    /// Reserves a place for a child of this node's agent: a slot at once, a
    /// place in the queue, or a refusal.
    ///
    /// A [`Counts::NewChild`] counts against `max_children` (a continuation
    /// of a child is not new); a [`RunMode::Foreground`] call may borrow
    /// this node's slot.
    pub(crate) fn reserve(self: &Arc<Self>, counts: Counts, mode: RunMode) -> Result<Ticket, SubagentError> {
        let foreground = mode == RunMode::Foreground;
        let tree = &self.tree;
        let mut state = tree.lock();
        if counts == Counts::NewChild
            && let Some(max_children) = tree.limits.max_children().map(ChildCount::children)
            && state.started >= max_children
        {
            return Err(SubagentError::ChildLimit { max_children });
        }
        let child = || Arc::new(Node::new(tree.clone(), Place::Child));
        let ticket = match tree.limits.max_concurrent() {
            None => Ticket::Ready(Slot::new(child(), Held::Uncounted, counts)),
            Some(_) if foreground && self.can_lend() => {
                self.lent.store(true, Ordering::Relaxed);
                Ticket::Ready(Slot::new(child(), Held::Lent(self.clone()), counts))
            }
            Some(max) if state.running < max.children() && state.queue.is_empty() => {
                state.running += 1;
                Ticket::Ready(Slot::new(child(), Held::Own, counts))
            }
            Some(max) => {
                let waiting = state.queue.len();
                if tree.limits.max_queued().is_some_and(|bound| waiting >= bound.calls()) {
                    return Err(SubagentError::QueueFull {
                        waiting,
                        max_concurrent: max.children(),
                    });
                }
                state.next_waiter += 1;
                let id = state.next_waiter;
                let lender = (foreground && self.place == Place::Child).then(|| self.clone());
                let (grant, admitted) = oneshot::channel();
                state.queue.push_back(Waiter {
                    id,
                    lender,
                    counts,
                    grant,
                });
                Ticket::Queued(Queued {
                    tree: tree.clone(),
                    id,
                    ahead: waiting,
                    admitted: Some(admitted),
                })
            }
        };
        state.started += counts.children();
        Ok(ticket)
    }
}

impl Tree {
    fn lock(&self) -> MutexGuard<'_, TreeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands out what a released slot makes possible, under the lock: the
    /// returned slot of `lender` to its first waiting foreground child, then
    /// the tree's free slots to the head of the queue.
    fn grants(
        self: &Arc<Self>,
        state: &mut TreeState,
        lender: Option<&Arc<Node>>,
    ) -> Vec<(oneshot::Sender<Slot>, Slot)> {
        let mut grants = Vec::new();
        if let Some(lender) = lender
            && lender.can_lend()
            && let Some(index) = state
                .queue
                .iter()
                .position(|waiter| waiter.lender.as_ref().is_some_and(|l| Arc::ptr_eq(l, lender)))
            && let Some(waiter) = state.queue.remove(index)
        {
            lender.lent.store(true, Ordering::Relaxed);
            let child = Arc::new(Node::new(self.clone(), Place::Child));
            let slot = Slot::new(child, Held::Lent(lender.clone()), waiter.counts);
            grants.push((waiter.grant, slot));
        }
        let max = self.limits.max_concurrent().map_or(usize::MAX, ChildCount::children);
        while state.running < max
            && let Some(waiter) = state.queue.pop_front()
        {
            state.running += 1;
            let child = Arc::new(Node::new(self.clone(), Place::Child));
            grants.push((waiter.grant, Slot::new(child, Held::Own, waiter.counts)));
        }
        grants
    }
}

/// Sends grants outside the lock. A grant whose call has gone is dropped
/// here, which releases its slot at once.
fn hand_over(grants: Vec<(oneshot::Sender<Slot>, Slot)>) {
    for (grant, slot) in grants {
        drop(grant.send(slot));
    }
}

/// How a slot is held.
enum Held {
    /// One of the tree's own slots.
    Own,
    /// A waiting parent's slot, lent to its foreground child.
    Lent(Arc<Node>),
    /// Nothing is counted: the tree has no `max_concurrent`.
    Uncounted,
}

/// An admitted child's slot, held while the child runs; dropping it frees
/// the slot for the next call.
pub(crate) struct Slot {
    node: Arc<Node>,
    held: Held,
    /// What dropping the slot gives back to `max_children`.
    reserved: Reserved,
}

/// What a slot holds of the tree's `max_children` count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reserved {
    /// A new child, counted and not yet published: dropping the slot gives
    /// the count back.
    Unpublished,
    /// Nothing to give back: the child was published (it counts as started
    /// for good), or the start continues a child and was never counted.
    Nothing,
}

impl Reserved {
    /// How many children dropping the slot gives back: 1 or 0.
    fn returned(self) -> usize {
        match self {
            Self::Unpublished => 1,
            Self::Nothing => 0,
        }
    }
}

impl Slot {
    fn new(node: Arc<Node>, held: Held, counts: Counts) -> Self {
        let reserved = match counts {
            Counts::NewChild => Reserved::Unpublished,
            Counts::Continuation => Reserved::Nothing,
        };
        Self { node, held, reserved }
    }

    /// The child was published: from now on it counts as started.
    pub(crate) fn published(&mut self) {
        self.reserved = Reserved::Nothing;
    }

    /// The admitted child's node: its place in the tree, for its own children.
    pub(crate) fn node(&self) -> &Arc<Node> {
        &self.node
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let tree = &self.node.tree;
        let grants = {
            let mut state = tree.lock();
            self.node.active.store(false, Ordering::Relaxed);
            state.started -= self.reserved.returned();
            match &self.held {
                Held::Own => {
                    state.running -= 1;
                    tree.grants(&mut state, None)
                }
                Held::Lent(lender) => {
                    lender.lent.store(false, Ordering::Relaxed);
                    tree.grants(&mut state, Some(lender))
                }
                Held::Uncounted => Vec::new(),
            }
        };
        hand_over(grants);
    }
}

/// A reservation: a slot now, or a place in the queue.
pub(crate) enum Ticket {
    /// Admitted at once.
    Ready(Slot),
    /// Waiting for a slot.
    Queued(Queued),
}

/// A call waiting in its tree's queue. Dropped before it is admitted, it
/// leaves the queue and its reservation of a new child is given back.
pub(crate) struct Queued {
    tree: Arc<Tree>,
    id: u64,
    ahead: usize,
    admitted: Option<oneshot::Receiver<Slot>>,
}

impl Queued {
    /// Calls ahead of this one when it joined the queue.
    pub(crate) fn ahead(&self) -> usize {
        self.ahead
    }

    /// Waits for the slot. Cancel-safe: dropping the wait drops nothing
    /// but the wait; dropping the `Queued` leaves the queue.
    pub(crate) async fn admitted(&mut self) -> Option<Slot> {
        let slot = self.admitted.as_mut()?.await.ok()?;
        self.admitted = None;
        Some(slot)
    }

    /// Leaves the queue (a call no longer waiting): its reservation of a
    /// new child is given back, or, when a grant is already on its way,
    /// the slot in it is freed. Does nothing once admitted or left.
    pub(crate) fn leave(&mut self) {
        let Some(grant) = self.admitted.take() else {
            return;
        };
        {
            let mut state = self.tree.lock();
            if let Some(index) = state.queue.iter().position(|waiter| waiter.id == self.id)
                && let Some(waiter) = state.queue.remove(index)
            {
                state.started -= waiter.counts.children();
            }
        }
        // Otherwise a grant is on its way: dropping the receiver once the
        // lock is released drops the slot in it, which frees it.
        drop(grant);
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.leave();
    }
}
