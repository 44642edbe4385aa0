#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod byte_limit;
mod child_update;
mod code;
mod config;
mod diagnostic;
mod printable;
mod process;
mod provider;
mod session;
mod subagents;
mod transport;
mod wording;

pub use byte_limit::{ByteLimit, InvalidByteLimit};
pub use child_update::{ChildUpdate, ProgressSink, Status};
pub use code::ErrorCode;
pub use config::{AcpAuth, AcpConfig, DEFAULT_NAME, InvalidConfig, PermissionPolicy};
pub use dsh_process::{BASE_ENV, Environment, Ladder, Launch, Program};
pub use provider::AcpProvider;
pub use session::DATA_DIR_META;
pub use subagents::MAX_SESSIONS as MAX_SUBAGENT_SESSIONS;
