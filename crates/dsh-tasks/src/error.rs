//! Why a task operation was refused.

use std::str::FromStr;

use dsh_tools::AgentId;

use crate::{ErrorCode, TaskId, wording};

/// A refused task operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// No task has this id, and none ever had (`UNKNOWN_TASK`).
    #[error("{}", wording::unknown_task(id))]
    Unknown {
        /// The id.
        id: String,
    },
    /// The id was issued to the caller, but the task has finished and is
    /// no longer kept (`FORGOTTEN_TASK`). Only finished tasks are
    /// forgotten, and nothing of one is kept: that its id was issued is
    /// read from the caller's count of ids. (An id reserved and never used
    /// reads the same.)
    #[error("{}", wording::forgotten_task(id, *kept))]
    Forgotten {
        /// The id.
        id: String,
        /// How many finished tasks each owner keeps.
        kept: usize,
    },
    /// No task of the caller has the id, and another agent's kept task
    /// does (`FOREIGN_TASK`): ids count per owner, so the caller's own
    /// never reach another's tasks. Its text is an unknown id's: the caller
    /// learns nothing of another agent's tasks, not even that one exists;
    /// the code tells the harness.
    #[error("{}", wording::unknown_task(id))]
    Foreign {
        /// The id.
        id: String,
    },
    /// The label is empty (`INVALID_LABEL`).
    #[error("{}", wording::EMPTY_LABEL)]
    EmptyLabel,
    /// A task of the owner already has the id the spec gave
    /// (`TASK_ID_TAKEN`).
    #[error("{}", wording::id_taken(id))]
    IdTaken {
        /// The id.
        id: String,
    },
    /// The text is not a task id as the registry writes one,
    /// `<kind>-<n>` (`INVALID_TASK_ID`).
    #[error("{}", wording::invalid_id(id))]
    InvalidId {
        /// The text read.
        id: String,
    },
    /// The owner was disposed (`OWNER_DISPOSED`).
    #[error("{}", wording::owner_disposed(owner.as_str()))]
    OwnerDisposed {
        /// The owner.
        owner: AgentId,
    },
}

impl TaskError {
    /// The stable code (`as_str()` is its text).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unknown { .. } => ErrorCode::UnknownTask,
            Self::Forgotten { .. } => ErrorCode::ForgottenTask,
            Self::Foreign { .. } => ErrorCode::ForeignTask,
            Self::EmptyLabel => ErrorCode::InvalidLabel,
            Self::IdTaken { .. } => ErrorCode::TaskIdTaken,
            Self::InvalidId { .. } => ErrorCode::InvalidTaskId,
            Self::OwnerDisposed { .. } => ErrorCode::OwnerDisposed,
        }
    }
}

/// A refused registry operation, as the model reads it: its text and code.
impl From<TaskError> for dsh_tools::ToolError {
    fn from(error: TaskError) -> Self {
        Self::new(error.to_string()).with_code(error.code())
    }
}

/// Reads an id as the registry writes it; anything else is
/// [`TaskError::InvalidId`]. (Here, beside the error, so that ids need
/// nothing of errors.)
impl FromStr for TaskId {
    type Err = TaskError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        Self::read(id).ok_or_else(|| TaskError::InvalidId { id: id.to_owned() })
    }
}
