#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod code;
mod config;
mod diagnostic;
mod process;
mod provider;
mod session;
mod transport;
mod wording;

pub use code::ErrorCode;
pub use config::{AcpAuth, AcpConfig, DEFAULT_NAME, InvalidConfig, PermissionPolicy};
pub use dsh_process::BASE_ENV;
pub use provider::AcpProvider;
