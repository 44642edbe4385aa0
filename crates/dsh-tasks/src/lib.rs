#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod book;
mod code;
mod error;
mod id;
mod registry;
mod task;
mod text;
pub mod wording;

pub use code::ErrorCode;
pub use error::TaskError;
pub use id::{Reservation, TaskId};
pub use registry::TaskRegistry;
pub use task::{KillOutcome, Recorded, TaskControl, TaskListing, TaskOutcome, TaskSnapshot, TaskSpec, TaskStatus};
pub use text::{DEFAULT_KEPT_BYTES, Output, TaskText, TextStore};

use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How many finished tasks each owner keeps unless
/// [`TaskRegistry::keep_finished`] says otherwise.
pub const DEFAULT_KEEP_FINISHED: NonZeroUsize = match NonZeroUsize::new(100) {
    Some(count) => count,
    None => NonZeroUsize::MIN,
};

/// A lock that a panic elsewhere does not poison for good.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
