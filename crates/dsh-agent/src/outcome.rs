//! How one run of an agent ended.

use dsh_llm::Usage;

use crate::{AgentStop, Priced};

/// The outcome of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// Why it stopped.
    pub stop: AgentStop,
    /// The last non-empty assistant text of the run (partial when it did not complete).
    pub text: String,
    /// Model calls made.
    pub steps: u32,
    /// Tokens this run spent in its own model calls, marked estimated when
    /// a server left some count out ([`Usage::is_estimated`]); `None` when
    /// it made none.
    pub usage: Option<Usage>,
    /// What this run's own model calls cost, where their model's price is
    /// known ([`AgentRuntime::with_price`](crate::AgentRuntime::with_price)).
    pub cost: Priced,
}
