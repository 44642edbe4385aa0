//! The dsh subagent service.
//!
//! [`SubagentService`] keeps the registered providers
//! ([`SubagentProvider`](dsh_subagent_api::SubagentProvider)) and starts
//! children on them after checking the request against the provider's
//! capabilities and the depth cap. Subscribers hear providers come and go and
//! runs start and end ([`SubagentEvent`]); that is how the `subagent` tool
//! follows its provider.
//!
//! A deterministic provider for tests lives in the test kit,
//! `dsh-subagent-testing` (a dev-dependency).
//!
//! # Example
//!
//! ```
//! use dsh_subagent::SubagentService;
//! use dsh_subagent_testing::ScriptedProvider;
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
//! request.tool_filter = Some(ToolFilter::denying(vec!["subagent"]));
//! let error = service.start("acp", request).await.unwrap_err();
//! assert_eq!(error.to_string(), r#"subagent provider "acp" does not support the "toolFilter" capability"#);
//! assert_eq!(error.code(), "UNSUPPORTED_CAPABILITY");
//! assert_eq!(error.code(), dsh_subagent_api::ErrorCode::UnsupportedCapability);
//! # });
//! ```

#![forbid(unsafe_code)]

pub mod control;
mod events;
mod service;
pub mod settlement;

pub use control::{ControlError, Delivery, Route, Started, SubagentControl};
pub use events::{Listener, RunEndInfo, RunInfo, SubagentEvent};
pub use service::{ProviderRegistration, SubagentService, Subscription};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
