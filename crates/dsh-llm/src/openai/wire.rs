//! The OpenAI chat-completions wire format: the request body, and the
//! assembly of streamed chunks into [`ChatEvent`]s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{LlmError, truncate};
use crate::message::{Message, ToolCall, ToolDefinition};
use crate::model::{ChatEvent, ChatRequest, FinishReason, JsonSize, Usage};
use crate::wording;

/// How much of an offending payload an error message quotes.
pub(crate) const QUOTE_LIMIT: usize = 300;

/// How a request asks for its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Streamed as server-sent events, usage included: every request.
    Streamed,
    /// As one JSON completion: the second ask of a streamed request that
    /// was answered with no event at all, to read what the server says.
    Whole,
}

/// The JSON body of a streaming chat-completions request, as a value.
#[cfg(test)]
pub(crate) fn request_body(default_model: &str, request: &ChatRequest) -> Value {
    serde_json::to_value(WireBody::new(default_model, request)).unwrap_or(Value::Null)
}

/// The text of the body of `request` delivered as `delivery`, as it is sent.
pub(crate) fn request_text(default_model: &str, request: &ChatRequest, delivery: Delivery) -> String {
    serde_json::to_string(&WireBody::delivered(default_model, request, delivery)).unwrap_or_default()
}

/// [`request_text`] of a streamed request whose tools are `tools`, not
/// its own (`request.tools` is left out), appended to `out` (a buffer that
/// is reused): the recorder keeps a request's tools apart, shared with
/// every request that offers the same ones.
pub(crate) fn write_streamed_request_text(
    default_model: &str,
    request: &ChatRequest,
    tools: &[ToolDefinition],
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let body = WireBody::of(default_model, request, tools);
    serde_json::to_writer(out, &body).map_err(std::io::Error::from)
}

/// The bytes `request`'s body takes as it is sent to an OpenAI-compatible
/// server (counted, not built), for an estimate of its tokens.
///
/// ```
/// use dsh_llm::{ChatRequest, Message};
/// use dsh_llm::openai::{message_bytes, request_bytes};
/// let empty = request_bytes("m", &ChatRequest::new(vec![]));
/// let one = request_bytes("m", &ChatRequest::new(vec![Message::user("hi")]));
/// assert_eq!(one - empty, message_bytes(&Message::user("hi")) - 1);
/// ```
pub fn request_bytes(default_model: &str, request: &ChatRequest) -> u64 {
    JsonSize::of(&WireBody::new(default_model, request)).bytes
}

/// The bytes one more message adds to a request's body: its JSON, and the
/// comma that separates it from the message before it.
pub fn message_bytes(message: &Message) -> u64 {
    JsonSize::of(&WireMessage::from(message)).bytes + 1
}

/// The bytes `text` takes as a message's content in a request's body:
/// its JSON escaping counted, its quotes not.
pub fn content_bytes(text: &str) -> u64 {
    JsonSize::of(&text).bytes.saturating_sub(2)
}

/// The bytes a request's tool definitions take in its body.
pub fn tools_bytes(tools: &[ToolDefinition]) -> u64 {
    JsonSize::of(&tools.iter().map(WireTool::from).collect::<Vec<_>>()).bytes
}

/// A request body, borrowed from the request; the keys in the order the
/// servers have always been sent them.
#[derive(Serialize)]
struct WireBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    /// As `f64`, the number the body has always carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

impl<'a> WireBody<'a> {
    fn new(default_model: &'a str, request: &'a ChatRequest) -> Self {
        Self::of(default_model, request, &request.tools)
    }

    /// The body of `request` offering `tools` instead of its own.
    fn of(default_model: &'a str, request: &'a ChatRequest, tools: &'a [ToolDefinition]) -> Self {
        Self {
            model: request.model.as_deref().unwrap_or(default_model),
            messages: request.messages.iter().map(WireMessage::from).collect(),
            stream: true,
            stream_options: Some(StreamOptions { include_usage: true }),
            tools: tools.iter().map(WireTool::from).collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature.map(f64::from),
        }
    }

    /// The body of `request` delivered as `delivery`.
    fn delivered(default_model: &'a str, request: &'a ChatRequest, delivery: Delivery) -> Self {
        let mut body = Self::new(default_model, request);
        if delivery == Delivery::Whole {
            // `stream_options` is refused by OpenAI unless `stream` is true.
            body.stream = false;
            body.stream_options = None;
        }
        body
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message as the servers take it; `tests/openai.rs` pins each kind.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// Always a string, `""` when the model only called tools: every
        /// common server takes a string here, while some (Ollama,
        /// llama-cpp-python) reject `null` (docs/conformance.md).
        content: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::System { content } => Self::System { content },
            Message::User { content } => Self::User { content },
            Message::Assistant { content, tool_calls } => Self::Assistant {
                content,
                tool_calls: tool_calls.iter().map(WireCall::from).collect(),
            },
            Message::Tool { tool_call_id, content } => Self::Tool { tool_call_id, content },
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

impl<'a> From<&'a ToolCall> for WireCall<'a> {
    fn from(call: &'a ToolCall) -> Self {
        Self {
            id: &call.id,
            kind: FUNCTION,
            function: WireFunctionCall {
                name: &call.name,
                arguments: &call.arguments,
            },
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> From<&'a ToolDefinition> for WireTool<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        Self {
            kind: FUNCTION,
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        }
    }
}

/// The `type` of every tool and tool call.
const FUNCTION: &str = "function";

/// The server's error message in an error body: `{"error":{"message":..}}`,
/// `{"error":".."}` or `{"message":..}`; else the bounded raw body.
pub(crate) fn error_message(body: &str) -> String {
    if let Some(message) = serde_json::from_str::<Value>(body)
        .ok()
        .as_ref()
        .and_then(json_error_message)
    {
        return truncate(&message, 2 * QUOTE_LIMIT);
    }
    truncate(body.trim(), QUOTE_LIMIT)
}

fn json_error_message(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    match error {
        Value::String(text) => Some(text.clone()),
        Value::Object(map) => match map.get("message") {
            Some(Value::String(text)) => Some(text.clone()),
            _ => Some(error.to_string()).filter(|_| value.get("error").is_some()),
        },
        _ => None,
    }
}

/// The prompt tokens a whole answer's usage counted (`body`, a JSON
/// completion); `None` when it has no usage or counts zero. An error
/// object in it is returned as its message.
pub(crate) fn prompt_tokens(body: &str) -> Result<Option<u64>, LlmError> {
    let chunk: Chunk = serde_json::from_str(body).map_err(|err| LlmError::MalformedEvent {
        message: wording::chunk_not_json(&err),
        data: truncate(body, QUOTE_LIMIT),
    })?;
    if chunk.error.is_some() {
        return Err(LlmError::StreamError(error_message(body)));
    }
    Ok(chunk
        .usage
        .map(|usage| usage.prompt_tokens)
        .filter(|tokens| *tokens > 0))
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    /// A chunk's `delta`, or a whole answer's `message`: a whole answer
    /// reads as one chunk that holds all of it.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

/// The breakdown of the prompt tokens; only the cached count is read.
#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns the `data:` payloads of one streamed response (or the body of a
/// whole one) into events, assembling tool calls by `index` and emitting
/// them complete when the finish reason arrives.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    calls: BTreeMap<u32, PartialCall>,
    finished: bool,
}

impl Assembler {
    /// Whether the model reported a finish reason.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// Handles one `data:` payload (not `[DONE]`), or a whole answer's body.
    pub(crate) fn push(&mut self, data: &str) -> Result<Vec<ChatEvent>, LlmError> {
        let chunk: Chunk = serde_json::from_str(data).map_err(|err| LlmError::MalformedEvent {
            message: wording::chunk_not_json(&err),
            data: truncate(data, QUOTE_LIMIT),
        })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = json_error_message(&json!({ "error": error })).unwrap_or_default();
            return Err(LlmError::StreamError(truncate(&message, 2 * QUOTE_LIMIT)));
        }
        let mut events = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index != 0 {
                continue; // only the first choice is used (we never ask for n > 1)
            }
            let delta = choice.delta.unwrap_or_default();
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                events.push(ChatEvent::TextDelta(text));
            }
            for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let index = call.index.unwrap_or(u32::try_from(position).unwrap_or(u32::MAX));
                let partial = self.calls.entry(index).or_default();
                if partial.id.is_empty() {
                    partial.id = call.id.unwrap_or_default();
                }
                if let Some(function) = call.function {
                    if partial.name.is_empty() {
                        partial.name = function.name.unwrap_or_default();
                    }
                    if let Some(arguments) = function.arguments {
                        partial.arguments.push_str(&arguments);
                    }
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty() && !self.finished) {
                events.extend(self.flush()?);
                self.finished = true;
                events.push(ChatEvent::Finish(FinishReason::from(reason.as_str())));
            }
        }
        if let Some(usage) = chunk.usage {
            // A count the server left out stays 0 ("not reported"): the
            // agent loop estimates it (see `Usage`).
            events.push(ChatEvent::Usage(Usage {
                total_tokens: usage
                    .total_tokens
                    .unwrap_or(usage.prompt_tokens + usage.completion_tokens),
                cached_tokens: usage.prompt_tokens_details.and_then(|details| details.cached_tokens),
                ..Usage::reported(usage.prompt_tokens, usage.completion_tokens)
            }));
        }
        Ok(events)
    }

    /// Emits the tool calls assembled so far, in index order.
    fn flush(&mut self) -> Result<Vec<ChatEvent>, LlmError> {
        let mut events = Vec::with_capacity(self.calls.len());
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return Err(LlmError::MalformedEvent {
                    message: wording::tool_call_without_name(index),
                    data: truncate(&call.arguments, QUOTE_LIMIT),
                });
            }
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            // Some servers send no argument text at all for argument-less tools.
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                call.arguments
            };
            events.push(ChatEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments,
            }));
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolDefinition;

    /// The recorder writes a request from its parts: the same bytes as
    /// the request sent whole.
    #[test]
    fn a_request_written_with_its_tools_apart_is_the_same_text() {
        let tools = vec![
            ToolDefinition::new(
                "t",
                "a \"tool\"",
                json!({"type": "object", "properties": {"x": {"type": "number"}}}),
            ),
            ToolDefinition::new("u", "another", json!({"type": "object"})),
        ];
        let messages = vec![
            Message::system("s"),
            Message::user("u\n"),
            Message::assistant_with_tool_calls("", vec![ToolCall::new("c1", "t", "{}")]),
            Message::tool("c1", "r"),
        ];
        let whole = [
            ChatRequest::new(messages.clone()).with_tools(tools.clone()),
            ChatRequest::new(messages.clone())
                .with_tools(tools.clone())
                .with_model("other")
                .with_max_tokens(7),
            ChatRequest {
                temperature: Some(0.3),
                ..ChatRequest::new(messages)
            },
        ];
        for request in whole {
            let apart = ChatRequest {
                tools: Vec::new(),
                ..request.clone()
            };
            let mut out = b"kept".to_vec();
            write_streamed_request_text("m", &apart, &request.tools, &mut out).unwrap();
            let text = request_text("m", &request, Delivery::Streamed);
            assert_eq!(out, [b"kept".as_slice(), text.as_bytes()].concat());
        }
    }

    #[test]
    fn body_has_openai_shape() {
        let request = ChatRequest::new(vec![
            Message::system("s"),
            Message::user("u"),
            Message::assistant_with_tool_calls("", vec![ToolCall::new("c1", "t", "{}")]),
            Message::tool("c1", "r"),
        ])
        .with_tools(vec![ToolDefinition::new("t", "a tool", json!({"type": "object"}))])
        .with_max_tokens(7);
        let body = request_body("m", &request);
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 7);
        assert_eq!(body["messages"][2]["content"], "");
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["name"], "t");
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert!(request_body("m", &ChatRequest::new(vec![])).get("tools").is_none());
    }

    /// A request with every kind of message and field, and text that JSON escapes.
    fn rich_request() -> ChatRequest {
        let mut request = ChatRequest::new(vec![
            Message::system("be \"brief\"\n\tnow"),
            Message::user("héllo \u{1} \\ wörld"),
            Message::assistant_with_tool_calls(
                "",
                vec![
                    ToolCall::new("c1", "t", r#"{"x": "a\nb"}"#),
                    ToolCall::new("c2", "u", "{}"),
                ],
            ),
            Message::tool("c1", "line 1\nline \"2\""),
            Message::tool("c2", ""),
            Message::assistant("done"),
        ])
        .with_tools(vec![
            ToolDefinition::new(
                "t",
                "a \"tool\"",
                json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            ),
            ToolDefinition::new("u", "another", json!({"type": "object"})),
        ])
        .with_max_tokens(7);
        request.temperature = Some(0.2);
        request
    }

    /// The body as it was built before the borrowed wire types: a JSON
    /// value, key by key. The text sent must not change.
    fn built_by_hand(default_model: &str, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| match message {
                Message::System { content } => json!({"role": "system", "content": content}),
                Message::User { content } => json!({"role": "user", "content": content}),
                Message::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                    json!({"role": "assistant", "content": content})
                }
                Message::Assistant { content, tool_calls } => {
                    let calls: Vec<Value> = tool_calls
                        .iter()
                        .map(|call| json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}))
                        .collect();
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
                Message::Tool { tool_call_id, content } => {
                    json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
                }
            })
            .collect();
        let mut body = json!({
            "model": request.model.as_deref().unwrap_or(default_model),
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        let map = body.as_object_mut().unwrap();
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| json!({"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters}}))
                .collect();
            map.insert("tools".into(), Value::Array(tools));
        }
        if let Some(max_tokens) = request.max_tokens {
            map.insert("max_tokens".into(), json!(max_tokens));
        }
        if let Some(temperature) = request.temperature {
            map.insert("temperature".into(), json!(temperature));
        }
        body
    }

    #[test]
    fn the_body_sent_is_the_one_always_sent() {
        for request in [
            rich_request(),
            ChatRequest::new(vec![]),
            ChatRequest::new(vec![Message::user("x")]),
        ] {
            assert_eq!(
                request_text("m", &request, Delivery::Streamed),
                built_by_hand("m", &request).to_string()
            );
            assert_eq!(request_body("m", &request), built_by_hand("m", &request));
        }
    }

    #[test]
    fn a_whole_answer_is_asked_without_streaming_or_stream_options() {
        let request = rich_request();
        let whole: Value = serde_json::from_str(&request_text("m", &request, Delivery::Whole)).unwrap();
        let mut streamed = request_body("m", &request);
        streamed["stream"] = json!(false);
        streamed.as_object_mut().unwrap().remove("stream_options");
        assert_eq!(whole, streamed);
    }

    #[test]
    fn a_whole_answer_reads_as_one_chunk() {
        // llama-cpp-python's non-streamed completion, with a tool call.
        let body = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Looking.","tool_calls":[{"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{\"key\":\"x\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#;
        let mut asm = Assembler::default();
        assert_eq!(
            asm.push(body).unwrap(),
            vec![
                ChatEvent::TextDelta("Looking.".into()),
                ChatEvent::ToolCall(ToolCall::new("call_a", "lookup", r#"{"key":"x"}"#)),
                ChatEvent::Finish(FinishReason::ToolCalls),
                ChatEvent::Usage(Usage::reported(12, 5)),
            ]
        );
        assert!(asm.finished());
    }

    #[test]
    fn sizes_count_the_body_exactly() {
        let request = rich_request();
        let text = request_text("m", &request, Delivery::Streamed);
        assert_eq!(request_bytes("m", &request), text.len() as u64);
        // The body is its envelope plus each message (with its separator).
        let mut envelope = request.clone();
        envelope.messages.clear();
        let messages: u64 = request.messages.iter().map(message_bytes).sum();
        assert_eq!(request_bytes("m", &envelope) + messages - 1, text.len() as u64);
        // A message's content takes its escaped text.
        let tool = Message::tool("c1", "line 1\nline \"2\"");
        let empty = Message::tool("c1", "");
        assert_eq!(
            message_bytes(&tool) - message_bytes(&empty),
            content_bytes("line 1\nline \"2\"")
        );
        assert_eq!(content_bytes("line 1\nline \"2\""), 18);
        // And the tools take what their array takes in it.
        let mut bare = envelope.clone();
        bare.tools.clear();
        assert_eq!(
            request_bytes("m", &envelope) - request_bytes("m", &bare),
            tools_bytes(&request.tools) + r#","tools":"#.len() as u64
        );
    }

    #[test]
    fn error_messages_are_extracted_or_bounded() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_message(r#"{"error":"nope"}"#), "nope");
        assert_eq!(error_message(r#"{"message":"plain"}"#), "plain");
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
        assert!(error_message(&"x".repeat(5000)).len() < QUOTE_LIMIT + 10);
    }

    #[test]
    fn assembles_interleaved_tool_calls() {
        let mut asm = Assembler::default();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]}}]}"#,
        ];
        for chunk in chunks {
            assert_eq!(asm.push(chunk).unwrap(), vec![]);
        }
        let events = asm
            .push(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#)
            .unwrap();
        assert_eq!(
            events,
            vec![
                ChatEvent::ToolCall(ToolCall::new("a", "f", "{}")),
                ChatEvent::ToolCall(ToolCall::new("b", "g", r#"{"x":1}"#)),
                ChatEvent::Finish(FinishReason::ToolCalls),
            ]
        );
        assert!(asm.finished());
    }

    #[test]
    fn malformed_chunks_are_named() {
        let mut asm = Assembler::default();
        let err = asm.push("{not json").unwrap_err();
        assert!(err.to_string().contains("malformed stream event"), "{err}");
        assert!(err.to_string().contains("{not json"), "{err}");
        let err = asm.push(r#"{"choices":"nope"}"#).unwrap_err();
        assert!(err.to_string().contains("choices"), "{err}");
        let err = asm.push(r#"{"error":{"message":"overloaded"}}"#).unwrap_err();
        assert_eq!(err, LlmError::StreamError("overloaded".into()));
        let mut asm = Assembler::default();
        asm.push(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#)
            .unwrap();
        assert!(asm.flush().unwrap_err().to_string().contains("no function name"));
        let mut asm = Assembler::default();
        asm.push(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"now"}}]}}]}"#)
            .unwrap();
        assert_eq!(
            asm.flush().unwrap(),
            vec![ChatEvent::ToolCall(ToolCall::new("call_0", "now", "{}"))]
        );
    }

    #[test]
    fn tolerates_nulls_and_usage_only_chunks() {
        let mut asm = Assembler::default();
        let events = asm
            .push(r#"{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":null},"finish_reason":null}],"usage":null}"#)
            .unwrap();
        assert_eq!(events, vec![ChatEvent::TextDelta("hi".into())]);
        let events = asm
            .push(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#)
            .unwrap();
        assert_eq!(events, vec![ChatEvent::Usage(Usage::reported(3, 4))]);
    }

    #[test]
    fn the_cached_prompt_tokens_are_read_where_the_server_reports_them() {
        let mut asm = Assembler::default();
        let events = asm
            .push(r#"{"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":800,"audio_tokens":0}}}"#)
            .unwrap();
        assert_eq!(
            events,
            vec![ChatEvent::Usage(Usage::reported(1000, 4).with_cached(800))]
        );
        for details in [r#""prompt_tokens_details":null"#, r#""prompt_tokens_details":{}"#] {
            let events = asm
                .push(&format!(
                    r#"{{"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":4,{details}}}}}"#
                ))
                .unwrap();
            assert_eq!(events, vec![ChatEvent::Usage(Usage::reported(3, 4))], "{details}");
        }
    }
}
