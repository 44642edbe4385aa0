//! Where an agent sits in its delegation tree: the deadline and the token
//! and money budgets it inherits, and its place in the tree's admission
//! gate.
//!
//! The service computes a child's lineage when it admits the child and hands
//! it to the provider on [`StartRequest::lineage`](crate::StartRequest::lineage).
//! A provider whose children delegate in turn (an in-process agent) gives it
//! to the child's [`AgentRef`](crate::AgentRef), so the child's own
//! delegations join the same tree, inherit the deadline, and spend from the
//! same budgets. A provider whose children live in another process has
//! nothing to pass it to: such a child is a tree of its own over there.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::time::Instant;

/// Where an agent sits in its delegation tree. Cheap to clone: one shared
/// pointer, none at all for the default, so an agent reference without a
/// tree costs one word.
///
/// The default lineage has no deadline, no budget and no tree: the agent is
/// a top level of its own.
#[derive(Clone, Default)]
pub struct Lineage(Option<Arc<Parts>>);

#[derive(Clone, Default)]
struct Parts {
    deadline: Option<Instant>,
    budget: Option<Arc<TokenBudget>>,
    cost_budget: Option<Arc<CostBudget>>,
    admission: Option<Arc<dyn Any + Send + Sync>>,
}

impl Lineage {
    /// A lineage with nothing set.
    pub fn new() -> Self {
        Self::default()
    }

    fn parts(&self) -> Option<&Parts> {
        self.0.as_deref()
    }

    fn edit(mut self, edit: impl FnOnce(&mut Parts)) -> Self {
        edit(Arc::make_mut(self.0.get_or_insert_with(Arc::default)));
        self
    }

    /// Sets the instant by which the agent's run must end.
    #[must_use]
    pub fn with_deadline(self, deadline: Instant) -> Self {
        self.edit(|parts| parts.deadline = Some(deadline))
    }

    /// The instant by which the agent's run must end, when one is set.
    pub fn deadline(&self) -> Option<Instant> {
        self.parts()?.deadline
    }

    /// Sets the innermost token budget the agent spends from.
    #[must_use]
    pub fn with_token_budget(self, budget: Arc<TokenBudget>) -> Self {
        self.edit(|parts| parts.budget = Some(budget))
    }

    /// The innermost token budget the agent spends from (its chain reaches
    /// every enclosing budget), when one is set.
    pub fn token_budget(&self) -> Option<&Arc<TokenBudget>> {
        self.parts()?.budget.as_ref()
    }

    /// Sets the money budget of the agent's tree, which it and every agent
    /// below it spend from.
    #[must_use]
    pub fn with_cost_budget(self, budget: Arc<CostBudget>) -> Self {
        self.edit(|parts| parts.cost_budget = Some(budget))
    }

    /// The money budget of the agent's tree, when one is set.
    pub fn cost_budget(&self) -> Option<&Arc<CostBudget>> {
        self.parts()?.cost_budget.as_ref()
    }

    /// Records what one of the agent's model calls cost, in billionths of
    /// its price's unit, on its tree's money budget; `estimated` when the
    /// tokens it was priced from were. Nothing happens without a budget.
    pub fn spend_cost(&self, nanos: u64, estimated: bool) {
        if let Some(budget) = self.cost_budget() {
            budget.spend(nanos, estimated);
        }
    }

    /// Sets the agent's place in its tree's admission gate. Opaque here: the
    /// service that admits children sets and reads it; providers pass it on.
    #[must_use]
    pub fn with_admission<T: Any + Send + Sync>(self, admission: Arc<T>) -> Self {
        self.edit(|parts| parts.admission = Some(admission))
    }

    /// The agent's place in its tree's admission gate, when it is of type `T`.
    pub fn admission<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.parts()?.admission.clone()?.downcast::<T>().ok()
    }

    /// Records `tokens` spent by the agent's model calls on every budget of
    /// its chain. Nothing happens without a budget.
    pub fn spend(&self, tokens: u64) {
        if let Some(budget) = self.token_budget() {
            budget.spend(tokens);
        }
    }

    /// The first budget of the chain that is spent, innermost first: what
    /// stops the agent before its next model call.
    pub fn spent_budget(&self) -> Option<&TokenBudget> {
        self.token_budget()?.spent_budget()
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lineage")
            .field("deadline", &self.deadline())
            .field("budget", &self.token_budget())
            .field("cost_budget", &self.cost_budget())
            .field("in_tree", &self.parts().is_some_and(|parts| parts.admission.is_some()))
            .finish()
    }
}

/// Whose budget a [`TokenBudget`] is: a whole delegation tree's, or one
/// child's (set on the tool that started it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BudgetScope {
    /// The budget of a whole delegation tree.
    Tree,
    /// The budget of one child and its own children.
    Child,
}

/// A token budget: input plus output tokens that an agent, its children and
/// theirs may spend over all their model calls, inside the budgets that
/// enclose it.
///
/// Spending is recorded on the whole chain, so a child's tokens count
/// against its parent's budget and the tree's too: what a child may still
/// spend is the least of what every budget of its chain has left.
///
/// ```
/// use dsh_subagent_api::{BudgetScope, TokenBudget};
/// let tree = TokenBudget::new(BudgetScope::Tree, 1_000, None);
/// let child = TokenBudget::new(BudgetScope::Child, 400, Some(tree.clone()));
/// child.spend(300);
/// assert_eq!((child.remaining(), tree.remaining()), (100, 700));
/// tree.spend(700);
/// assert_eq!(child.remaining(), 0);
/// assert_eq!(child.spent_budget().map(|b| b.scope()), Some(BudgetScope::Tree));
/// ```
#[derive(Debug)]
pub struct TokenBudget {
    scope: BudgetScope,
    limit: u64,
    spent: AtomicU64,
    enclosing: Option<Arc<TokenBudget>>,
}

impl TokenBudget {
    /// A budget of `limit` tokens inside `enclosing` (none for the outermost).
    pub fn new(scope: BudgetScope, limit: u64, enclosing: Option<Arc<TokenBudget>>) -> Arc<Self> {
        Arc::new(Self {
            scope,
            limit,
            spent: AtomicU64::new(0),
            enclosing,
        })
    }

    /// Whose budget it is.
    pub fn scope(&self) -> BudgetScope {
        self.scope
    }

    /// The tokens it allows.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The tokens spent from it so far (its own chain's children included).
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Records `tokens` on this budget and every enclosing one.
    pub fn spend(&self, tokens: u64) {
        let mut budget = Some(self);
        while let Some(current) = budget {
            current.spent.fetch_add(tokens, Ordering::Relaxed);
            budget = current.enclosing.as_deref();
        }
    }

    /// What may still be spent: the least that any budget of the chain has left.
    pub fn remaining(&self) -> u64 {
        self.chain()
            .map(|budget| budget.limit.saturating_sub(budget.spent()))
            .min()
            .unwrap_or(0)
    }

    /// The first budget of the chain that is spent, innermost first.
    pub fn spent_budget(&self) -> Option<&TokenBudget> {
        self.chain().find(|budget| budget.spent() >= budget.limit)
    }

    fn chain(&self) -> impl Iterator<Item = &TokenBudget> {
        std::iter::successors(Some(self), |budget| budget.enclosing.as_deref())
    }
}

/// A money budget: what a whole delegation tree may spend on model calls,
/// in billionths of the unit its models' prices are given in (the unit of
/// `dsh_llm::Cost::nanos`; this crate knows no price). Every agent of the
/// tree spends what each of its model calls cost, an estimate too where
/// the server reported no usage, so a child may spend at most what the
/// tree has left. Once it is spent, no new child starts and the running
/// agents stop before their next model call.
///
/// ```
/// use dsh_subagent_api::CostBudget;
/// let budget = CostBudget::new(1_000);
/// budget.spend(600, false);
/// assert_eq!((budget.remaining(), budget.is_spent()), (400, false));
/// budget.spend(400, true);
/// assert!(budget.is_spent() && budget.is_estimated());
/// ```
#[derive(Debug)]
pub struct CostBudget {
    limit: u64,
    spent: AtomicU64,
    estimated: AtomicBool,
}

impl CostBudget {
    /// A budget of `limit` billionths of a unit.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            spent: AtomicU64::new(0),
            estimated: AtomicBool::new(false),
        })
    }

    /// What it allows, in billionths of a unit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// What was spent from it so far, in billionths of a unit.
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Whether some of what was spent was priced from estimated tokens.
    pub fn is_estimated(&self) -> bool {
        self.estimated.load(Ordering::Relaxed)
    }

    /// Records `nanos` spent; `estimated` when priced from estimated tokens.
    pub fn spend(&self, nanos: u64, estimated: bool) {
        // Saturating: a sum past u64 is spent all the same.
        let _ = self.spent.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |spent| {
            Some(spent.saturating_add(nanos))
        });
        if estimated {
            self.estimated.store(true, Ordering::Relaxed);
        }
    }

    /// What may still be spent.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.spent())
    }

    /// Whether all of it is spent.
    pub fn is_spent(&self) -> bool {
        self.spent() >= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_may_spend_the_least_its_chain_has_left() {
        let tree = TokenBudget::new(BudgetScope::Tree, 100, None);
        let child = TokenBudget::new(BudgetScope::Child, 500, Some(tree.clone()));
        assert_eq!(child.remaining(), 100, "the tree's budget is the smaller");
        let lineage = Lineage::new().with_token_budget(child.clone());
        lineage.spend(60);
        assert_eq!((child.spent(), tree.spent()), (60, 60));
        assert!(lineage.spent_budget().is_none());
        lineage.spend(40);
        assert_eq!(lineage.spent_budget().map(TokenBudget::scope), Some(BudgetScope::Tree));
    }

    #[test]
    fn a_cost_budget_is_shared_by_the_tree_and_remembers_an_estimate() {
        let budget = CostBudget::new(100);
        let parent = Lineage::new().with_cost_budget(budget.clone());
        let child = Lineage::new().with_cost_budget(budget.clone());
        parent.spend_cost(60, false);
        assert!(!budget.is_estimated());
        child.spend_cost(30, true);
        assert_eq!((budget.spent(), budget.remaining(), budget.is_spent()), (90, 10, false));
        assert!(budget.is_estimated());
        child.spend_cost(u64::MAX, false);
        assert_eq!(budget.spent(), u64::MAX, "a sum saturates");
        assert!(budget.is_spent());
        Lineage::new().spend_cost(5, false);
    }

    #[test]
    fn admission_downcasts_to_its_own_type_only() {
        let lineage = Lineage::new().with_admission(Arc::new(3_u8));
        assert_eq!(lineage.admission::<u8>().as_deref(), Some(&3));
        assert!(lineage.admission::<u16>().is_none());
        assert!(Lineage::new().spent_budget().is_none());
    }
}
