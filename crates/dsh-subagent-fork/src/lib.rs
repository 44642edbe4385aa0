//! The `fork` subagent provider: each delegation starts an in-process
//! [`dsh_agent::Agent`] seeded with its parent's completed turns.
//!
//! The seed is the parent's conversation up to its last completed run; the
//! run in flight (the one making this tool call) is excluded, so every tool
//! call in the seed has its result. The child's answer is read from its own
//! turns only: an inherited message never becomes the answer. Capabilities
//! are those of `spawn`; the child inherits the parent's context, so the
//! `subagent` tool uses its inherited (`INHERITS this conversation`) wording.
//!
//! Fork children are continuable, like spawn ones: with a data directory,
//! `run_in_background` starts a durable child that `send_message` continues,
//! its inherited turns kept as its transcript's seed.
//!
//! ```
//! use std::sync::Arc;
//! use dsh_subagent_api::SubagentProvider;
//! use dsh_subagent_fork::ForkProvider;
//!
//! let fork = Arc::new(ForkProvider::new());
//! assert_eq!(fork.name(), "fork");
//! assert!(fork.inherits_parent_context());
//! assert!(fork.continuation().is_some());
//! ```

#![forbid(unsafe_code)]

use dsh_agent::child::{ChildContext, start_child};
use dsh_subagent_api::{Capabilities, ContinuableProvider, StartRequest, SubagentError, SubagentProvider, SubagentRun};
use futures::future::BoxFuture;

/// The default provider name.
pub const DEFAULT_NAME: &str = "fork";

/// Starts in-process children that inherit the parent's completed turns.
#[derive(Clone, Debug)]
pub struct ForkProvider {
    name: String,
}

impl ForkProvider {
    /// A provider named [`DEFAULT_NAME`].
    pub fn new() -> Self {
        Self::named(DEFAULT_NAME)
    }

    /// A provider registered under another name.
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

impl Default for ForkProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl SubagentProvider for ForkProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        true
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { start_child(request, ChildContext::InheritParent) })
    }

    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(ChildContext::InheritParent.continuation())
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
