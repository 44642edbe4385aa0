//! Who an agent is, apart from what it does: the identity a run is traced
//! and reported under.

use dsh_tools::AgentId;

/// Who an agent is: its id, parent, depth, label and model ([`Agent::info`](crate::Agent::info)).
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
