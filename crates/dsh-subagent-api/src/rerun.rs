//! A tool call run again after an interruption: what its caller's records
//! say of the child the call had started, so that a provider continues
//! that child (or delivers what it finished) instead of starting another.
//!
//! When a process dies, or stops resumably, in the middle of a turn, the
//! calls of that turn whose results were never recorded are run again when
//! the turn is resumed, with the same arguments. A call that had already
//! started a child carries a [`Rerun`] naming it: an in-process provider
//! continues that child from its own last completed step, or hands back
//! the result it had recorded; a provider whose children cannot be
//! continued reports them as [`StopReason::Disconnected`](crate::StopReason::Disconnected).

use crate::RemoteChild;

/// A call made before an interruption and run again when its turn resumes
/// ([`Provenance::rerun`](crate::Provenance::rerun)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rerun {
    /// The child the call had started, when the caller's records name one;
    /// `None` when the interruption came before any child was made (the
    /// call then starts one as it would have).
    pub child: Option<RecordedChild>,
}

impl Rerun {
    /// A rerun of a call that had started `child` (or none).
    pub fn new(child: Option<RecordedChild>) -> Self {
        Self { child }
    }
}

/// A child as its parent's records name it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordedChild {
    /// The child's id (for a child in another process, its run's id).
    pub id: String,
    /// The background task that ran it, when one did (the id the model was
    /// given).
    pub task_id: Option<String>,
    /// What is known of a child in another process; `None` for an
    /// in-process child, whose own records sit beside its parent's.
    pub remote: Option<RemoteChild>,
}

impl RecordedChild {
    /// An in-process child with this id.
    pub fn in_process(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            task_id: None,
            remote: None,
        }
    }

    /// A child in another process, as its parent recorded it.
    pub fn remote(id: impl Into<String>, child: RemoteChild) -> Self {
        Self {
            id: id.into(),
            task_id: None,
            remote: Some(child),
        }
    }

    /// Names the background task that ran the child.
    #[must_use]
    pub fn with_task_id(mut self, task_id: Option<String>) -> Self {
        self.task_id = task_id;
        self
    }
}
