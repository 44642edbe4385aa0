//! An OpenAI-compatible chat-completions client ([`OpenAiChatModel`]).
//!
//! Works with DeepSeek (the default), OpenAI, and local servers that speak
//! the same streaming protocol (llama.cpp, vLLM, Ollama's `/v1`, ...).

mod client;
mod config;
mod slots;
pub(crate) mod transport;
pub(crate) mod wire;

pub(crate) use client::CHAT_COMPLETIONS;
pub use client::OpenAiChatModel;
pub use config::{DEFAULT_BASE_URL, DEFAULT_MODEL, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, OpenAiConfig};
pub use wire::{content_bytes, message_bytes, request_bytes, tools_bytes};
