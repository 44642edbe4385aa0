#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod agent;
pub mod budget;
mod gate;
pub mod scripted;
mod store;

pub use agent::{exec, exec_with};
pub use gate::Gate;
pub use scripted::{ScriptedProvider, ScriptedProviderBuilder, ScriptedStats};
pub use store::MemoryChildStore;
