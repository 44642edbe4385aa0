//! A small, real agent loop for dsh.
//!
//! An [`Agent`] has an id, a parent and a depth, a model (on a shared
//! [`AgentRuntime`]), a system prompt, a [`ToolView`] (the registry through an
//! allow/deny filter that hides *and* refuses), limits (model calls per run,
//! output tokens per call), a conversation and a JSONL transcript.
//!
//! [`Agent::run`] takes one user prompt through model → tool calls → tool
//! results → model until a final answer, a limit or cancellation, which is
//! honoured at every await. Tool calls of one assistant message run
//! concurrently; their results are recorded in the model's order. Usage is
//! counted per agent and rolled up from children. Before each model call,
//! notices pending for the agent (from the runtime's [`NoticeSource`], such
//! as finished background tasks) join the conversation as a user message,
//! and so do messages [steered](Agent::steer) into the run in progress.
//!
//! [`child::start_child`] is the in-process child driver behind the spawn and
//! fork providers; [`child::start_continuable_child`] and
//! [`child::resume_child`] start and continue durable children, which
//! [`store::JsonlChildStore`] finds again in their transcripts.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use dsh_agent::{Agent, AgentRuntime, AgentStop};
//! use dsh_llm::ScriptedModel;
//! use dsh_tools::{CancellationToken, ToolRegistry};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let model = ScriptedModel::from_json_str(
//!     r#"{"rules": [{"when": {}, "reply": {"text": "Paris."}}]}"#,
//! ).unwrap();
//! let runtime = Arc::new(AgentRuntime::new(Arc::new(model), ToolRegistry::new()));
//! let agent = Agent::builder(runtime).system_prompt("Be brief.").build().unwrap();
//! let outcome = agent.run("Capital of France?", &CancellationToken::new()).await;
//! assert_eq!(outcome.stop, AgentStop::Completed);
//! assert_eq!(outcome.text, "Paris.");
//! assert_eq!(agent.history().len(), 2); // the prompt and the answer
//! # });
//! ```

#![forbid(unsafe_code)]

mod agent;
pub mod child;
mod code;
mod notices;
mod observer;
mod outcome;
mod runtime;
pub mod store;
mod structured;
mod tools;
pub mod transcript;
mod usage;
pub mod wording;

pub use agent::{Agent, AgentBuilder, AgentError, DEFAULT_MAX_TURNS, SteerRefused};
pub use code::ErrorCode;
pub use notices::NoticeSource;
pub use observer::{AgentInfo, AgentObserver};
pub use outcome::{AgentStop, RunOutcome};
pub use runtime::AgentRuntime;
pub use tools::{ToolView, UnknownFilterTool};
pub use usage::{UsageTotals, add as add_usage};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
