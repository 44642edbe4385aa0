//! The typed code of the service's and the control service's failures.

use dsh_subagent_api::{ErrorCode, SubagentCode};

/// The stable code of a failure of the service or the control service
/// ([`TaskStartError`](crate::TaskStartError),
/// [`ControlError`](crate::ControlError)), typed: a seam code (the
/// service's own or a provider's), or the task registry's, when the task
/// that would run a child could not be made. Match on it to tell the codes
/// apart; [`as_str`](Self::as_str) is its text, for the wire and the logs,
/// and it compares equal to its text.
///
/// ```
/// use dsh_subagent::{ControlError, ServiceCode};
/// use dsh_subagent_api::{ErrorCode, SubagentCode};
/// let code = ControlError::PersistenceUnavailable.code();
/// assert!(matches!(code, ServiceCode::Subagent(SubagentCode::Seam(ErrorCode::PersistenceUnavailable))));
/// assert_eq!(code, "PERSISTENCE_UNAVAILABLE");
/// ```
#[derive(Clone, Copy, Debug)]
pub enum ServiceCode<'a> {
    /// A code of the provider seam: the service's own, or a provider's.
    Subagent(SubagentCode<'a>),
    /// The task registry's code: the task that would run the child was refused.
    Task(dsh_tasks::ErrorCode),
}

impl<'a> ServiceCode<'a> {
    /// The code as text, e.g. `NOT_DELIVERED`.
    pub fn as_str(&self) -> &'a str {
        match self {
            Self::Subagent(code) => code.as_str(),
            Self::Task(code) => code.as_str(),
        }
    }
}

impl From<ErrorCode> for ServiceCode<'_> {
    fn from(code: ErrorCode) -> Self {
        Self::Subagent(SubagentCode::Seam(code))
    }
}

impl<'a> From<SubagentCode<'a>> for ServiceCode<'a> {
    fn from(code: SubagentCode<'a>) -> Self {
        Self::Subagent(code)
    }
}

impl From<dsh_tasks::ErrorCode> for ServiceCode<'_> {
    fn from(code: dsh_tasks::ErrorCode) -> Self {
        Self::Task(code)
    }
}

dsh_subagent_api::code_text!(ServiceCode; ErrorCode, dsh_tasks::ErrorCode);
