//! `[limits]`: the bounds of every delegation tree, and the result limit
//! of every tool without its own.

use dsh_subagent_api::{ChildCount, CostLimit, QueueLimit, TokenLimit};
use dsh_tools::ResultLimit;
use serde::Deserialize;

/// `[limits]`: the bounds of every delegation tree (a top-level agent and
/// everything below it), each key when set, as its flag sets it too. Each
/// is a setting that checked itself as it was read, so a bad value was
/// refused when the file loaded, at its key, in that setting's one wording.
/// [`LimitsConfig::resolve`] lays the command-line flags over it and fills
/// the rest with dsh's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Children of one tree running at once.
    pub(crate) max_concurrent: Option<ChildCount>,
    /// Calls of one tree waiting for a slot; `0` refuses every call past
    /// `max_concurrent` at once.
    pub(crate) max_queued: Option<QueueLimit>,
    /// Children one tree may start over its life.
    pub(crate) max_children: Option<ChildCount>,
    /// Tokens one tree may spend, its top-level agent's own included.
    pub(crate) token_limit: Option<TokenLimit>,
    /// Money one tree may spend, its top-level agent's own included.
    pub(crate) cost_limit: Option<CostLimit>,
    /// The most of a delegation output the model reads, for every tool
    /// without its own.
    pub(crate) result_limit: Option<ResultLimit>,
}

impl LimitsConfig {
    /// dsh's default `max_concurrent`: the library's.
    pub(crate) const DEFAULT_MAX_CONCURRENT: ChildCount = dsh_subagent::Limits::DEFAULT_MAX_CONCURRENT;
    /// dsh's default `max_queued`: the library's.
    pub(crate) const DEFAULT_MAX_QUEUED: QueueLimit = dsh_subagent::Limits::DEFAULT_MAX_QUEUED;
    /// dsh's default `max_children`: the library's.
    pub(crate) const DEFAULT_MAX_CHILDREN: ChildCount = dsh_subagent::Limits::DEFAULT_MAX_CHILDREN;

    /// `flags` over `self` (the file) over the library's defaults
    /// (`dsh_subagent::Limits::DEFAULT_*`: 8 at once, 64 waiting, 200
    /// children), and no token or cost budget.
    pub(crate) fn resolve(&self, flags: &LimitsConfig) -> dsh_subagent::Limits {
        let limits = dsh_subagent::Limits::none()
            .with_max_concurrent(
                flags
                    .max_concurrent
                    .or(self.max_concurrent)
                    .unwrap_or(Self::DEFAULT_MAX_CONCURRENT),
            )
            .with_max_queued(flags.max_queued.or(self.max_queued).unwrap_or(Self::DEFAULT_MAX_QUEUED))
            .with_max_children(
                flags
                    .max_children
                    .or(self.max_children)
                    .unwrap_or(Self::DEFAULT_MAX_CHILDREN),
            );
        let limits = match flags.token_limit.or(self.token_limit) {
            Some(tokens) => limits.with_token_limit(tokens),
            None => limits,
        };
        match flags.cost_limit.or(self.cost_limit) {
            Some(money) => limits.with_cost_limit(money),
            None => limits,
        }
    }

    /// The result limit, when one is set: `flags` over `self` (the file).
    /// Absent, the harness's default applies
    /// ([`dsh_harness::Harness::result_limit`]), decided there only.
    pub(crate) fn result_limit(&self, flags: &LimitsConfig) -> Option<ResultLimit> {
        flags.result_limit.or(self.result_limit)
    }
}
