//! Who is calling: the identity of the agent on whose behalf a tool runs.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{ChildLog, Lineage, RemoteChild};

/// The stable identifier of an agent (its durable session id).
///
/// Cheap to clone: the text is shared.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentId(Arc<str>);

impl AgentId {
    /// Wraps an id.
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for AgentId {
    fn from(id: &str) -> Self {
        Self::new(id)
    }
}

impl From<String> for AgentId {
    fn from(id: String) -> Self {
        Self::new(id)
    }
}

impl AsRef<str> for AgentId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A reference to the agent that issued a tool call.
///
/// Tools that act on the caller's behalf (delegation above all) need its id and
/// its delegation depth. An in-process harness can also attach a typed *handle*
/// (its own agent object) so that in-process providers can reach the live
/// parent, for example to fork its completed turns, without this crate knowing
/// the harness's types.
///
/// One pointer wide: every tool call carries its caller, and a delegation in
/// flight holds it more than once, so a clone shares one allocation made
/// when the agent is named.
#[derive(Clone)]
pub struct AgentRef(Arc<Identity>);

/// What an [`AgentRef`] points at.
#[derive(Clone)]
struct Identity {
    id: AgentId,
    depth: u64,
    handle: Option<Arc<dyn Any + Send + Sync>>,
    lineage: Lineage,
    child_log: Option<Arc<dyn ChildLog>>,
}

impl AgentRef {
    /// A top-level agent (depth 0) with no handle.
    pub fn new(id: impl Into<AgentId>) -> Self {
        Self(Arc::new(Identity {
            id: id.into(),
            depth: 0,
            handle: None,
            lineage: Lineage::default(),
            child_log: None,
        }))
    }

    /// Sets the delegation depth: 0 for a top-level agent, parent depth + 1 for a child.
    #[must_use]
    pub fn with_depth(mut self, depth: u64) -> Self {
        Arc::make_mut(&mut self.0).depth = depth;
        self
    }

    /// Attaches a typed handle that in-process code can recover with [`AgentRef::handle`].
    #[must_use]
    pub fn with_handle<T: Any + Send + Sync>(mut self, handle: Arc<T>) -> Self {
        Arc::make_mut(&mut self.0).handle = Some(handle);
        self
    }

    /// Places the agent in its delegation tree: the deadline and budgets it
    /// inherits, and its admission (see [`Lineage`]).
    #[must_use]
    pub fn with_lineage(mut self, lineage: Lineage) -> Self {
        Arc::make_mut(&mut self.0).lineage = lineage;
        self
    }

    /// Attaches where the agent records its children that run in another
    /// process ([`ChildLog`]).
    #[must_use]
    pub fn with_child_log(mut self, log: Arc<dyn ChildLog>) -> Self {
        Arc::make_mut(&mut self.0).child_log = Some(log);
        self
    }

    /// Records what is known of its child `id` that runs in another
    /// process, in the agent's records when it keeps any (a no-op
    /// otherwise).
    pub fn record_remote_child(&self, id: &str, child: &RemoteChild) {
        if let Some(log) = &self.0.child_log {
            log.remote_child(id, child);
        }
    }

    /// Records, before it runs, a background child `id` the agent started,
    /// in the agent's records when it keeps any (a no-op otherwise): see
    /// [`ChildLog::child_starting`].
    pub fn record_child_start(&self, id: &str, start: &crate::ChildStart) {
        if let Some(log) = &self.0.child_log {
            log.child_starting(id, start);
        }
    }

    /// Where the agent sits in its delegation tree.
    pub fn lineage(&self) -> &Lineage {
        &self.0.lineage
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.0.id
    }

    /// The agent's delegation depth.
    pub fn depth(&self) -> u64 {
        self.0.depth
    }

    /// The attached handle, if one of type `T` was attached.
    pub fn handle<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.handle.clone()?.downcast::<T>().ok()
    }
}

impl fmt::Debug for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRef")
            .field("id", &self.0.id)
            .field("depth", &self.0.depth)
            .field("has_handle", &self.0.handle.is_some())
            .field("has_child_log", &self.0.child_log.is_some())
            .field("lineage", &self.0.lineage)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_downcasts_to_the_attached_type_only() {
        let agent = AgentRef::new("a").with_handle(Arc::new(7_u32));
        assert_eq!(agent.handle::<u32>().as_deref(), Some(&7));
        assert!(agent.handle::<String>().is_none());
        assert!(AgentRef::new("b").handle::<u32>().is_none());
    }

    #[test]
    fn a_builder_step_on_a_shared_ref_leaves_the_other_copies_alone() {
        let parent = AgentRef::new("a").with_depth(1);
        let child = parent.clone().with_depth(2).with_lineage(Lineage::new());
        assert_eq!((parent.depth(), child.depth()), (1, 2));
        assert_eq!(child.id().as_str(), "a");
        assert_eq!(std::mem::size_of::<AgentRef>(), std::mem::size_of::<usize>());
    }
}
