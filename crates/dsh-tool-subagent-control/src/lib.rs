//! The model-facing control tool for continuable subagents: `send_message`
//! (reference-contract §2.1, seed 002).
//!
//! `send_message {subagent_id, message}` continues a background subagent
//! that the `subagent` tool started with `run_in_background: true` over a
//! provider with the continuation capability. The call is synchronous and
//! either **starts** a new task that continues the child's conversation —
//! `message started task <taskId> continuing subagent <subagent_id>`, the
//! answer read with `task_output` — or is **refused** with an `Error: …`
//! that ends with `the message was not delivered` (for instance while the
//! child's current task is still running). An unknown, foreign or
//! descriptor-less id starts a task that fails, read with `task_output`.
//!
//! The routing is the control service's
//! ([`dsh_subagent::SubagentControl`]); this crate only parses, calls and
//! renders. Model-facing text lives in [`wording`].
//!
//! This crate does not steer a running turn, so the seed's second rendering
//! (`message delivered to running task <taskId>`) is never produced.

#![forbid(unsafe_code)]

mod plugin;
mod tool;
pub mod wording;

pub use plugin::SubagentControlPlugin;
pub use tool::send_message_parameters;

/// The names the plugin registers.
pub const TOOL_NAMES: [&str; 1] = [wording::SEND_MESSAGE];

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
