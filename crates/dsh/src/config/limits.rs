//! `[limits]`: the bounds of every delegation tree, and the result budget
//! of every tool without its own.

use dsh_subagent_api::TokenLimit;
use dsh_tools::ResultBudget;
use toml::Spanned;

use super::file::{RawCount, RawLimits};
use super::{At, ConfigFileError};
use crate::wording;

/// `[limits]`: the bounds of every delegation tree (a top-level agent and
/// everything below it), each key when set. [`LimitsConfig::resolve`] lays
/// the command-line flags over it and fills the rest with dsh's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LimitsConfig {
    /// Children of one tree running at once (at least 1).
    pub(crate) max_concurrent: Option<u64>,
    /// Calls of one tree waiting for a slot.
    pub(crate) max_queued: Option<u64>,
    /// Children one tree may start over its life (at least 1).
    pub(crate) max_children: Option<u64>,
    /// Tokens one tree may spend, its top-level agent's own included.
    pub(crate) token_budget: Option<TokenLimit>,
    /// Money one tree may spend, its top-level agent's own included.
    pub(crate) cost_budget: Option<dsh_llm::Cost>,
    /// The most of a delegation output the model reads, for every tool
    /// without its own.
    pub(crate) result_budget: Option<ResultBudget>,
}

impl LimitsConfig {
    /// dsh's default `max_concurrent`.
    pub(crate) const DEFAULT_MAX_CONCURRENT: u64 = 8;
    /// dsh's default `max_queued`.
    pub(crate) const DEFAULT_MAX_QUEUED: u64 = 64;
    /// dsh's default `max_children`.
    pub(crate) const DEFAULT_MAX_CHILDREN: u64 = 200;

    /// `flags` over `self` (the file) over dsh's defaults: 8 at once, 64
    /// waiting, 200 children, no token budget.
    /// Counts past what this machine can hold are taken as unbounded in effect.
    pub(crate) fn resolve(&self, flags: &LimitsConfig) -> dsh_subagent::Limits {
        let count = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        let limits = dsh_subagent::Limits::none()
            .with_max_concurrent(count(
                flags
                    .max_concurrent
                    .or(self.max_concurrent)
                    .unwrap_or(Self::DEFAULT_MAX_CONCURRENT),
            ))
            .with_max_queued(count(
                flags.max_queued.or(self.max_queued).unwrap_or(Self::DEFAULT_MAX_QUEUED),
            ))
            .with_max_children(count(
                flags
                    .max_children
                    .or(self.max_children)
                    .unwrap_or(Self::DEFAULT_MAX_CHILDREN),
            ));
        let limits = match flags.token_budget.or(self.token_budget) {
            Some(tokens) => limits.with_token_budget(tokens),
            None => limits,
        };
        match self.cost_budget(flags) {
            Some(cost) => limits.with_cost_budget(cost.nanos()),
            None => limits,
        }
    }

    /// The tree's money budget: `flags` over `self` (the file); none by default.
    pub(crate) fn cost_budget(&self, flags: &LimitsConfig) -> Option<dsh_llm::Cost> {
        flags.cost_budget.or(self.cost_budget)
    }

    /// The result budget: `flags` over `self` (the file) over the default
    /// of 8,000 tokens.
    pub(crate) fn result_budget(&self, flags: &LimitsConfig) -> ResultBudget {
        flags.result_budget.or(self.result_budget).unwrap_or_default()
    }
}

/// `[limits]`: `max_concurrent` and `max_children` must be at least 1 (a
/// tree that may run or start nothing would only refuse), `cost_budget` a
/// number greater than zero (`token_budget` and `result_budget` checked
/// themselves as they were read);
/// `max_queued = 0` refuses every call past `max_concurrent` at once.
pub(super) fn resolve_limits(raw: RawLimits, at: &At<'_>) -> Result<LimitsConfig, ConfigFileError> {
    let positive = |value: Option<Spanned<RawCount>>, name: &str| match value {
        Some(value) if value.get_ref().0 == 0 => Err(at(
            Some(value.span()),
            format!("limits.{name}"),
            wording::config_limit_zero(name),
        )),
        value => Ok(value.map(|value| value.into_inner().0)),
    };
    Ok(LimitsConfig {
        max_concurrent: positive(raw.max_concurrent, "max_concurrent")?,
        max_queued: raw.max_queued.map(|value| value.into_inner().0),
        max_children: positive(raw.max_children, "max_children")?,
        token_budget: raw.token_budget.map(Spanned::into_inner),
        cost_budget: raw.cost_budget.map(|value| cost_budget(value, at)).transpose()?,
        result_budget: raw.result_budget.map(Spanned::into_inner),
    })
}

/// `cost_budget`: an amount greater than zero, in the unit of the prices.
fn cost_budget(value: Spanned<f64>, at: &At<'_>) -> Result<dsh_llm::Cost, ConfigFileError> {
    Some(*value.get_ref())
        .filter(|amount| *amount > 0.0)
        .and_then(dsh_llm::Cost::from_amount)
        .ok_or_else(|| {
            at(
                Some(value.span()),
                "limits.cost_budget".to_owned(),
                wording::COST_BUDGET_NOT_AN_AMOUNT.to_owned(),
            )
        })
}
