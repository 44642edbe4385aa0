#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod control;
mod events;
mod service;
pub mod settlement;
mod task;
pub mod trace;
pub mod wording;

pub use control::{ControlError, Delivery, Route, Started, SubagentControl};
pub use events::{Listener, RunEndInfo, RunInfo, SubagentEvent};
pub use service::{ProviderRegistration, SubagentService, Subscription};
pub use settlement::{RELEASE_GRACE, Settled, settle};
