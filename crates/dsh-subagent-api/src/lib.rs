#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod agent;
mod capabilities;
mod child_count;
mod code;
mod content;
mod continuation;
mod cost_limit;
mod depth;
mod duration;
mod error;
mod lineage;
pub mod money;
mod provider;
mod queue_limit;
mod remote;
mod request;
mod rerun;
mod result;
mod run;
pub mod setting;
mod steer;
mod token_limit;
pub mod trace;
mod window;
mod wording;

pub use agent::{AgentId, AgentRef};
pub use capabilities::{Capabilities, Capability};
pub use child_count::{ChildCount, InvalidChildCount};
pub use code::{ErrorCode, StableCode, SubagentCode};
pub use content::{ContentBlock, concat_text};
pub use continuation::{
    ChildRecord, ChildStore, ContinuableProvider, ContinuationDescriptor, DESCRIPTOR_VERSION, RecoverRequest,
    ResumeRequest,
};
pub use cost_limit::{CostLimit, InvalidCostLimit};
pub use depth::{DepthLimit, MAX_SAFE_INTEGER, child_depth};
pub use duration::{DurationSetting, InvalidDuration};
pub use error::SubagentError;
pub use lineage::{BudgetScope, CostBudget, Lineage, TokenBudget};
pub use provider::SubagentProvider;
pub use queue_limit::{InvalidQueueLimit, QueueLimit};
pub use remote::{ChildLog, ChildStart, RemoteChild, RemoteEnd, RemoteSubagent};
pub use request::{AgentOptions, ChildSettings, Provenance, RunMode, StartRequest, ToolFilter};
pub use rerun::{RecordedChild, Rerun};
pub use result::{MAX_DIAGNOSTIC_BYTES, StopReason, SubagentResult, TextSource, bound_diagnostic};
pub use run::SubagentRun;
pub use steer::Steerer;
pub use token_limit::{InvalidTokenLimit, TokenLimit};
pub use trace::SpanOrigin;
pub use window::{ContextWindow, InvalidContextWindow};

/// The cancellation token that covers a child's life (re-exported from
/// `tokio-util`, so a provider needs no dependency of its own).
pub use tokio_util::sync::CancellationToken;

/// A boxed, sendable future: what the provider traits return (the alias of
/// `futures`, re-exported so a provider needs no dependency of its own).
pub use futures::future::BoxFuture;
