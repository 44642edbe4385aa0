//! Token usage, per agent and summed over its children.

use dsh_llm::Usage;
use serde::{Deserialize, Serialize};

/// What an agent has spent: its own model calls, and its children's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Tokens of this agent's own model calls.
    pub own: Usage,
    /// Tokens of every child it delegated to, recursively.
    pub children: Usage,
}

impl UsageTotals {
    /// Own plus children.
    pub fn total(&self) -> Usage {
        add(self.own, self.children)
    }
}

/// The sum of two usages.
pub fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        prompt_tokens: a.prompt_tokens + b.prompt_tokens,
        completion_tokens: a.completion_tokens + b.completion_tokens,
        total_tokens: a.total_tokens + b.total_tokens,
    }
}
