#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod child;
mod env;
mod exit;
mod group;
mod launch;
mod program;
mod stderr;
mod teardown;
pub mod wording;

pub use child::{Child, ChildSpec, DEFAULT_STDERR_TAIL_BYTES, Pipes, SpawnError};
pub use env::{BASE_ENV, Environment};
pub use exit::ExitInfo;
pub use group::{ProcessGroup, SignalError, kill_every_group};
pub use launch::{DEFAULT_EOF_GRACE, DEFAULT_KILL_WAIT, DEFAULT_TERM_GRACE, Ladder, Launch};
pub use program::{Program, valid_variable_name};
pub use stderr::{StderrTail, strip_escapes};
pub use teardown::{Teardown, TeardownError};
