//! The limits of a delegation tree: how many children run at once, how many
//! calls may wait for a slot, how many children the tree may start, and how
//! many tokens and how much money it may spend.

use std::num::NonZeroUsize;

use dsh_subagent_api::{ChildCount, CostLimit, QueueLimit, TokenLimit};

/// The limits of every delegation tree of a service
/// ([`SubagentService::with_limits`](crate::SubagentService::with_limits)).
///
/// A tree is a top-level agent and everything below it. Every limit is off
/// by default ([`Limits::none`]): a service without limits behaves as if
/// there were no gate.
///
/// Each limit has one name, set with `with_<name>` and read with `<name>`,
/// and one type that checked itself where it was read: counts of children
/// a [`ChildCount`], waiting calls a [`QueueLimit`], tokens a
/// [`TokenLimit`], money a [`CostLimit`]; bytes are `usize`.
///
/// ```
/// use dsh_subagent::Limits;
/// use dsh_subagent_api::{ChildCount, QueueLimit};
/// let eight = ChildCount::new(8)?;
/// let limits = Limits::none()
///     .with_max_concurrent(eight)
///     .with_max_queued(QueueLimit::new(64))
///     .with_max_children("200".parse()?);
/// assert_eq!(limits.max_concurrent(), Some(eight));
/// assert_eq!(limits.max_children().map(ChildCount::children), Some(200));
/// assert!(Limits::none().is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_concurrent: Option<ChildCount>,
    max_queued: Option<QueueLimit>,
    max_children: Option<ChildCount>,
    token_limit: Option<TokenLimit>,
    cost_limit: Option<CostLimit>,
    kept_output: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Self::none()
    }
}

impl Limits {
    /// The children of a tree that run at once when a harness bounds its
    /// trees without choosing (`dsh` does, unless `[limits]` or a flag
    /// says otherwise): 8.
    pub const DEFAULT_MAX_CONCURRENT: ChildCount =
        ChildCount::from_non_zero(NonZeroUsize::new(8).expect("8 is not zero"));
    /// The calls of a tree that wait for a slot, by the same rule: 64.
    pub const DEFAULT_MAX_QUEUED: QueueLimit = QueueLimit::new(64);
    /// The children a tree starts over its life, by the same rule: 200.
    pub const DEFAULT_MAX_CHILDREN: ChildCount =
        ChildCount::from_non_zero(NonZeroUsize::new(200).expect("200 is not zero"));

    /// No limit on children at all, and outputs kept in the process's store
    /// ([`dsh_tasks::TextStore::process`]).
    pub const fn none() -> Self {
        Self {
            max_concurrent: None,
            max_queued: None,
            max_children: None,
            token_limit: None,
            cost_limit: None,
            kept_output: None,
        }
    }

    /// The bytes of delegation outputs the service keeps in memory for the
    /// paged reads of `task_output` (its background results, and the
    /// foreground results too long to show whole), in a store of its own
    /// that all its trees share, oldest out first. Unset, they are kept in
    /// the process's store ([`dsh_tasks::TextStore::process`],
    /// [`dsh_tasks::DEFAULT_KEPT_BYTES`]), which every service and registry
    /// of the process shares. Either bound is hard: an output larger than
    /// it is not kept. Outputs read back from a child's transcript take
    /// none of it. Not a limit on children: [`Limits::is_none`] does not
    /// look at it.
    #[must_use]
    pub const fn with_kept_output(mut self, bytes: usize) -> Self {
        self.kept_output = Some(bytes);
        self
    }

    /// At most `n` children of a tree run at once; more wait, first come
    /// first served. Set [`Limits::with_max_queued`] too: without it the
    /// queue has no bound, and a model that asks for 100,000 children holds
    /// 100,000 waiting calls (`dsh` sets 64).
    #[must_use]
    pub const fn with_max_concurrent(mut self, n: ChildCount) -> Self {
        self.max_concurrent = Some(n);
        self
    }

    /// At most `n` calls of a tree wait for an admission slot; one more is
    /// refused at once (`QUEUE_FULL`). Only meaningful with
    /// [`Limits::with_max_concurrent`].
    #[must_use]
    pub const fn with_max_queued(mut self, n: QueueLimit) -> Self {
        self.max_queued = Some(n);
        self
    }

    /// At most `n` children start over a tree's life; one more is refused at
    /// once (`CHILD_LIMIT`). A continuation of a child is not a new child.
    #[must_use]
    pub const fn with_max_children(mut self, n: ChildCount) -> Self {
        self.max_children = Some(n);
        self
    }

    /// The input plus output tokens a whole tree may spend, its top-level
    /// agent's own model calls included when that agent spends from its
    /// tree ([`DelegationTree::lineage`](crate::DelegationTree::lineage)).
    #[must_use]
    pub const fn with_token_limit(mut self, tokens: TokenLimit) -> Self {
        self.token_limit = Some(tokens);
        self
    }

    /// The money a whole tree may spend, in the unit its models' prices are
    /// given in (held in billionths, as `dsh_llm::Cost::nanos` counts),
    /// its top-level agent's own model calls included when that agent
    /// spends from its tree. Every agent of the tree must know its model's
    /// price: `dsh-agent` refuses to build one that does not, and a harness
    /// refuses a provider whose children report no usage, since what they
    /// spend could never be priced.
    #[must_use]
    pub const fn with_cost_limit(mut self, money: CostLimit) -> Self {
        self.cost_limit = Some(money);
        self
    }

    /// The money a tree may spend, when bounded
    /// ([`Limits::with_cost_limit`]).
    pub const fn cost_limit(&self) -> Option<CostLimit> {
        self.cost_limit
    }

    /// The bytes of outputs the service keeps in a store of its own, when
    /// set ([`Limits::with_kept_output`]); `None`: the process's store.
    pub const fn kept_output(&self) -> Option<usize> {
        self.kept_output
    }

    /// Children that may run at once, when bounded
    /// ([`Limits::with_max_concurrent`]).
    pub const fn max_concurrent(&self) -> Option<ChildCount> {
        self.max_concurrent
    }

    /// Calls that may wait for an admission slot, when bounded
    /// ([`Limits::with_max_queued`]).
    pub const fn max_queued(&self) -> Option<QueueLimit> {
        self.max_queued
    }

    /// Children a tree may start over its life, when bounded
    /// ([`Limits::with_max_children`]).
    pub const fn max_children(&self) -> Option<ChildCount> {
        self.max_children
    }

    /// The tokens a tree may spend, when bounded
    /// ([`Limits::with_token_limit`]).
    pub const fn token_limit(&self) -> Option<TokenLimit> {
        self.token_limit
    }

    /// Whether no limit on children is set (then no start passes a gate).
    pub const fn is_none(&self) -> bool {
        self.max_concurrent.is_none()
            && self.max_queued.is_none()
            && self.max_children.is_none()
            && self.token_limit.is_none()
            && self.cost_limit.is_none()
    }
}
