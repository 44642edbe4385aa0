//! The [`ChatModel`] trait, its request, its streamed events and the
//! [`collect_response`] helper.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::concurrency::Concurrency;
use crate::error::LlmError;
use crate::message::{Message, ToolCall, ToolDefinition};
use crate::stream_cut::StreamCut;

/// One call to a chat model: the conversation so far and the tools on offer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// Model override; `None` uses the model's configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Sampling temperature, when the caller wants to pin it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

impl ChatRequest {
    /// A request with these messages and no tools.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    /// Sets the tools on offer.
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the model override.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the token limit.
    pub fn with_max_tokens(mut self, max_tokens: u64) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
}

/// Token accounting for one call, or for several summed.
///
/// A client reports what the server sent: a count the server left out is
/// `0` there, and reads as "not reported", never as zero tokens. The agent
/// loop replaces such counts with its estimate and marks the usage
/// [`Counted::Estimated`], so a budget spends it and every view can say so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Their sum (as reported by the server).
    pub total_tokens: u64,
    /// How many of the prompt tokens the server read from its cache
    /// (OpenAI's `prompt_tokens_details.cached_tokens`), where it reports
    /// them; a [`Price`](crate::Price) with a cached input price charges
    /// those at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Whether the counts are the server's, or some are an estimate.
    /// Written only when estimated (`"counted":"estimated"`), so a usage
    /// the server reported reads as it always did.
    #[serde(default, skip_serializing_if = "Counted::is_reported")]
    pub counted: Counted,
}

impl Usage {
    /// The server's counts of one call, with their sum as the total.
    ///
    /// ```
    /// use dsh_llm::{Counted, Usage};
    /// let usage = Usage::reported(12, 3);
    /// assert_eq!((usage.total_tokens, usage.counted), (15, Counted::Reported));
    /// ```
    pub const fn reported(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            cached_tokens: None,
            counted: Counted::Reported,
        }
    }

    /// The same usage, `cached` of whose prompt tokens the server read
    /// from its cache.
    ///
    /// ```
    /// use dsh_llm::Usage;
    /// assert_eq!(Usage::reported(1000, 10).with_cached(800).cached_tokens, Some(800));
    /// ```
    #[must_use]
    pub const fn with_cached(mut self, cached: u64) -> Self {
        self.cached_tokens = Some(cached);
        self
    }

    /// Whether some of its counts are an estimate.
    pub const fn is_estimated(&self) -> bool {
        matches!(self.counted, Counted::Estimated)
    }
}

/// How a [`Usage`]'s counts are known: the one mark every view of usage
/// shows (the `dsh` lines, transcripts, spans) and every sum keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    /// Every count is the server's own.
    #[default]
    Reported,
    /// Some count is the loop's estimate: the server reported none, or left
    /// a count out, or gave it as zero.
    Estimated,
}

impl Counted {
    /// Whether every count is the server's own.
    pub const fn is_reported(&self) -> bool {
        matches!(self, Self::Reported)
    }

    /// The mark of a sum of two usages: estimated when either was.
    #[must_use]
    pub const fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Reported, Self::Reported) => Self::Reported,
            _ => Self::Estimated,
        }
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// Natural end of the answer.
    Stop,
    /// Hit the token limit; the answer is truncated.
    Length,
    /// The model wants its tool calls run.
    ToolCalls,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else the provider reported, verbatim.
    Other(String),
}

impl FinishReason {
    /// The wire spelling (`stop`, `length`, `tool_calls`, `content_filter`, or the other text).
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(value: &str) -> Self {
        match value {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            // `function_call` is the legacy spelling of the same thing.
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(FinishReason::from(text.as_str()))
    }
}

/// One item of a model's streamed answer.
///
/// A well-formed stream yields text deltas, then complete tool calls, then
/// (usually) usage, then a finish reason; usage may also come after the
/// finish reason. Every answer ends with its finish reason: a stream that
/// ends without one was cut off, and [`collect_response`] reads it as
/// [`LlmError::StreamEnded`]. Consumers should not rely on more than "text deltas come
/// in order" and "tool calls are complete when they appear".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum ChatEvent {
    /// A piece of the answer's text, to append.
    TextDelta(String),
    /// A complete tool call (assembled from the provider's deltas).
    ToolCall(ToolCall),
    /// Token usage for the whole call.
    Usage(Usage),
    /// The model finished, for this reason.
    Finish(FinishReason),
    /// The call waited this long for a place among the requests in flight
    /// to its endpoint before it was sent (see
    /// [`Concurrency`](crate::Concurrency)); no part of the answer. Given
    /// before the answer's events, and only when the call waited.
    Queued(Duration),
}

/// The stream a [`ChatModel`] returns: events or one final error.
///
/// After an `Err` item the stream ends.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<ChatEvent, LlmError>> + Send + 'static>>;

/// What [`ChatModel::count_prompt`] returns: the prompt tokens the server
/// counted, `None` when it gave no count.
pub type PromptCount = Pin<Box<dyn Future<Output = Result<Option<u64>, LlmError>> + Send + 'static>>;

/// A chat model that streams answers and may call tools.
///
/// Object safe: agents hold an `Arc<dyn ChatModel>`, and one instance may
/// serve many concurrent conversations.
pub trait ChatModel: Send + Sync + 'static {
    /// The default model name (used when [`ChatRequest::model`] is `None`).
    fn model_name(&self) -> &str;

    /// Who serves the model, as the OpenTelemetry GenAI conventions name it
    /// (`gen_ai.provider.name`: `openai`, `deepseek`, …; `_OTHER` when unknown).
    fn provider_name(&self) -> &str {
        "_OTHER"
    }

    /// Starts one call. Nothing happens until the stream is polled.
    ///
    /// When `cancel` fires, the stream yields [`LlmError::Cancelled`] and
    /// ends, dropping any in-flight request. Dropping the stream also
    /// cancels.
    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream;

    /// Asks the server how many prompt tokens `request` takes, for a server
    /// whose streamed answers never say (llama-cpp-python): the context
    /// fit asks this before it cuts on an estimate it could not check
    /// (see "The context fit" in `docs/design.md`). The default counts
    /// nothing (`Ok(None)`); a refusal for length is
    /// [`LlmError::ContextLength`], whose count the caller may read.
    fn count_prompt(&self, _request: ChatRequest, _cancel: CancellationToken) -> PromptCount {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// The most requests to `model` its endpoint is sent at once, when the
    /// server taught a limit (a stream it cut while another request was in
    /// flight) or one was kept from an earlier run; a configured limit is
    /// not learned. The default knows none.
    fn learned_concurrency(&self, _model: &str) -> Option<Concurrency> {
        None
    }

    /// Sends at most `limit` requests to `model` at once, as an earlier run
    /// learned, unless a limit is configured or was learned since. The
    /// default has no limit to set.
    fn keep_concurrency(&self, _model: &str, _limit: Concurrency) {}
}

impl<T: ChatModel + ?Sized> ChatModel for Arc<T> {
    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn provider_name(&self) -> &str {
        (**self).provider_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        (**self).stream_chat(request, cancel)
    }

    fn count_prompt(&self, request: ChatRequest, cancel: CancellationToken) -> PromptCount {
        (**self).count_prompt(request, cancel)
    }

    fn learned_concurrency(&self, model: &str) -> Option<Concurrency> {
        (**self).learned_concurrency(model)
    }

    fn keep_concurrency(&self, model: &str, limit: Concurrency) {
        (**self).keep_concurrency(model, limit);
    }
}

impl<T: ChatModel + ?Sized> ChatModel for Box<T> {
    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn provider_name(&self) -> &str {
        (**self).provider_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        (**self).stream_chat(request, cancel)
    }

    fn count_prompt(&self, request: ChatRequest, cancel: CancellationToken) -> PromptCount {
        (**self).count_prompt(request, cancel)
    }

    fn learned_concurrency(&self, model: &str) -> Option<Concurrency> {
        (**self).learned_concurrency(model)
    }

    fn keep_concurrency(&self, model: &str, limit: Concurrency) {
        (**self).keep_concurrency(model, limit);
    }
}

/// A whole answer, collected from a [`ChatStream`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// All text deltas, concatenated.
    pub text: String,
    /// Tool calls in the order they arrived.
    pub tool_calls: Vec<ToolCall>,
    /// Usage, when the model reported it.
    pub usage: Option<Usage>,
    /// The reported finish reason (a stream without one is
    /// [`LlmError::StreamEnded`], never a response).
    pub finish_reason: FinishReason,
    /// How long the call waited for a place among the requests in flight
    /// to its endpoint ([`ChatEvent::Queued`]); zero when it did not.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub queued: Duration,
}

impl ChatResponse {
    /// The assistant [`Message`] to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message::assistant_with_tool_calls(self.text.clone(), self.tool_calls.clone())
    }
}

/// Collects a stream into a [`ChatResponse`].
///
/// Returns [`LlmError::Cancelled`] as soon as `cancel` fires (the stream is
/// dropped, which drops any HTTP request), the stream's first error, and
/// [`LlmError::StreamEnded`] (with the text so far) for a stream that ends
/// without a [`ChatEvent::Finish`]: its answer was cut off.
pub async fn collect_response(stream: ChatStream, cancel: &CancellationToken) -> Result<ChatResponse, LlmError> {
    collect_response_with(stream, cancel, |_| {}).await
}

/// Like [`collect_response`], calling `on_event` for each event as it
/// arrives (e.g. to print text deltas live).
pub async fn collect_response_with(
    mut stream: ChatStream,
    cancel: &CancellationToken,
    mut on_event: impl FnMut(&ChatEvent),
) -> Result<ChatResponse, LlmError> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut usage = None;
    let mut finish_reason = None;
    let mut queued = Duration::ZERO;
    loop {
        let item = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(LlmError::Cancelled),
            item = stream.next() => item,
        };
        let Some(item) = item else { break };
        let event = match item {
            Ok(event) => event,
            // The text that streamed before the cut is the one collected here:
            // a model's stream reports the cut without a copy of it.
            Err(LlmError::StreamEnded { cut, attempts, partial }) => {
                let partial = if partial.is_empty() { text } else { partial };
                return Err(LlmError::StreamEnded { cut, attempts, partial });
            }
            Err(error) => return Err(error),
        };
        on_event(&event);
        match event {
            ChatEvent::TextDelta(delta) => text.push_str(&delta),
            ChatEvent::ToolCall(call) => tool_calls.push(call),
            ChatEvent::Usage(u) => usage = Some(u),
            ChatEvent::Finish(reason) => finish_reason = Some(reason),
            ChatEvent::Queued(waited) => queued += waited,
        }
    }
    // A stream without a finish reason was cut off: its text is not an answer.
    let Some(finish_reason) = finish_reason else {
        return Err(LlmError::StreamEnded {
            cut: StreamCut::Closed,
            attempts: 0,
            partial: text,
        });
    };
    Ok(ChatResponse {
        text,
        tool_calls,
        usage,
        finish_reason,
        queued,
    })
}

/// Runs one call on `model` and collects the answer: the usual one-liner.
pub async fn complete(
    model: &dyn ChatModel,
    request: ChatRequest,
    cancel: &CancellationToken,
) -> Result<ChatResponse, LlmError> {
    collect_response(model.stream_chat(request, cancel.clone()), cancel).await
}

/// The size of `value`'s compact JSON (what `serde_json::to_string` would
/// give), counted as it is written rather than built: a request's size is
/// estimated on every model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JsonSize {
    /// Its bytes.
    pub(crate) bytes: u64,
    /// Its characters (bytes that do not continue a UTF-8 sequence).
    pub(crate) chars: u64,
}

impl JsonSize {
    /// Measures `value`; zero if it cannot be serialized (a map with
    /// non-string keys), which no request holds.
    pub(crate) fn of(value: &impl Serialize) -> Self {
        struct Counter(JsonSize);
        impl std::io::Write for Counter {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.bytes += buf.len() as u64;
                self.0.chars += buf.iter().filter(|byte| (**byte & 0xC0) != 0x80).count() as u64;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut counter = Counter(Self::default());
        match serde_json::to_writer(&mut counter, value) {
            Ok(()) => counter.0,
            Err(_) => Self::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reason_round_trip() {
        for text in ["stop", "length", "tool_calls", "content_filter", "weird"] {
            let reason = FinishReason::from(text);
            assert_eq!(reason.as_str(), text);
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(serde_json::from_str::<FinishReason>(&json).unwrap(), reason);
        }
        assert_eq!(FinishReason::from("weird"), FinishReason::Other("weird".into()));
    }

    #[tokio::test]
    async fn collect_reads_a_stream_without_finish_as_cut_and_stops_on_error() {
        let events = vec![
            Ok(ChatEvent::TextDelta("a".into())),
            Ok(ChatEvent::ToolCall(ToolCall::new("1", "t", "{}"))),
        ];
        let stream: ChatStream = Box::pin(futures::stream::iter(events));
        assert_eq!(
            collect_response(stream, &CancellationToken::new()).await,
            Err(LlmError::StreamEnded {
                cut: StreamCut::Closed,
                attempts: 0,
                partial: "a".into()
            })
        );
        let events = vec![
            Ok(ChatEvent::TextDelta("a".into())),
            Ok(ChatEvent::ToolCall(ToolCall::new("1", "t", "{}"))),
            Ok(ChatEvent::Finish(FinishReason::ToolCalls)),
        ];
        let stream: ChatStream = Box::pin(futures::stream::iter(events));
        let response = collect_response(stream, &CancellationToken::new()).await.unwrap();
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        assert_eq!(response.text, "a");

        let events = vec![Ok(ChatEvent::TextDelta("a".into())), Err(LlmError::Cancelled)];
        let stream: ChatStream = Box::pin(futures::stream::iter(events));
        assert_eq!(
            collect_response(stream, &CancellationToken::new()).await,
            Err(LlmError::Cancelled)
        );
    }

    #[tokio::test]
    async fn collect_returns_promptly_when_cancelled() {
        let stream: ChatStream = Box::pin(futures::stream::pending());
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(collect_response(stream, &cancel).await, Err(LlmError::Cancelled));
    }

    #[test]
    fn counts_the_bytes_and_characters_to_string_holds() {
        let value = serde_json::json!({"type": "object", "é": ["ünï", 1, null], "s": "a\"b\n"});
        let text = value.to_string();
        let size = JsonSize::of(&value);
        assert_eq!(size.bytes, text.len() as u64);
        assert_eq!(size.chars, text.chars().count() as u64);
        assert_eq!(JsonSize::of(&serde_json::Value::Null), JsonSize { bytes: 4, chars: 4 });
    }
}
