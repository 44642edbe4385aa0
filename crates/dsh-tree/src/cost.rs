//! What the tree does with costs ([`dsh_llm::Cost`], the one cost type):
//! sums them over a node's parts, and shows them in its JSON as
//! `{"amount", "estimated"}`.

use dsh_llm::Cost;
use dsh_subagent_api::money::amount_of_nanos;
use serde::{Serialize, Serializer};

/// What `parts` cost together, each whether it spent tokens and its cost:
/// `None` when some part spent tokens without a known cost (never a
/// made-up price), or none had a cost.
pub(crate) fn of_parts(parts: impl IntoIterator<Item = (bool, Option<Cost>)>) -> Option<Cost> {
    let mut total: Option<Cost> = None;
    for (spent_tokens, cost) in parts {
        match (spent_tokens, cost) {
            (_, Some(cost)) => total = Some(total.map_or(cost, |sum| sum + cost)),
            (true, None) => return None,
            (false, None) => {}
        }
    }
    total
}

/// A cost as the tree's JSON shows it: the amount in its unit, and whether
/// it is priced from estimated tokens.
#[derive(Serialize)]
struct Shown {
    amount: f64,
    estimated: bool,
}

/// Serializes a cost as `{"amount", "estimated"}` (`null` when unknown).
pub(crate) fn shown<S: Serializer>(cost: &Option<Cost>, serializer: S) -> Result<S::Ok, S::Error> {
    cost.map(|cost| Shown {
        amount: amount_of_nanos(cost.nanos()),
        estimated: cost.is_estimated(),
    })
    .serialize(serializer)
}
