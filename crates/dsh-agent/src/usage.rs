//! Token usage, per agent and summed over its children.

use dsh_llm::Usage;
use serde::{Deserialize, Serialize};

/// What an agent has spent: its own model calls, and its children's totals.
///
/// `None` means no model call reported usage (some OpenAI-compatible
/// servers omit it from their streams): "not reported", never zero tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Tokens of this agent's own model calls.
    pub own: Option<Usage>,
    /// Tokens of every child it delegated to, recursively.
    pub children: Option<Usage>,
}

impl UsageTotals {
    /// Own plus children; `None` when neither was reported.
    pub fn total(&self) -> Option<Usage> {
        add_reported(self.own, self.children)
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
    })
}

/// The sum of two usages.
fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        prompt_tokens: a.prompt_tokens + b.prompt_tokens,
        completion_tokens: a.completion_tokens + b.completion_tokens,
        total_tokens: a.total_tokens + b.total_tokens,
    }
}
