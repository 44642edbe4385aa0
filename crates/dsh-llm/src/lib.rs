#![doc = include_str!("../README.md")]

#[cfg(feature = "http")]
pub mod cassette;
mod concurrency;
mod error;
mod message;
mod model;
#[cfg(feature = "http")]
pub mod openai;
mod price;
mod refusal;
pub mod scripted;
mod stream_cut;
// The client's and the cassettes' words stay here, unused without `http`.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
mod wording;

pub use concurrency::{Concurrency, InvalidConcurrency};
pub use error::{ContextRefusal, LlmError};
pub use message::{Message, Role, ToolCall, ToolDefinition};
pub use model::{
    ChatEvent, ChatModel, ChatRequest, ChatResponse, ChatStream, Counted, FinishReason, PromptCount, Usage,
    collect_response, collect_response_with, complete,
};
#[cfg(feature = "http")]
pub use openai::{OpenAiChatModel, OpenAiConfig};
pub use price::{Cost, Price, PriceError, PriceKey};
pub use scripted::{BUILTIN_SCRIPT, ScriptedModel};
pub use stream_cut::StreamCut;
pub use tokio_util::sync::CancellationToken;
