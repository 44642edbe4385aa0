//! The provider seam of dsh subagents.
//!
//! A *provider* starts child agents over some transport; the `subagent` tool
//! and the service in `dsh-subagent` call it through this crate's types only.
//! A provider author depends on this crate and nothing heavier.
//!
//! # The pieces
//!
//! - [`SubagentProvider`]: `name`, [`Capabilities`], whether the child
//!   inherits the parent's context, and `start`.
//! - [`StartRequest`]: the prompt, the parent ([`AgentRef`]), a required
//!   [`CancellationToken`], and optional [`AgentOptions`], persona,
//!   [`ToolFilter`], `max_depth`, output schema and label. Optional fields
//!   stay `None` unless set, so "absent" never turns into "empty".
//! - [`SubagentRun`]: the published child: `id`, a cancel-safe `result`, an
//!   idempotent async `dispose`, and optionally a [`Steerer`] that delivers
//!   a message into its running turn.
//! - [`SubagentResult`] and [`StopReason`]: how the run ended, its output
//!   blocks and an optional bounded diagnostic.
//! - [`SubagentError`]: failures, each with a stable [`code`](SubagentError::code).
//! - [`child_depth`]: the depth rule every provider applies.
//! - Continuation: a provider that returns a [`ContinuableProvider`] from
//!   [`SubagentProvider::continuation`] starts children under a chosen id with
//!   a [`ContinuationDescriptor`] recorded before their first turn, and
//!   resumes them by id ([`ResumeRequest`]); a [`ChildStore`] finds them again.
//!
//! # Cancellation
//!
//! One token covers a child's whole life. Before publication a cancelled start
//! rolls back and fails; after publication it settles `aborted`. `dispose`
//! always runs, exactly once, and returns only when nothing of the child runs.
//!
//! # Example: a provider that answers at once
//!
//! ```
//! use dsh_subagent_api::{
//!     BoxFuture, Capabilities, StartRequest, SubagentError, SubagentProvider, SubagentResult, SubagentRun,
//! };
//!
//! struct Echo;
//!
//! impl SubagentProvider for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn capabilities(&self) -> Capabilities { Capabilities::NONE }
//!     fn inherits_parent_context(&self) -> bool { false }
//!     fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
//!         Box::pin(async move {
//!             if request.cancel.is_cancelled() {
//!                 return Err(SubagentError::aborted("echo start aborted before publication"));
//!             }
//!             let answer = dsh_subagent_api::concat_text(&request.prompt);
//!             let id = format!("echo:{}", request.parent.id());
//!             Ok(SubagentRun::new(id, async move { Ok(SubagentResult::completed(answer)) }, || async { Ok(()) }))
//!         })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use dsh_subagent_api::{AgentRef, CancellationToken};
//! let request = StartRequest::text("ping", AgentRef::new("parent-1"), CancellationToken::new());
//! let mut run = Echo.start(request).await?;
//! assert_eq!(run.id(), "echo:parent-1");
//! let result = run.result().await?;
//! run.dispose().await?;
//! assert_eq!(result.text(), "ping");
//! # Ok::<(), SubagentError>(())
//! # }).unwrap();
//! ```

#![forbid(unsafe_code)]

mod agent;
mod capabilities;
mod code;
mod content;
mod continuation;
mod depth;
mod error;
mod provider;
mod request;
mod result;
mod run;
mod steer;

pub use agent::{AgentId, AgentRef};
pub use capabilities::{Capabilities, Capability};
pub use code::ErrorCode;
pub use content::{ContentBlock, concat_text};
pub use continuation::{
    ChildRecord, ChildStore, ContinuableProvider, ContinuationDescriptor, DESCRIPTOR_VERSION, ResumeRequest,
};
pub use depth::{MAX_SAFE_INTEGER, child_depth, validate_max_depth};
pub use error::SubagentError;
pub use provider::SubagentProvider;
pub use request::{AgentOptions, StartRequest, ToolFilter};
pub use result::{MAX_DIAGNOSTIC_BYTES, StopReason, SubagentResult, bound_diagnostic};
pub use run::SubagentRun;
pub use steer::Steerer;

/// The cancellation token that covers a child's life (re-exported from
/// `tokio-util`, so a provider needs no dependency of its own).
pub use tokio_util::sync::CancellationToken;

/// A boxed, sendable future: what the provider traits return (the alias of
/// `futures`, re-exported so a provider needs no dependency of its own).
pub use futures::future::BoxFuture;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
