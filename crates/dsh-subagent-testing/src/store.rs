//! A child store kept in memory.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use dsh_subagent_api::{AgentId, ChildRecord, ChildStore, SubagentError};

/// A [`ChildStore`] kept in memory: what a continuable provider under test
/// records, and what the control service reads back.
///
/// `children_of` lists a parent's children in id order.
///
/// ```
/// use dsh_subagent_api::{AgentId, ChildRecord, ChildStore};
/// use dsh_subagent_testing::MemoryChildStore;
///
/// let store = MemoryChildStore::new();
/// store.insert(ChildRecord::new("child-1", Some(AgentId::new("parent"))));
/// assert_eq!(store.lookup("child-1").unwrap().map(|c| c.id), Some("child-1".to_owned()));
/// assert_eq!(store.children_of(&AgentId::new("parent")).unwrap().len(), 1);
/// assert!(store.lookup("child-2").unwrap().is_none());
/// ```
#[derive(Debug, Default)]
pub struct MemoryChildStore {
    children: Mutex<BTreeMap<String, ChildRecord>>,
}

impl MemoryChildStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a child, replacing any earlier record under its id.
    pub fn insert(&self, record: ChildRecord) {
        self.lock().insert(record.id.clone(), record);
    }

    /// Forgets a child; returns its record if it was there.
    pub fn remove(&self, id: &str) -> Option<ChildRecord> {
        self.lock().remove(id)
    }

    /// How many children are recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no child is recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ChildRecord>> {
        self.children.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ChildStore for MemoryChildStore {
    fn lookup(&self, id: &str) -> Result<Option<ChildRecord>, SubagentError> {
        Ok(self.lock().get(id).cloned())
    }

    fn children_of(&self, parent: &AgentId) -> Result<Vec<ChildRecord>, SubagentError> {
        Ok(self
            .lock()
            .values()
            .filter(|child| child.parent.as_ref() == Some(parent))
            .cloned()
            .collect())
    }
}
