//! Token usage, per agent and summed over its children, and what it cost.

use dsh_llm::{Cost, Counted, Price, Usage};
use serde::{Deserialize, Serialize};

/// What an agent has spent: its own model calls, and its children's totals.
///
/// `None` means nothing was counted: no model call, or children that
/// report no usage (ACP). A call whose server reported no usage, or left a
/// count out or at zero, counts the loop's estimate instead, marked
/// [`Counted::Estimated`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Tokens of this agent's own model calls.
    pub own: Option<Usage>,
    /// Tokens of every child it delegated to, recursively.
    pub children: Option<Usage>,
    /// What its own model calls cost.
    #[serde(default)]
    pub own_cost: Priced,
    /// What its children's model calls cost, recursively.
    #[serde(default)]
    pub children_cost: Priced,
}

impl UsageTotals {
    /// Own plus children; `None` when neither was reported.
    pub fn total(&self) -> Option<Usage> {
        add_reported(self.own, self.children)
    }

    /// What own and children's calls cost together.
    pub fn total_cost(&self) -> Priced {
        self.own_cost + self.children_cost
    }
}

/// The sum of two: unknown when either is.
impl std::ops::Add for Priced {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        match (self, other) {
            (Self::Unknown, _) | (_, Self::Unknown) => Self::Unknown,
            (Self::Known(a), Self::Known(b)) => Self::Known(a + b),
            (Self::Known(cost), Self::Nothing) | (Self::Nothing, Self::Known(cost)) => Self::Known(cost),
            (Self::Nothing, Self::Nothing) => Self::Nothing,
        }
    }
}

/// What some model calls cost, as far as their prices are known: a cost
/// is shown only where every call was priced, never a made-up one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priced {
    /// No model call was counted.
    #[default]
    Nothing,
    /// Every counted call was priced: their sum, marked estimated when
    /// some of their tokens were.
    Known(Cost),
    /// Some counted call's model has no price.
    Unknown,
}

impl Priced {
    /// What one call that spent `usage` cost at `price`, when known.
    pub fn of(usage: &Usage, price: Option<Price>) -> Self {
        match price {
            Some(price) => Self::Known(price.cost(usage)),
            None => Self::Unknown,
        }
    }

    /// The cost, when every call was priced and there was one.
    pub fn known(self) -> Option<Cost> {
        match self {
            Self::Known(cost) => Some(cost),
            Self::Nothing | Self::Unknown => None,
        }
    }
}

/// The sum of two usages that may not have been reported: `None` only when
/// neither was.
pub fn add_reported(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(a), Some(b)) => Some(add(a, b)),
        (one, None) | (None, one) => one,
    }
}

/// What `after` adds to `before` (saturating), for a usage that only grows.
pub(crate) fn since(after: Option<Usage>, before: Option<Usage>) -> Option<Usage> {
    let after = after?;
    let Some(before) = before else { return Some(after) };
    Some(Usage {
        prompt_tokens: after.prompt_tokens.saturating_sub(before.prompt_tokens),
        completion_tokens: after.completion_tokens.saturating_sub(before.completion_tokens),
        total_tokens: after.total_tokens.saturating_sub(before.total_tokens),
        cached_tokens: match (after.cached_tokens, before.cached_tokens) {
            (Some(after), before) => Some(after.saturating_sub(before.unwrap_or(0))),
            (None, _) => None,
        },
        counted: after.counted,
    })
}

/// The sum of two usages.
fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        prompt_tokens: a.prompt_tokens + b.prompt_tokens,
        completion_tokens: a.completion_tokens + b.completion_tokens,
        total_tokens: a.total_tokens + b.total_tokens,
        cached_tokens: match (a.cached_tokens, b.cached_tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        },
        counted: a.counted.and(b.counted),
    }
}

/// The usage one model call spends: what the server `reported`, each count
/// it left out or gave as zero replaced by the loop's estimate (`prompt`,
/// from the request's bytes; `completion`, from the answer's), and then
/// marked [`Counted::Estimated`]. Unknown usage is never zero tokens: a
/// token budget spends the estimate. A zero that the estimate confirms (an
/// empty answer) stays the server's.
///
/// An estimate is made only for a count that is missing.
pub(crate) fn completed(
    reported: Option<Usage>,
    prompt: impl FnOnce() -> u64,
    completion: impl FnOnce() -> u64,
) -> Usage {
    let reported = reported.unwrap_or_default();
    let prompt_tokens = match reported.prompt_tokens {
        0 => prompt(),
        counted => counted,
    };
    let completion_tokens = match reported.completion_tokens {
        0 => completion(),
        counted => counted,
    };
    if (prompt_tokens, completion_tokens) == (reported.prompt_tokens, reported.completion_tokens) {
        return reported;
    }
    Usage {
        counted: Counted::Estimated,
        // A cached count holds only beside the server's own prompt count.
        cached_tokens: reported
            .cached_tokens
            .filter(|_| prompt_tokens == reported.prompt_tokens),
        ..Usage::reported(prompt_tokens, completion_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_usage_is_kept_whole() {
        let reported = Usage {
            total_tokens: 20,
            ..Usage::reported(12, 3)
        };
        let spent = completed(Some(reported), || unreachable!(), || unreachable!());
        assert_eq!(spent, reported);
    }

    #[test]
    fn missing_partial_and_zero_counts_are_estimated() {
        let estimated = |prompt, completion| Usage {
            counted: Counted::Estimated,
            ..Usage::reported(prompt, completion)
        };
        assert_eq!(completed(None, || 100, || 7), estimated(100, 7));
        // No `prompt_tokens`: the server's completion count is kept.
        assert_eq!(completed(Some(Usage::reported(0, 5)), || 100, || 7), estimated(100, 5));
        assert_eq!(completed(Some(Usage::reported(0, 0)), || 100, || 7), estimated(100, 7));
        assert_eq!(completed(Some(Usage::reported(90, 0)), || 100, || 7), estimated(90, 7));
        // An empty answer's zero stands.
        assert_eq!(
            completed(Some(Usage::reported(90, 0)), || 100, || 0),
            Usage::reported(90, 0)
        );
    }

    #[test]
    fn a_cost_is_known_only_where_every_call_was_priced() {
        let price = Price::new(1.0, 2.0).ok();
        let call = Priced::of(&Usage::reported(1_000_000, 0), price);
        assert_eq!(
            call.known()
                .map(|cost| dsh_subagent_api::money::amount_text(cost.nanos()))
                .as_deref(),
            Some("1")
        );
        assert_eq!(call + Priced::Nothing, call);
        assert_eq!(Priced::Nothing + Priced::Nothing, Priced::Nothing);
        let unpriced = Priced::of(&Usage::reported(10, 10), None);
        assert_eq!(call + unpriced, Priced::Unknown);
        assert_eq!((call + unpriced).known(), None);
        let guess = Priced::of(&completed(None, || 500_000, || 0), price);
        assert_eq!(
            (call + guess)
                .known()
                .map(|cost| (dsh_subagent_api::money::amount_text(cost.nanos()), cost.is_estimated())),
            Some(("1.5".to_owned(), true))
        );
    }

    #[test]
    fn a_sum_is_estimated_when_a_part_was() {
        let estimated = completed(None, || 10, || 1);
        let sum = add_reported(Some(Usage::reported(5, 5)), Some(estimated));
        assert_eq!(
            sum.map(|usage| (usage.total_tokens, usage.counted)),
            Some((21, Counted::Estimated))
        );
        let reported = add_reported(Some(Usage::reported(5, 5)), Some(Usage::reported(1, 1)));
        assert_eq!(reported.map(|usage| usage.counted), Some(Counted::Reported));
        assert_eq!(
            since(sum, Some(Usage::reported(5, 5))).map(|usage| usage.counted),
            Some(Counted::Estimated)
        );
    }
}
