//! The `spawn` subagent provider: each delegation starts a fresh in-process
//! [`dsh_agent::Agent`] that shares its parent's runtime (model client, tool
//! registry, transcripts) but none of its conversation.
//!
//! All four capabilities are supported: `agentOptions` override the parent's
//! model and token cap, a persona replaces the system prompt, a tool filter
//! hides and refuses tools, and `maxDepth` caps the child's depth. The child
//! does not inherit the parent's context, so the `subagent` tool uses its
//! standalone wording.
//!
//! Spawn children can also be *continuable* ([`SubagentProvider::continuation`]):
//! started under a chosen id with a descriptor in their transcript, and
//! resumed by id with a new prompt, also after a restart.
//!
//! ```
//! use std::sync::Arc;
//! use dsh_subagent_api::SubagentProvider;
//! use dsh_subagent_spawn::SpawnProvider;
//!
//! let spawn = Arc::new(SpawnProvider::new());
//! assert_eq!(spawn.name(), "spawn");
//! assert!(!spawn.inherits_parent_context());
//! assert!(spawn.capabilities().depth_limit);
//! assert!(spawn.continuation().is_some());
//! ```

#![forbid(unsafe_code)]

use dsh_agent::child::{ChildContext, start_child};
use dsh_subagent_api::{Capabilities, ContinuableProvider, StartRequest, SubagentError, SubagentProvider, SubagentRun};
use futures::future::BoxFuture;

/// The default provider name.
pub const DEFAULT_NAME: &str = "spawn";

/// Starts fresh in-process children.
#[derive(Clone, Debug)]
pub struct SpawnProvider {
    name: String,
}

impl SpawnProvider {
    /// A provider named [`DEFAULT_NAME`].
    pub fn new() -> Self {
        Self::named(DEFAULT_NAME)
    }

    /// A provider registered under another name.
    pub fn named(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

impl Default for SpawnProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl SubagentProvider for SpawnProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move { start_child(request, ChildContext::Fresh) })
    }

    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        Some(ChildContext::Fresh.continuation())
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
