#![doc = include_str!("../README.md")]
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
