//! The tool seam of dsh: what a model-facing tool is, what one call carries,
//! what the model gets back, and the registry tools live in.
//!
//! - [`Tool`]: name, description, JSON-schema parameters, async `execute`.
//! - [`ToolExecution`]: the call's [`CancellationToken`] and the calling
//!   agent ([`AgentRef`]).
//! - [`ToolResult`]: text plus `is_error`; a failure renders `Error: <message>`.
//! - [`ToolRegistry`]: unique names, reserved first and mounted later, with
//!   handles that undo themselves on drop.
//! - [`parameters_schema`]: the single schemars setting all tools share.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
//! use futures::future::BoxFuture;
//! use serde_json::{json, Value};
//! use dsh_tools::CancellationToken;
//!
//! struct Echo(Value);
//!
//! impl Tool for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn description(&self) -> &str { "Repeat the text." }
//!     fn parameters(&self) -> &Value { &self.0 }
//!     fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
//!         Box::pin(async move {
//!             match args.get("text").and_then(Value::as_str) {
//!                 Some(text) => Ok(ToolOutput::text(text)),
//!                 None => Err(ToolError::new("echo argument \"text\" is required")),
//!             }
//!         })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let registry = ToolRegistry::new();
//! let registration = registry.register(Arc::new(Echo(json!({"type": "object"})))).unwrap();
//! assert!(registry.register(Arc::new(Echo(json!({"type": "object"})))).is_err()); // duplicate name
//!
//! let exec = ToolExecution::new(CancellationToken::new());
//! let ok = registry.call("echo", json!({"text": "hi"}), exec.clone()).await;
//! assert_eq!(ok.text, "hi");
//! let bad = registry.call("echo", json!({}), exec).await;
//! assert_eq!(bad.text, "Error: echo argument \"text\" is required");
//!
//! drop(registration);
//! assert!(registry.get("echo").is_none());
//! # });
//! ```

#![forbid(unsafe_code)]

mod code;
mod registry;
mod schema;
mod tool;

pub use code::ErrorCode;
pub use dsh_subagent_api::{AgentId, AgentRef};
pub use dsh_subagent_api::{BoxFuture, CancellationToken};
pub use registry::{
    ABORTED_BEFORE_DISPATCH, MountedTool, NameReservation, RegistryError, ToolRegistration, ToolRegistry, ToolSpec,
    panic_message,
};
pub use schema::parameters_schema;
pub use tool::{INVALID_ARGUMENTS, Tool, ToolError, ToolExecution, ToolOutput, ToolResult, json_kind};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
