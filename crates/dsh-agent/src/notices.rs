//! Notices for an agent's next model call, from outside the conversation.

use dsh_tools::AgentId;

/// Where an agent's pending notices come from, such as "your background
/// task finished" from a task registry.
///
/// Before each model call of a run, the agent takes its pending notices and
/// appends them to the conversation as one user message (recorded in the
/// transcript like any other). `take` hands each notice over once.
///
/// Any `Fn(&AgentId) -> Vec<String>` is a source, so a harness wires one
/// without this crate knowing its type:
///
/// ```
/// use std::sync::Arc;
/// use dsh_agent::NoticeSource;
/// use dsh_tools::AgentId;
///
/// let source: Arc<dyn NoticeSource> = Arc::new(|agent: &AgentId| vec![format!("hello, {agent}")]);
/// assert_eq!(source.take(&AgentId::from("a")), ["hello, a"]);
/// ```
pub trait NoticeSource: Send + Sync + 'static {
    /// Takes the notices pending for `agent`, oldest first.
    fn take(&self, agent: &AgentId) -> Vec<String>;
}

impl<F> NoticeSource for F
where
    F: Fn(&AgentId) -> Vec<String> + Send + Sync + 'static,
{
    fn take(&self, agent: &AgentId) -> Vec<String> {
        self(agent)
    }
}
