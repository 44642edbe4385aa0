#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod agent;
mod answer;
pub mod child;
mod code;
mod context;
mod info;
pub mod kept;
mod notices;
mod observer;
mod outcome;
mod runtime;
mod store;
mod structured;
mod tools;
mod trace;
mod usage;
pub mod wording;

pub use agent::{Agent, AgentBuilder, AgentError, DEFAULT_MAX_TURNS, SteerRefused};
pub use answer::TranscriptAnswer;
pub use code::ErrorCode;
pub use context::{ContextWindow, DEFAULT_ANSWER_RESERVE, answer_reserve, fit_tool_results};
pub use dsh_subagent_api::InvalidContextWindow;
/// The transcript format the loop writes (the `dsh-transcript` crate).
pub use dsh_transcript as transcript;
pub use dsh_transcript::{AgentStop, ContextStop, CountedBy, FoundBy};
pub use info::AgentInfo;
pub use kept::{KeptError, KeptFacts, KeptModel};
pub use notices::{Notice, NoticeSource};
pub use observer::AgentObserver;
pub use outcome::RunOutcome;
pub use runtime::{AgentRuntime, EndOfRun, KeptUse, OnResume};
pub use store::JsonlChildStore;
pub use tools::{ToolView, UnknownFilterTool};
pub use trace::CAPTURE_CONTENT_ENV;
pub use usage::{Priced, UsageTotals, add_reported};
