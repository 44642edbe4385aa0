//! How dsh observes an agent tree: one source per kind of fact.
//!
//! - **A child started, a child ended** (its label, provider, depth, stop
//!   reason), for every provider, in-process or ACP: the subagent service's
//!   run events ([`SubagentEvent`]), the same events a harness subscribes to.
//! - **What happens inside an in-process agent's run** (streamed text, model
//!   calls with their usage, tool calls): the agent loop's [`AgentObserver`].
//!   An ACP child runs in another process, so only its start and end show.
//!
//! See "Observation" in `docs/design.md`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use dsh_agent::AgentObserver;
use dsh_llm::Usage;
use dsh_subagent::SubagentEvent;
use dsh_tools::AgentId;

/// What `dsh run`, `dsh acp` and `dsh mcp` show of their agent tree: the
/// agent loop's reports ([`AgentObserver`]) and the service's run events.
pub(crate) trait TreeObserver: AgentObserver {
    /// A service event; the run events say a child started or ended.
    fn child_event(&self, event: &SubagentEvent);
}

/// The model calls of an in-process agent's current run, as the agent loop
/// last reported them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Calls {
    /// Model calls finished in this run.
    pub(crate) steps: u32,
    /// Their usage, when the model reported it.
    pub(crate) usage: Option<Usage>,
}

/// The model calls of in-process agents' current runs, by agent id: recorded
/// as each call finishes, taken when the run's end is reported. A model call
/// may finish before the run's start is announced (the child works while its
/// provider returns), so nothing here waits for the start.
#[derive(Default)]
pub(crate) struct ModelCalls(Mutex<HashMap<AgentId, Calls>>);

impl ModelCalls {
    /// Records an agent's model calls so far in its current run.
    pub(crate) fn record(&self, agent: &AgentId, steps: u32, usage: Option<Usage>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent.clone(), Calls { steps, usage });
    }

    /// Takes what was recorded for the run of the agent with this id; `None`
    /// for a child the agent loop never reported (an ACP child, or one that
    /// ended before its first model call).
    pub(crate) fn take(&self, agent: &str) -> Option<Calls> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&AgentId::new(agent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_report_of_a_run_is_taken_once() {
        let calls = ModelCalls::default();
        let agent = AgentId::new("kid");
        calls.record(&agent, 1, None);
        calls.record(&agent, 2, None);
        assert_eq!(calls.take("kid"), Some(Calls { steps: 2, usage: None }));
        assert_eq!(calls.take("kid"), None);
        assert_eq!(calls.take("acp-1"), None, "never reported");
    }
}
