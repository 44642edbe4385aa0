//! Live observation of an agent tree, for progress displays.

use dsh_llm::Usage;
use dsh_tools::AgentId;

use crate::RunOutcome;

/// Who an agent is, as an observer first hears of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentInfo {
    /// The agent's id.
    pub id: AgentId,
    /// Its parent, for a child.
    pub parent: Option<AgentId>,
    /// Its delegation depth.
    pub depth: u64,
    /// Its display label (a child's task description).
    pub label: Option<String>,
    /// The model it uses.
    pub model: String,
}

/// Receives progress from every agent of a runtime, parents and children.
///
/// Called synchronously from the agents' tasks: keep implementations quick.
/// Every method has an empty default.
pub trait AgentObserver: Send + Sync + 'static {
    /// An agent began a run.
    fn run_started(&self, _agent: &AgentInfo) {}
    /// An agent finished one model call; `steps` counts them in this run.
    fn step_finished(&self, _agent: &AgentId, _steps: u32, _usage: Option<Usage>) {}
    /// An agent finished a run.
    fn run_finished(&self, _agent: &AgentId, _outcome: &RunOutcome) {}
}
