//! The dsh subagent service.
//!
//! [`SubagentService`] keeps the registered providers
//! ([`SubagentProvider`](dsh_subagent_api::SubagentProvider)) and starts
//! children on them after checking the request against the provider's
//! capabilities and the depth cap. Subscribers hear providers come and go and
//! runs start and end ([`SubagentEvent`]); that is how the `subagent` tool
//! follows its provider.
//!
//! [`scripted::ScriptedProvider`] is a deterministic provider for tests,
//! examples and benchmarks: every stage can succeed, fail, hang or panic.
//!
//! # Example
//!
//! ```
//! use dsh_subagent::{scripted::ScriptedProvider, SubagentService};
//! use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, ToolFilter};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let service = SubagentService::new();
//! let acp_like = ScriptedProvider::builder("acp")
//!     .capabilities(dsh_subagent_api::Capabilities::NONE)
//!     .build();
//! let _registration = service.register_provider(acp_like).unwrap();
//!
//! let mut request = StartRequest::text("task", AgentRef::new("parent"), CancellationToken::new());
//! request.tool_filter = Some(ToolFilter { allow: None, deny: Some(vec!["subagent".into()]) });
//! let error = service.start("acp", request).await.unwrap_err();
//! assert_eq!(error.to_string(), r#"subagent provider "acp" does not support the "toolFilter" capability"#);
//! assert_eq!(error.code(), "UNSUPPORTED_CAPABILITY");
//! # });
//! ```

#![forbid(unsafe_code)]

pub mod control;
mod events;
mod gate;
pub mod scripted;
mod service;
pub mod settlement;
pub mod wording;

pub use control::{ControlError, Delivery, Route, Started, SubagentControl};
pub use events::{Listener, RunEndInfo, RunInfo, SubagentEvent};
pub use gate::Gate;
pub use service::{ProviderRegistration, SubagentService, Subscription};
pub use settlement::{RELEASE_GRACE, Settled, settle};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
