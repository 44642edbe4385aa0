//! The provider trait: one transport for child agents.

use futures::future::BoxFuture;

use crate::{Capabilities, ContinuableProvider, StartRequest, SubagentError, SubagentRun};

/// A source of child agents: in-process fresh, in-process fork, another
/// process over ACP, …
///
/// # Contract
///
/// - [`start`](SubagentProvider::start) owns setup until it returns `Ok`. If it
///   fails, or the request's token is cancelled while it is pending, it must
///   release everything it created before returning `Err`; when that
///   release fails, the error is [`SubagentError::rollback_failed`] (both
///   errors), which never reads as a clean cancellation. Returning `Ok`
///   *publishes* the run: ownership passes to the caller, who will call
///   [`SubagentRun::dispose`].
/// - Dropping the `start` future before it completes is a cancellation too:
///   whatever it created must be released by its destructors.
/// - After publication, cancelling the token must stop the child and settle
///   its result with [`StopReason::Aborted`](crate::StopReason::Aborted).
/// - Distinct starts may overlap and must be independent.
/// - A request field the provider cannot honour never reaches it: the service
///   checks [`capabilities`](SubagentProvider::capabilities) first.
pub trait SubagentProvider: Send + Sync + 'static {
    /// The name the provider is registered under (`spawn`, `fork`, `acp`, …).
    fn name(&self) -> &str;

    /// The optional start fields this provider honours.
    fn capabilities(&self) -> Capabilities;

    /// Whether the child sees the parent's completed turns. Descriptive only:
    /// the `subagent` tool words its description from it.
    fn inherits_parent_context(&self) -> bool;

    /// Starts one child; see the trait docs for the ownership contract.
    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>>;

    /// The continuation capability: starting children that can be resumed
    /// later by id. `None` (the default) means one-shot children only.
    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        None
    }
}
