#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod admission;
mod code;
pub mod control;
mod events;
mod gate;
mod kept;
mod limits;
mod running;
mod service;
pub mod settlement;
mod task;
mod trace;
pub mod wording;

pub use admission::DelegationTree;
pub use code::ServiceCode;
pub use control::{ControlError, Delivery, Fate, RecoveredChild, RecoveryReport, Route, Started, SubagentControl};
pub use events::{
    CutInfo, CutOutcome, Listener, QueuedInfo, RunEndInfo, RunInfo, SubagentEvent, Subscription, TASK_PREVIEW_CHARS,
    WaitInfo, task_preview_text,
};
pub use limits::Limits;
pub use service::{ProviderRegistration, SubagentService};
pub use settlement::{RELEASE_GRACE, Settled, settle};
pub use task::{TASK_KIND, TaskStartError};
