//! # dsh-llm: the chat-model seam of dsh-subagent
//!
//! An agent loop (model → tool calls → tool results → model) needs one
//! thing from a language model: "here is the conversation and the tools,
//! stream me an answer". This crate is that seam:
//!
//! * [`ChatModel`]: an object-safe trait (`Arc<dyn ChatModel>`) whose
//!   [`ChatModel::stream_chat`] takes a [`ChatRequest`] and a
//!   [`CancellationToken`] and returns a stream of [`ChatEvent`]s: text
//!   deltas, *complete* tool calls, usage and a finish reason.
//! * [`collect_response`] / [`complete`]: gather a stream into a
//!   [`ChatResponse`], returning [`LlmError::Cancelled`] as soon as the
//!   token fires.
//! * [`OpenAiChatModel`]: a streaming client for any OpenAI-compatible
//!   `/chat/completions` endpoint (DeepSeek by default), with timeouts,
//!   retries with backoff, and clear errors.
//! * [`ScriptedModel`]: a deterministic, offline model answering from JSON
//!   rules, so whole multi-agent runs are reproducible in tests and demos.
//!
//! The crate logs with `tracing` and never installs a subscriber.
//!
//! ## Example
//!
//! ```
//! use dsh_llm::{ChatRequest, Message, ScriptedModel, complete};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), dsh_llm::LlmError> {
//! let model = ScriptedModel::from_json_str(
//!     r#"{"rules": [
//!         {"when": {"last_user_contains": "capital of France"}, "reply": {"text": "Paris."}},
//!         {"when": {}, "reply": {"text": "I have nothing scripted for: {{last_user}}"}}
//!     ]}"#,
//! )?;
//! let request = ChatRequest::new(vec![Message::user("What is the capital of France?")]);
//! let response = complete(&model, request, &CancellationToken::new()).await?;
//! assert_eq!(response.text, "Paris.");
//! assert_eq!(response.finish_reason.as_str(), "stop");
//! # Ok(())
//! # }
//! ```
//!
//! ## The OpenAI-compatible client
//!
//! [`OpenAiChatModel::from_env`] reads:
//!
//! | variable       | meaning                                   | default                    |
//! |----------------|-------------------------------------------|----------------------------|
//! | `DSH_BASE_URL` | base URL; requests go to `{it}/chat/completions` | `https://api.deepseek.com` |
//! | `DSH_API_KEY`  | bearer token (unset: no `Authorization`)  | none                       |
//! | `DSH_MODEL`    | model name                                | `deepseek-chat`            |
//!
//! Requests always stream (`stream: true`, `stream_options.include_usage`).
//! A request is retried (exponential backoff, `Retry-After` seconds
//! honoured, see [`OpenAiConfig`]) on HTTP 429, 5xx, connection errors and
//! timeouts, but only before the response body started: once an event
//! reached the caller nothing is retried. Tool-call deltas are assembled by
//! `index` and emitted complete when the finish reason (or `[DONE]`)
//! arrives. A stream that closes before either is an
//! [`LlmError::StreamEnded`] error. Cancelling drops the HTTP connection.
//!
//! ## The scripted model
//!
//! A script is a JSON object with a list of rules. For each request, the
//! rules are tried in order and the first whose `when` conditions all hold
//! answers with its `reply`. Matching looks only at the request, never at
//! earlier calls, so concurrent conversations sharing one model cannot
//! disturb each other.
//!
//! ```json
//! {"rules": [
//!   {"name": "optional label",
//!    "when": {"last_message": "user", "last_user_contains": "capital of France"},
//!    "reply": {"text": "Paris."}},
//!   {"when": {"last_message": "tool", "last_tool": "subagent"},
//!    "reply": {"text": "The subagent reported: {{last_tool_result}}"}},
//!   {"when": {}, "reply": {"text": "I have nothing scripted for: {{last_user}}"}}
//! ]}
//! ```
//!
//! Conditions in `when` (all optional, AND-ed; text tests are
//! case-sensitive substring tests):
//!
//! | key | holds when |
//! |-----|------------|
//! | `last_message` | the last message has this role: `system`, `user`, `assistant` or `tool` |
//! | `last_user_contains` | the last user message contains the text |
//! | `first_user_contains` | the first user message contains the text |
//! | `system_contains` | the system prompt (all system messages) contains the text |
//! | `last_tool` | the latest tool result answers a call of the tool with this name |
//! | `last_tool_result_contains` | the latest tool result contains the text |
//! | `tool_offered` | a tool with this name is in the request's `tools` |
//! | `tool_not_offered` | no tool with this name is in the request's `tools` |
//! | `assistant_turns` | the request holds exactly this many assistant messages |
//!
//! `reply` fields:
//!
//! | key | meaning |
//! |-----|---------|
//! | `text` | text to stream (templates allowed) |
//! | `tool_calls` | `[{"name": "...", "arguments": {...}}]`; string values inside `arguments` may hold templates (substituted, then JSON-escaped) |
//! | `finish_reason` | `stop`, `length`, `tool_calls`, `content_filter` or any text; default `tool_calls` if there are tool calls, else `stop` |
//! | `error` | fail the call with [`LlmError::Scripted`] and this message instead (alone) |
//! | `stream_by` | `word` (default: one delta per word), `char`, or `whole` |
//! | `delay_ms` | pause before each text delta (default 0; cancellation interrupts it) |
//!
//! Templates: `{{last_user}}`, `{{last_user_short}}` (its first eight
//! words), `{{first_user}}`, `{{last_tool_result}}`, `{{last_tool}}`,
//! `{{system}}`, `{{assistant_turns}}`. Unknown keys, unknown templates and
//! empty replies are load errors naming the file and JSON path (e.g.
//! `rules[1].when`). A request that no rule matches fails with
//! [`LlmError::NoRuleMatched`], showing the last message.
//!
//! Determinism: tool-call ids are `call_<turn>_<index>` where `turn` is the
//! number of assistant messages in the request plus one and `index` counts
//! from 0; usage is estimated as characters / 4, rounded up (prompt: all
//! message contents, tool-call names and arguments, tool definitions;
//! completion: the reply's text and tool calls). Events come in this
//! order: text deltas, tool calls, usage, finish reason.
//!
//! ### The built-in demo script
//!
//! [`ScriptedModel::builtin`] ([`BUILTIN_SCRIPT`]) drives a
//! parent-and-child demo. The child is recognised by **not being offered a
//! tool named `subagent`** (delegated agents do not delegate further),
//! which does not depend on any prompt wording:
//!
//! 1. *Parent, after a `subagent` tool result* (`subagent` offered, last
//!    message is a tool result of `subagent`): answers
//!    `The subagent finished the task. Its report:\n\n{{last_tool_result}}`.
//! 2. *Parent, on a user message* (`subagent` offered, last message from
//!    the user): calls `subagent` with
//!    `{"description": "{{last_user_short}}", "prompt": "{{last_user}}"}`.
//! 3. *Child, on its task* (`subagent` not offered, last message from the
//!    user): answers `Scripted subagent here. I was asked: "{{last_user}}".
//!    In a real run I would do that work now; this demo model only reports
//!    back.`
//! 4. Anything else: `I have nothing scripted for: {{last_user}}`.

mod error;
mod message;
mod model;
pub mod openai;
pub mod scripted;

pub use error::LlmError;
pub use message::{Message, Role, ToolCall, ToolDefinition};
pub use model::{
    ChatEvent, ChatModel, ChatRequest, ChatResponse, ChatStream, FinishReason, Usage, collect_response,
    collect_response_with, complete,
};
pub use openai::{OpenAiChatModel, OpenAiConfig};
pub use scripted::{BUILTIN_SCRIPT, ScriptedModel};
pub use tokio_util::sync::CancellationToken;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
