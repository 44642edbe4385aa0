//! The OpenAI-compatible client against a raw HTTP/1.1 server on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_llm::{
    CancellationToken, ChatEvent, ChatModel, ChatRequest, FinishReason, LlmError, Message, OpenAiChatModel,
    OpenAiConfig, StreamCut, ToolCall, ToolDefinition, Usage, collect_response, complete,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Generous bound for things that should happen at once.
const SOON: Duration = Duration::from_secs(10);

/// What the server does for one request.
enum Reply {
    /// 200 with these SSE pieces, each written as one HTTP chunk; then a
    /// clean end of the chunked body, or (when `abort`) an abrupt close.
    Sse { pieces: Vec<String>, abort: bool },
    /// A plain response.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// 200, these pieces, then wait until the client closes the connection
    /// and report whether it did (within [`SOON`]).
    Hold {
        pieces: Vec<String>,
        closed: oneshot::Sender<bool>,
    },
    /// Accept and read the request, never answer.
    Silent,
    /// 200, then `pings` comments (`: ping`), one every `every`, then these
    /// pieces: a server that evaluates a long prompt.
    Pinged {
        pings: usize,
        every: Duration,
        pieces: Vec<String>,
    },
}

#[derive(Debug, Clone)]
struct Captured {
    head: String,
    body: Value,
}

struct Server {
    base_url: String,
    requests: Arc<Mutex<Vec<Captured>>>,
}

impl Server {
    /// Serves `replies` in order (one connection per request).
    async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        tokio::spawn(async move {
            for reply in replies {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let Some(captured) = read_request(&mut socket).await else {
                    return;
                };
                seen.lock().unwrap().push(captured);
                tokio::spawn(respond(socket, reply));
            }
        });
        Server { base_url, requests }
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new()
            .with_base_url(&self.base_url)
            .with_api_key("sk-test")
            .with_model("test-model")
            .with_retry_base_delay(Duration::from_millis(1))
            .with_request_timeout(SOON)
            .with_idle_timeout(SOON)
    }

    fn model(&self) -> OpenAiChatModel {
        OpenAiChatModel::new(self.config()).unwrap()
    }

    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Captured> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
    Some(Captured { head, body })
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

async fn write_chunk(socket: &mut TcpStream, piece: &str) -> std::io::Result<()> {
    socket
        .write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
        .await?;
    socket.flush().await
}

async fn respond(mut socket: TcpStream, reply: Reply) {
    match reply {
        Reply::Sse { pieces, abort } => {
            let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
            for piece in pieces {
                let _ = write_chunk(&mut socket, &piece).await;
            }
            if !abort {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
        Reply::Status { status, headers, body } => {
            let mut text = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str("\r\n");
            text.push_str(&body);
            let _ = socket.write_all(text.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Hold { pieces, closed } => {
            let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
            for piece in pieces {
                let _ = write_chunk(&mut socket, &piece).await;
            }
            let mut byte = [0u8; 1];
            let saw_close = matches!(
                tokio::time::timeout(SOON, socket.read(&mut byte)).await,
                Ok(Ok(0) | Err(_))
            );
            let _ = closed.send(saw_close);
        }
        Reply::Silent => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Reply::Pinged { pings, every, pieces } => {
            let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
            for _ in 0..pings {
                tokio::time::sleep(every).await;
                let _ = write_chunk(&mut socket, ": ping\n\n").await;
            }
            for piece in pieces {
                let _ = write_chunk(&mut socket, &piece).await;
            }
            let _ = socket.write_all(b"0\r\n\r\n").await;
            let _ = socket.shutdown().await;
        }
    }
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn text_chunk(text: &str) -> String {
    data(
        json!({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}], "usage": null}),
    )
}

fn finish_chunk(reason: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    data(
        json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}),
    )
}

fn tool_delta(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}))
}

const DONE: &str = "data: [DONE]\n\n";

fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hi")])
}

async fn run(model: &OpenAiChatModel) -> Result<dsh_llm::ChatResponse, LlmError> {
    tokio::time::timeout(SOON, complete(model, request(), &CancellationToken::new()))
        .await
        .expect("call hung")
}

#[tokio::test]
async fn streams_text_usage_and_finish() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![
            ": keep-alive comment\n\n".into(),
            text_chunk("Hel"),
            // CRLF line endings, and one event split across two HTTP chunks.
            text_chunk("lo").replace('\n', "\r\n"),
            "data: {\"choices\":[{\"index\":0,".into(),
            "\"delta\":{\"content\":\", world\"}}]}\n\n".into(),
            // A multi-line event: data lines are joined with a newline.
            "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"!\"}}]}\n\n".into(),
            finish_chunk("stop"),
            usage_chunk(12, 4),
            DONE.into(),
        ],
        abort: false,
    }])
    .await;
    let model = server.model();
    let mut stream = model.stream_chat(request(), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(SOON, stream.next()).await.unwrap() {
        events.push(event.unwrap());
    }
    assert_eq!(
        events,
        vec![
            ChatEvent::TextDelta("Hel".into()),
            ChatEvent::TextDelta("lo".into()),
            ChatEvent::TextDelta(", world".into()),
            ChatEvent::TextDelta("!".into()),
            ChatEvent::Finish(FinishReason::Stop),
            ChatEvent::Usage(Usage::reported(12, 4)),
        ]
    );
}

#[tokio::test]
async fn assembles_interleaved_tool_calls_split_across_chunks() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![
            text_chunk("Let me look."),
            tool_delta(0, Some("call_a"), Some("read_file"), ""),
            tool_delta(1, Some("call_b"), Some("grep"), "{\"pat"),
            tool_delta(0, None, None, "{\"pa"),
            tool_delta(1, None, None, "tern\": \"fn \\\"main\\\"\"}"),
            tool_delta(0, None, None, "th\": \"READ"),
            tool_delta(0, None, None, "ME.md\"}"),
            finish_chunk("tool_calls"),
            usage_chunk(30, 20),
            DONE.into(),
        ],
        abort: false,
    }])
    .await;
    let response = run(&server.model()).await.unwrap();
    assert_eq!(response.text, "Let me look.");
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall::new("call_a", "read_file", r#"{"path": "README.md"}"#),
            ToolCall::new("call_b", "grep", r#"{"pattern": "fn \"main\""}"#),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Some(Usage::reported(30, 20)));
    for call in &response.tool_calls {
        serde_json::from_str::<Value>(&call.arguments).unwrap();
    }
}

#[tokio::test]
async fn sends_model_messages_tools_and_stream_flag() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![finish_chunk("stop"), DONE.into()],
        abort: false,
    }])
    .await;
    let request = ChatRequest::new(vec![
        Message::system("sys"),
        Message::user("do it"),
        Message::assistant_with_tool_calls("", vec![ToolCall::new("c1", "read_file", r#"{"path":"a"}"#)]),
        Message::tool("c1", "file text"),
    ])
    .with_tools(vec![ToolDefinition::new(
        "read_file",
        "Reads a file",
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    )])
    .with_max_tokens(100);
    let response = complete(&server.model(), request, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.text, "");
    let captured = server.requests.lock().unwrap()[0].clone();
    assert!(
        captured.head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{}",
        captured.head
    );
    assert!(
        captured
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-test"),
        "{}",
        captured.head
    );
    let body = captured.body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 100);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        ])
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["path"]["type"],
        "string"
    );
}

/// The JSON of every message kind exactly as it goes on the wire. A
/// tool-call-only assistant message carries `"content": ""`, never `null`:
/// every common server takes a string, and some reject `null`
/// (docs/conformance.md).
#[tokio::test]
async fn the_wire_shape_of_every_message_kind() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![finish_chunk("stop"), DONE.into()],
        abort: false,
    }])
    .await;
    let request = ChatRequest::new(vec![
        Message::system("You are the parent."),
        Message::user("Summarize the README."),
        Message::assistant("I will delegate that."),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new(
                "call_1",
                "subagent",
                r#"{"description":"read","prompt":"Read README.md"}"#,
            )],
        ),
        Message::tool("call_1", "The README describes dsh."),
        Message::assistant_with_tool_calls(
            "Reading two files.",
            vec![
                ToolCall::new("call_2", "read_file", r#"{"path":"a.md"}"#),
                ToolCall::new("call_3", "read_file", r#"{"path":"b.md"}"#),
            ],
        ),
        Message::tool("call_2", ""),
        Message::tool("call_3", "b"),
    ]);
    complete(&server.model(), request, &CancellationToken::new())
        .await
        .unwrap();
    let body = server.requests.lock().unwrap()[0].body.clone();
    insta::assert_json_snapshot!(body["messages"]);
}

#[tokio::test]
async fn request_model_overrides_the_default() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![finish_chunk("stop"), DONE.into()],
        abort: false,
    }])
    .await;
    let model = server.model();
    assert_eq!(model.model_name(), "test-model");
    complete(&model, request().with_model("other"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(server.requests.lock().unwrap()[0].body["model"], "other");
}

#[tokio::test]
async fn retries_429_then_succeeds() {
    let server = Server::start(vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after", "0".into())],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        },
        Reply::Sse {
            pieces: vec![text_chunk("ok"), finish_chunk("stop"), DONE.into()],
            abort: false,
        },
    ])
    .await;
    let response = run(&server.model()).await.unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn gives_up_after_max_retries_on_5xx() {
    let busy = || Reply::Status {
        status: 503,
        headers: vec![],
        body: "upstream overloaded".into(),
    };
    let server = Server::start(vec![busy(), busy(), busy(), busy()]).await;
    let model = OpenAiChatModel::new(server.config().with_max_retries(2)).unwrap();
    let err = run(&model).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 503, .. }), "{err:?}");
    assert!(err.to_string().contains("upstream overloaded"), "{err}");
    assert_eq!(server.count(), 3);
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_shows_the_server_message() {
    let server = Server::start(vec![Reply::Status {
        status: 401,
        headers: vec![("content-type", "application/json".into())],
        body: r#"{"error":{"message":"Authentication Fails, Your api key: ****abcd is invalid","type":"authentication_error"}}"#.into(),
    }])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("401"), "{text}");
    assert!(text.contains("Your api key: ****abcd is invalid"), "{text}");
    assert!(text.contains("DSH_API_KEY"), "{text}");
    assert_eq!(server.count(), 1);
}

/// A 4xx other than 408, 409 and 429 is the server rejecting this very
/// request: it is sent once, and the error says so on one line.
#[tokio::test]
async fn a_rejected_request_is_not_retried_and_says_so() {
    // What llama-cpp-python and vLLM answer for a body they cannot validate.
    let validation =
        "1 validation error for ChatCompletionRequest\nmessages.2.content\n  Input should be a valid string";
    for status in [400, 404, 413, 422] {
        let ok = Reply::Sse {
            pieces: vec![text_chunk("never read"), finish_chunk("stop"), DONE.into()],
            abort: false,
        };
        let rejected = Reply::Status {
            status,
            headers: vec![("content-type", "application/json".into())],
            body: json!({"error": {"message": validation, "type": "invalid_request_error"}}).to_string(),
        };
        let server = Server::start(vec![rejected, ok]).await;
        let err = run(&server.model()).await.unwrap_err();
        assert_eq!(server.count(), 1, "HTTP {status} was retried");
        assert!(!err.is_retryable(), "{err:?}");
        let text = err.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.starts_with(&format!("HTTP {status} from ")), "{text}");
        assert!(
            text.contains(
                "1 validation error for ChatCompletionRequest messages.2.content Input should be a valid string"
            ),
            "{text}"
        );
        let rejection = if status == 404 {
            "; the server refused the request, so it was not retried"
        } else {
            "; the server rejected the request as malformed, so it was not retried"
        };
        assert!(text.ends_with(rejection), "{text}");
    }
}

/// 408, 409 and 429 are retried, like 5xx: the same request may succeed later.
#[tokio::test]
async fn request_timeout_conflict_and_rate_limit_are_retried() {
    for status in [408, 409, 429] {
        let server = Server::start(vec![
            Reply::Status {
                status,
                headers: vec![("retry-after", "0".into())],
                body: r#"{"error":{"message":"try again"}}"#.into(),
            },
            Reply::Sse {
                pieces: vec![text_chunk("ok"), finish_chunk("stop"), DONE.into()],
                abort: false,
            },
        ])
        .await;
        let response = run(&server.model()).await.unwrap();
        assert_eq!(response.text, "ok", "HTTP {status}");
        assert_eq!(server.count(), 2, "HTTP {status}");
    }
}

#[tokio::test]
async fn bad_request_shows_the_server_message_or_bounded_body() {
    let server = Server::start(vec![
        Reply::Status {
            status: 400,
            headers: vec![],
            body: r#"{"error":{"message":"Invalid 'messages[1].role': unknown role"}}"#.into(),
        },
        Reply::Status {
            status: 400,
            headers: vec![],
            body: format!("<html>{}</html>", "x".repeat(10_000)),
        },
    ])
    .await;
    let model = server.model();
    let err = run(&model).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{err:?}");
    assert!(
        err.to_string().contains("Invalid 'messages[1].role': unknown role"),
        "{err}"
    );
    let err = run(&model).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 400"), "{err}");
    assert!(err.to_string().contains("<html>xxx"), "{err}");
    assert!(err.to_string().len() < 600, "{err}");
    assert_eq!(server.count(), 2);
}

/// OpenAI's (and llama-cpp-python's) refusal of a request over the window.
const OPENAI_REFUSAL: &str = r#"{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

/// llama.cpp's server's.
const LLAMA_CPP_REFUSAL: &str = r#"{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}"#;

#[tokio::test]
async fn a_refusal_for_length_is_typed_with_its_window_and_not_retried() {
    let refusal = |body: &str| Reply::Status {
        status: 400,
        headers: vec![],
        body: body.to_owned(),
    };
    let server = Server::start(vec![refusal(OPENAI_REFUSAL), refusal(LLAMA_CPP_REFUSAL)]).await;
    let model = server.model();
    let err = run(&model).await.unwrap_err();
    let LlmError::ContextLength { refusal, .. } = &err else {
        panic!("not a refusal for length: {err:?}");
    };
    assert_eq!(
        (refusal.status, refusal.window, refusal.prompt_tokens),
        (Some(400), Some(4097), Some(4294))
    );
    assert!(!err.is_retryable());
    insta::assert_snapshot!(
        "context_length_refusal",
        err.to_string().replace(&server.base_url, "http://127.0.0.1:PORT/v1")
    );
    let err = run(&model).await.unwrap_err();
    let LlmError::ContextLength { refusal, .. } = &err else {
        panic!("not a refusal for length: {err:?}");
    };
    assert_eq!((refusal.window, refusal.prompt_tokens), (Some(8192), Some(13392)));
    assert_eq!(server.count(), 2, "each refusal was sent once");
}

#[tokio::test]
async fn a_refusal_for_length_in_the_stream_is_typed_too() {
    let server = Server::start(vec![
        Reply::Sse {
            pieces: vec![data(serde_json::from_str(LLAMA_CPP_REFUSAL).unwrap())],
            abort: false,
        },
        Reply::Sse {
            pieces: vec![format!("event: error\ndata: {OPENAI_REFUSAL}\n\n")],
            abort: false,
        },
    ])
    .await;
    let model = server.model();
    let err = run(&model).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ContextLength { refusal, .. } if refusal.status.is_none() && refusal.window == Some(8192)),
        "{err:?}"
    );
    let err = run(&model).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ContextLength { refusal, .. } if refusal.window == Some(4097)),
        "{err:?}"
    );
}

#[tokio::test]
async fn malformed_json_in_the_stream_is_an_error() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![
            text_chunk("ok"),
            "data: {\"choices\": [oops\n\n".into(),
            finish_chunk("stop"),
            DONE.into(),
        ],
        abort: false,
    }])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    assert!(matches!(err, LlmError::MalformedEvent { .. }), "{err:?}");
    assert!(err.to_string().contains("{\"choices\": [oops"), "{err}");
}

#[tokio::test]
async fn error_object_in_the_stream_is_an_error() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![
            text_chunk("ok"),
            data(json!({"error": {"message": "model overloaded"}})),
        ],
        abort: false,
    }])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    assert_eq!(err, LlmError::StreamError("model overloaded".into()));
}

#[tokio::test]
async fn abrupt_close_mid_stream_is_a_cut_with_its_partial_text() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![text_chunk("partial")],
        abort: true,
    }])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::StreamEnded { cut: StreamCut::Broken(_), attempts: 1, partial } if partial == "partial"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("stream ended before the model finished"),
        "{err}"
    );
    assert_eq!(server.count(), 1, "nothing is retried once text reached the consumer");
}

/// The first chunk llama-cpp-python streams: the role, no text.
fn role_chunk() -> String {
    data(json!({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]}))
}

/// A stream that is cut as `pieces` end, the way llama-cpp-python ends a
/// stream when another request arrives: `[DONE]`, no finish reason.
fn cut_by_done(pieces: &[String]) -> Reply {
    let mut pieces = pieces.to_vec();
    pieces.push(DONE.into());
    Reply::Sse { pieces, abort: false }
}

/// A whole stream saying `text`.
fn answer(text: &str) -> Reply {
    Reply::Sse {
        pieces: vec![role_chunk(), text_chunk(text), finish_chunk("stop"), DONE.into()],
        abort: false,
    }
}

#[tokio::test]
async fn done_without_a_finish_reason_after_text_is_a_cut_never_an_answer() {
    let server = Server::start(vec![cut_by_done(&[role_chunk(), text_chunk("Hel"), text_chunk("lo")])]).await;
    let err = run(&server.model()).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::StreamEnded {
            cut: StreamCut::Done,
            attempts: 1,
            partial: "Hello".into()
        }
    );
    assert_eq!(server.count(), 1, "text reached the consumer: not sent again");
}

#[tokio::test]
async fn close_without_a_finish_reason_after_text_is_a_cut_never_an_answer() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![role_chunk(), text_chunk("partial")],
        abort: false,
    }])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::StreamEnded {
            cut: StreamCut::Closed,
            attempts: 1,
            partial: "partial".into()
        }
    );
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn done_without_tool_calls_finished_emits_no_tool_call() {
    let server = Server::start(vec![cut_by_done(&[
        text_chunk("Looking."),
        tool_delta(0, Some("call_a"), Some("lookup"), "{\"ke"),
    ])])
    .await;
    let model = server.model();
    let mut stream = model.stream_chat(request(), CancellationToken::new());
    let mut items = Vec::new();
    while let Some(item) = tokio::time::timeout(SOON, stream.next()).await.unwrap() {
        items.push(item);
    }
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0], Ok(ChatEvent::TextDelta("Looking.".into())));
    assert!(
        matches!(
            &items[1],
            Err(LlmError::StreamEnded {
                cut: StreamCut::Done,
                ..
            })
        ),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_cut_before_anything_reached_the_consumer_is_sent_again() {
    // Cut after the role chunk by [DONE], then by a clean close: nothing
    // reached the consumer, so the client asks again, then gets its answer.
    let server = Server::start(vec![
        cut_by_done(&[role_chunk()]),
        Reply::Sse {
            pieces: vec![role_chunk()],
            abort: false,
        },
        answer("whole"),
    ])
    .await;
    let response = run(&server.model()).await.unwrap();
    assert_eq!(
        (response.text.as_str(), response.finish_reason),
        ("whole", FinishReason::Stop)
    );
    assert_eq!(server.count(), 3);
    let requests = server.requests.lock().unwrap();
    assert!(requests.iter().all(|request| request.body["stream"] == true));
}

#[tokio::test]
async fn a_cut_that_persists_fails_once_the_retries_are_spent() {
    let server = Server::start(vec![
        cut_by_done(&[role_chunk()]),
        cut_by_done(&[role_chunk()]),
        cut_by_done(&[role_chunk()]),
        answer("too late"),
    ])
    .await;
    let model = OpenAiChatModel::new(server.config().with_max_retries(2)).unwrap();
    let err = run(&model).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::StreamEnded {
            cut: StreamCut::Done,
            attempts: 3,
            partial: String::new()
        }
    );
    assert_eq!(server.count(), 3, "max_retries 2: three sends");
    // The retries are shared with the ones an error status makes.
    let server = Server::start(vec![
        Reply::Status {
            status: 503,
            headers: vec![],
            body: "busy".into(),
        },
        cut_by_done(&[role_chunk()]),
        answer("too late"),
    ])
    .await;
    let model = OpenAiChatModel::new(server.config().with_max_retries(1)).unwrap();
    let err = run(&model).await.unwrap_err();
    assert!(matches!(err, LlmError::StreamEnded { attempts: 2, .. }), "{err:?}");
    assert_eq!(server.count(), 2);
}

/// llama-cpp-python's refusal of a request over its window, which it sends
/// only to a request that is not streamed.
const LLAMA_CPP_PYTHON_REFUSAL: &str = r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5180 tokens (4156 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

#[tokio::test]
async fn an_empty_200_is_asked_again_without_streaming_and_its_refusal_read() {
    let server = Server::start(vec![
        Reply::Sse {
            pieces: vec![],
            abort: false,
        },
        Reply::Status {
            status: 400,
            headers: vec![],
            body: LLAMA_CPP_PYTHON_REFUSAL.into(),
        },
    ])
    .await;
    let err = run(&server.model()).await.unwrap_err();
    let LlmError::ContextLength { refusal, .. } = &err else {
        panic!("not a refusal for length: {err:?}");
    };
    assert_eq!(
        (refusal.status, refusal.window, refusal.prompt_tokens),
        (Some(400), Some(4096), Some(4156))
    );
    let requests = server.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[1].body["stream"], false);
    assert!(requests[1].body.get("stream_options").is_none());
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
    // Each asks for what it says it wants: a stream, then one JSON answer.
    assert_eq!(accept(&requests[0]), "text/event-stream", "{}", requests[0].head);
    assert_eq!(accept(&requests[1]), "application/json", "{}", requests[1].head);
}

/// The `Accept` header a request was sent with.
fn accept(request: &Captured) -> String {
    request
        .head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("accept").then(|| value.trim().to_owned())
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_empty_200_answered_whole_becomes_the_same_events() {
    let completion = json!({"id": "c", "object": "chat.completion", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "Here.", "tool_calls": [{"id": "call_a", "type": "function",
        "function": {"name": "lookup", "arguments": "{\"key\":\"x\"}"}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}});
    let server = Server::start(vec![
        // [DONE] alone carries no event either.
        cut_by_done(&[]),
        Reply::Status {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: completion.to_string(),
        },
    ])
    .await;
    let model = server.model();
    let mut stream = model.stream_chat(request(), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(SOON, stream.next()).await.unwrap() {
        events.push(event.unwrap());
    }
    assert_eq!(
        events,
        vec![
            ChatEvent::TextDelta("Here.".into()),
            ChatEvent::ToolCall(ToolCall::new("call_a", "lookup", r#"{"key":"x"}"#)),
            ChatEvent::Finish(FinishReason::ToolCalls),
            ChatEvent::Usage(Usage::reported(9, 3)),
        ]
    );
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn an_empty_200_is_asked_whole_only_once() {
    // The whole answer has no finish reason either: a cut, not an answer,
    // and the whole ask is not repeated.
    let whole = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "half"}}]});
    let server = Server::start(vec![
        Reply::Sse {
            pieces: vec![],
            abort: true,
        },
        Reply::Status {
            status: 200,
            headers: vec![],
            body: whole.to_string(),
        },
    ])
    .await;
    let model = OpenAiChatModel::new(server.config().with_max_retries(0)).unwrap();
    let err = run(&model).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::StreamEnded { cut: StreamCut::Closed, attempts: 2, partial } if partial.is_empty()),
        "{err:?}"
    );
    assert_eq!(server.count(), 2);
}

#[test]
fn a_cut_reads_the_same_way_each_time() {
    let cut = |cut, attempts, partial: &str| {
        LlmError::StreamEnded {
            cut,
            attempts,
            partial: partial.into(),
        }
        .to_string()
    };
    let lines = [
        cut(StreamCut::Done, 4, "Hello"),
        cut(StreamCut::Closed, 1, ""),
        cut(
            StreamCut::Broken("error decoding response body: connection reset".into()),
            2,
            "",
        ),
        cut(StreamCut::Closed, 0, "a"),
    ];
    insta::assert_snapshot!("stream_cut_lines", lines.join("\n"));
}

#[tokio::test]
async fn finish_reason_without_done_is_accepted() {
    let server = Server::start(vec![Reply::Sse {
        pieces: vec![text_chunk("a"), finish_chunk("length")],
        abort: false,
    }])
    .await;
    let response = run(&server.model()).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::Length);
}

#[tokio::test]
async fn cancellation_mid_stream_closes_the_connection() {
    let (closed_tx, closed_rx) = oneshot::channel();
    let server = Server::start(vec![Reply::Hold {
        pieces: vec![text_chunk("first")],
        closed: closed_tx,
    }])
    .await;
    let model: Arc<dyn ChatModel> = Arc::new(server.model());
    let cancel = CancellationToken::new();
    let mut stream = model.stream_chat(request(), cancel.clone());
    let first = tokio::time::timeout(SOON, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, ChatEvent::TextDelta("first".into()));
    cancel.cancel();
    let next = tokio::time::timeout(SOON, stream.next()).await.unwrap();
    assert_eq!(next, Some(Err(LlmError::Cancelled)));
    // The stream dropped the response already; the server must see the close.
    assert!(
        tokio::time::timeout(SOON, closed_rx).await.unwrap().unwrap(),
        "server did not see the connection close"
    );
    assert_eq!(tokio::time::timeout(SOON, stream.next()).await.unwrap(), None);
}

#[tokio::test]
async fn collect_returns_cancelled_while_waiting_for_headers() {
    let server = Server::start(vec![Reply::Silent]).await;
    let model = server.model();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        trigger.cancel();
    });
    let result = tokio::time::timeout(
        SOON,
        collect_response(model.stream_chat(request(), cancel.clone()), &cancel),
    )
    .await
    .unwrap();
    assert_eq!(result.unwrap_err(), LlmError::Cancelled);
}

#[tokio::test]
async fn header_timeout_is_reported() {
    let server = Server::start(vec![Reply::Silent]).await;
    let model = OpenAiChatModel::new(
        server
            .config()
            .with_request_timeout(Duration::from_millis(200))
            .with_max_retries(0),
    )
    .unwrap();
    let err = run(&model).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("response headers"), "{err}");
}

#[tokio::test]
async fn idle_timeout_between_chunks_is_reported() {
    let (closed_tx, _closed_rx) = oneshot::channel();
    let server = Server::start(vec![Reply::Hold {
        pieces: vec![text_chunk("first")],
        closed: closed_tx,
    }])
    .await;
    let model = OpenAiChatModel::new(server.config().with_idle_timeout(Duration::from_millis(200))).unwrap();
    let err = run(&model).await.unwrap_err();
    assert!(err.to_string().contains("next chunk"), "{err}");
}

#[tokio::test]
async fn pings_keep_a_slow_stream_alive_past_the_idle_timeout() {
    // llama-cpp-python sends `: ping` every 15 s while it evaluates a long
    // prompt: no event, but the server is alive. Here six pings 100 ms
    // apart outlast an idle timeout of 300 ms, then the answer comes.
    let server = Server::start(vec![Reply::Pinged {
        pings: 6,
        every: Duration::from_millis(100),
        pieces: vec![text_chunk("late"), finish_chunk("stop"), DONE.into()],
    }])
    .await;
    let model = OpenAiChatModel::new(server.config().with_idle_timeout(Duration::from_millis(300))).unwrap();
    let response = run(&model).await.unwrap();
    assert_eq!(response.text, "late");
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let config = OpenAiConfig::new()
        .with_base_url(format!("http://{addr}"))
        .with_max_retries(1)
        .with_retry_base_delay(Duration::from_millis(1));
    let err = run(&OpenAiChatModel::new(config).unwrap()).await.unwrap_err();
    assert!(matches!(err, LlmError::Connection { .. }), "{err:?}");
    assert!(err.to_string().contains("could not reach"), "{err}");
}

#[test]
fn bad_base_urls_are_config_errors() {
    let err = OpenAiChatModel::new(OpenAiConfig::new().with_base_url("not a url")).unwrap_err();
    assert!(matches!(err, LlmError::Config(_)), "{err:?}");
    let err = OpenAiChatModel::new(OpenAiConfig::new().with_base_url("ftp://example.com")).unwrap_err();
    assert!(err.to_string().contains("http"), "{err}");
    let model = OpenAiChatModel::new(OpenAiConfig::new().with_base_url("http://127.0.0.1:9/v1/")).unwrap();
    assert_eq!(model.url(), "http://127.0.0.1:9/v1/chat/completions");
    assert_eq!(model.model_name(), "deepseek-chat");
}

#[tokio::test]
async fn a_count_is_asked_whole_with_one_token_and_read_from_the_usage() {
    let completion = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
        "finish_reason": "length"}], "usage": {"prompt_tokens": 1692, "completion_tokens": 1, "total_tokens": 1693}});
    let no_usage = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
        "finish_reason": "length"}]});
    let server = Server::start(vec![
        Reply::Status {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: completion.to_string(),
        },
        Reply::Status {
            status: 200,
            headers: vec![],
            body: no_usage.to_string(),
        },
        Reply::Status {
            status: 400,
            headers: vec![],
            body: LLAMA_CPP_PYTHON_REFUSAL.into(),
        },
    ])
    .await;
    let model = server.model();
    let count = || model.count_prompt(request().with_max_tokens(500), CancellationToken::new());
    assert_eq!(count().await.unwrap(), Some(1692));
    assert_eq!(count().await.unwrap(), None, "no usage: no count");
    let err = count().await.unwrap_err();
    assert!(
        matches!(&err, LlmError::ContextLength { refusal, .. } if refusal.prompt_tokens == Some(4156)),
        "{err:?}"
    );
    assert_eq!(server.count(), 3);
    // Never retried: a server that serves one request at a time would
    // evaluate the prompt again behind the one it still evaluates.
    let busy = Server::start(vec![
        Reply::Status {
            status: 503,
            headers: vec![],
            body: String::new(),
        },
        Reply::Silent,
    ])
    .await;
    let err = busy
        .model()
        .count_prompt(request(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 503, .. }), "{err:?}");
    assert_eq!(busy.count(), 1);
    let requests = server.requests.lock().unwrap();
    assert_eq!(requests[0].body["stream"], false);
    assert_eq!(requests[0].body["max_tokens"], 1);
    assert!(requests[0].body.get("stream_options").is_none());
    assert_eq!(requests[0].body["messages"][1]["content"], "hi");
}
