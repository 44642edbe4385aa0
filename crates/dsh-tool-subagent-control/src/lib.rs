#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod plugin;
mod tool;
pub mod wording;

pub use plugin::SubagentControlPlugin;

/// The names the plugin registers.
pub const TOOL_NAMES: [&str; 1] = [wording::SEND_MESSAGE];
