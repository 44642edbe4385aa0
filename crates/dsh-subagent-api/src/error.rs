//! Errors of the subagent seam, each with a stable code.

use std::borrow::Cow;

use crate::{Capability, ErrorCode, StableCode, SubagentCode, wording};

/// A failure to start, run or release a child.
///
/// The `Display` text is model-facing: a tool shows it as `Error: <text>`.
/// [`SubagentError::code`] is stable for programs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubagentError {
    /// No provider of that name is registered (`NO_PROVIDER`).
    #[error("{}", wording::no_provider(name))]
    NoProvider {
        /// The requested provider name.
        name: String,
    },
    /// A provider of that name is already registered (`DUPLICATE_PROVIDER`).
    #[error("{}", wording::duplicate_provider(name))]
    DuplicateProvider {
        /// The contested name.
        name: String,
    },
    /// The request sets a field the provider cannot honour (`UNSUPPORTED_CAPABILITY`).
    #[error("{}", wording::unsupported_capability(provider, capability))]
    UnsupportedCapability {
        /// The provider's name.
        provider: String,
        /// The missing capability.
        capability: Capability,
    },
    /// `maxDepth` is not a non-negative safe integer (`INVALID_MAX_DEPTH`).
    #[error("{}", wording::INVALID_MAX_DEPTH)]
    InvalidMaxDepth,
    /// The output schema is not an object-rooted JSON schema (`INVALID_OUTPUT_SCHEMA`).
    #[error("{}", wording::INVALID_OUTPUT_SCHEMA)]
    InvalidOutputSchema,
    /// The parent's depth is not a non-negative safe integer (`INVALID_DEPTH`).
    #[error("{}", wording::INVALID_AGENT_DEPTH)]
    InvalidAgentDepth,
    /// The child's depth would leave the safe-integer range (`INVALID_DEPTH`).
    #[error("{}", wording::DEPTH_OVERFLOW)]
    DepthOverflow,
    /// The child would be deeper than `maxDepth` allows (`DEPTH_EXCEEDED`).
    #[error("{}", wording::depth_exceeded(*attempted, *max))]
    DepthExceeded {
        /// The child's depth.
        attempted: u64,
        /// The cap.
        max: u64,
    },
    /// The start was cancelled before the child was published (`ABORTED`).
    /// The message is the provider's own wording.
    #[error("{message}")]
    Aborted {
        /// What was aborted, in the provider's words.
        message: String,
    },
    /// A start failed (or was cancelled) and releasing what it had created
    /// failed too (`ROLLBACK_FAILED`): both errors, so a cancelled start
    /// whose rollback failed never reads as a clean cancellation.
    #[error("{}", wording::rollback_failed(start, rollback))]
    RollbackFailed {
        /// Why the start did not publish a run.
        start: Box<SubagentError>,
        /// Why its rollback failed.
        rollback: Box<SubagentError>,
    },
    /// The delegation tree's queue is full (`QUEUE_FULL`): the child was not
    /// started, and no slot is taken.
    #[error("{}", wording::queue_full(*waiting, *max_concurrent))]
    QueueFull {
        /// Calls waiting for a slot (the `max_queued` limit).
        waiting: usize,
        /// Children that may run at once (`max_concurrent`).
        max_concurrent: usize,
    },
    /// The delegation tree has started `max_children` children (`CHILD_LIMIT`):
    /// the child was not started.
    #[error("{}", wording::child_limit(*max_children))]
    ChildLimit {
        /// Children the tree may start over its life.
        max_children: usize,
    },
    /// A token budget the child would spend from is spent
    /// (`TOKEN_BUDGET_SPENT`): the child was not started.
    #[error("{}", wording::token_budget_spent(*scope, *spent, *limit))]
    TokenBudgetSpent {
        /// Whose budget is spent: the tree's, or the calling child's own.
        scope: crate::BudgetScope,
        /// The tokens spent from it.
        spent: u64,
        /// The tokens it allows.
        limit: u64,
    },
    /// The delegation tree's money budget is spent (`COST_BUDGET_SPENT`):
    /// the child was not started. Amounts are in billionths of the unit
    /// the models' prices are given in.
    #[error("{}", wording::cost_budget_spent(*spent, *limit, *estimated))]
    CostBudgetSpent {
        /// What the tree spent.
        spent: u64,
        /// What it allows.
        limit: u64,
        /// Whether some of what it spent was priced from estimated tokens.
        estimated: bool,
    },
    /// Any other failure a provider or the runtime reports.
    #[error("{message}")]
    Failed {
        /// The model-facing message.
        message: String,
        /// A stable code; `FAILED` when absent.
        code: Option<Cow<'static, str>>,
    },
}

impl SubagentError {
    /// A provider failure with this message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
            code: None,
        }
    }

    /// A provider failure with this message and code.
    pub fn failed_with_code(message: impl Into<String>, code: impl Into<Cow<'static, str>>) -> Self {
        Self::Failed {
            message: message.into(),
            code: Some(code.into()),
        }
    }

    /// A start cancelled before publication, in the provider's words.
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::Aborted {
            message: message.into(),
        }
    }

    /// A start that failed, whose rollback failed too: one error carrying both.
    pub fn rollback_failed(start: SubagentError, rollback: SubagentError) -> Self {
        Self::RollbackFailed {
            start: Box::new(start),
            rollback: Box::new(rollback),
        }
    }

    /// The stable code: one of the seam's, or a provider's own
    /// ([`SubagentCode`]; `as_str()` is its text).
    pub fn code(&self) -> SubagentCode<'_> {
        let code = match self {
            Self::NoProvider { .. } => ErrorCode::NoProvider,
            Self::DuplicateProvider { .. } => ErrorCode::DuplicateProvider,
            Self::UnsupportedCapability { .. } => ErrorCode::UnsupportedCapability,
            Self::InvalidMaxDepth => ErrorCode::InvalidMaxDepth,
            Self::InvalidOutputSchema => ErrorCode::InvalidOutputSchema,
            Self::InvalidAgentDepth | Self::DepthOverflow => ErrorCode::InvalidDepth,
            Self::DepthExceeded { .. } => ErrorCode::DepthExceeded,
            Self::Aborted { .. } => ErrorCode::Aborted,
            Self::RollbackFailed { .. } => ErrorCode::RollbackFailed,
            Self::QueueFull { .. } => ErrorCode::QueueFull,
            Self::ChildLimit { .. } => ErrorCode::ChildLimit,
            Self::TokenBudgetSpent { .. } => ErrorCode::TokenBudgetSpent,
            Self::CostBudgetSpent { .. } => ErrorCode::CostBudgetSpent,
            Self::Failed { code: Some(code), .. } => match ErrorCode::from_text(code) {
                Some(code) => code,
                None => return SubagentCode::Provider(code),
            },
            Self::Failed { code: None, .. } => ErrorCode::Failed,
        };
        SubagentCode::Seam(code)
    }
}
