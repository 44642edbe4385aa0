//! The control service's failures; their texts live in [`crate::wording`].

use dsh_subagent_api::{ErrorCode, SubagentError};
use dsh_tasks::{TaskError, TaskStatus};

use crate::{ServiceCode, wording};

/// A failure of the control service. Synchronous refusals of
/// [`send_message`](super::SubagentControl::send_message) all end with
/// `the message was not delivered`; the lookup failures of a started
/// follow-up are the `detail` of its failed task.
///
/// The `Display` text is model-facing (docs/contract.md, "send_message");
/// [`ControlError::code`] is stable for programs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The child's current activation task is no longer running but has not
    /// released the child yet (`NOT_DELIVERED`); send again once it settles.
    #[error("{}", wording::activation_settling(child, task_id, status))]
    ActivationSettling {
        /// The child.
        child: String,
        /// Its current activation's task.
        task_id: String,
        /// That task's status.
        status: TaskStatus,
    },
    /// The running activation's provider offers no live delivery (`NOT_DELIVERED`).
    #[error("{}", wording::no_live_delivery(child))]
    NoLiveDelivery {
        /// The child.
        child: String,
    },
    /// The running turn ended before the message could join it: the lost
    /// steering race (`NOT_DELIVERED`). Never falls through to a new
    /// activation in the same call; send again to start one.
    #[error("{}", wording::stopped_before_delivery(child))]
    StoppedBeforeDelivery {
        /// The child.
        child: String,
        /// The provider's refusal.
        #[source]
        cause: SubagentError,
    },
    /// A live run outside the control service's ownership has this id, e.g.
    /// a running one-shot child (`OWNERSHIP_CONFLICT`). Never adopted.
    #[error("{}", wording::ownership_conflict(child))]
    OwnershipConflict {
        /// The child id the message named.
        child: String,
    },
    /// The live run with this id is not the run of the child's current
    /// activation (`OWNERSHIP_CONFLICT`).
    #[error("{}", wording::registry_mismatch(child))]
    RegistryMismatch {
        /// The child.
        child: String,
    },
    /// The service was created without a durable child store, so no child
    /// can be continuable (`PERSISTENCE_UNAVAILABLE`). Refused before any
    /// task exists.
    #[error("{}", wording::PERSISTENCE_UNAVAILABLE)]
    PersistenceUnavailable,
    /// Another caller's follow-up is looking the child up (`NOT_DELIVERED`).
    #[error("{}", wording::activation_starting(child))]
    ActivationStarting {
        /// The child.
        child: String,
    },
    /// The task registry refused the follow-up task (its code).
    #[error("{}", wording::follow_up_refused(source))]
    FollowUpRefused {
        /// The registry's refusal.
        source: TaskError,
    },
    /// The task registry refused the continuable child's task (its code).
    #[error("{source}")]
    StartRefused {
        /// The registry's refusal.
        source: TaskError,
    },
    /// The start request failed the service's checks (its code).
    #[error("{source}")]
    Start {
        /// The check that failed.
        source: SubagentError,
    },
    /// The provider cannot start continuable children (`NOT_RESUMABLE`).
    #[error("{}", wording::no_continuation(provider))]
    NoContinuation {
        /// The provider's name.
        provider: String,
    },
    /// No persisted child has this id, or it cannot be read (`NOT_RESUMABLE`).
    #[error("{}", wording::unavailable(child))]
    Unavailable {
        /// The child.
        child: String,
    },
    /// The child was started by another agent (`UNAUTHORIZED`). Its text
    /// is an unknown id's ([`ControlError::Unavailable`]): the caller
    /// learns nothing of another parent's children; the code tells the
    /// harness.
    #[error("{}", wording::unavailable(child))]
    Foreign {
        /// The child.
        child: String,
    },
    /// The child has no descriptor this service can resume (`NOT_RESUMABLE`).
    #[error("{}", wording::no_descriptor(child))]
    NoDescriptor {
        /// The child.
        child: String,
    },
}

impl ControlError {
    /// The stable code: the control service's own, or that of the start or
    /// the task it refused.
    pub fn code(&self) -> ServiceCode<'_> {
        let code = match self {
            Self::ActivationSettling { .. }
            | Self::ActivationStarting { .. }
            | Self::NoLiveDelivery { .. }
            | Self::StoppedBeforeDelivery { .. } => ErrorCode::NotDelivered,
            Self::OwnershipConflict { .. } | Self::RegistryMismatch { .. } => ErrorCode::OwnershipConflict,
            Self::PersistenceUnavailable => ErrorCode::PersistenceUnavailable,
            Self::FollowUpRefused { source } | Self::StartRefused { source } => return source.code().into(),
            Self::Start { source } => return source.code().into(),
            Self::NoContinuation { .. } | Self::Unavailable { .. } | Self::NoDescriptor { .. } => {
                ErrorCode::NotResumable
            }
            Self::Foreign { .. } => ErrorCode::Unauthorized,
        };
        code.into()
    }
}

impl ControlError {
    /// The error as a seam error with the same text and code.
    pub fn into_subagent_error(self) -> SubagentError {
        let code = self.code().as_str().to_owned();
        SubagentError::failed_with_code(self.to_string(), code)
    }
}

/// A control failure, as the model reads it: its text and code.
impl From<ControlError> for dsh_tools::ToolError {
    fn from(error: ControlError) -> Self {
        let code = error.code().as_str().to_owned();
        Self::new(error.to_string()).with_code(code)
    }
}
