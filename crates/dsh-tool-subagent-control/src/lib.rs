//! The model-facing control tool for continuable subagents: `send_message`
//! (docs/contract.md, "send_message").
//!
//! `send_message {subagent_id, message}` continues a background subagent
//! that the `subagent` tool started with `run_in_background: true` over a
//! provider with the continuation capability. The call is synchronous and
//! has three outcomes:
//!
//! - **steered**: the child is still working, and the message joins its
//!   current turn — `message delivered to running task <taskId>`; that
//!   task's answer (read with `task_output`) has seen it;
//! - **started**: the child has finished, and a new task continues its
//!   conversation — `message started task <taskId> continuing subagent
//!   <subagent_id>`;
//! - **refused**: an `Error: …` that ends with `the message was not
//!   delivered` (the child is starting or settling, its provider cannot
//!   steer, or its turn ended just before the message arrived; send again).
//!
//! An unknown, foreign or descriptor-less id starts a task that fails, read
//! with `task_output`.
//!
//! The routing is the control service's
//! ([`dsh_subagent::SubagentControl`]); this crate only parses, calls and
//! renders. Model-facing text lives in [`wording`].

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
