//! The OpenAI-compatible client against a raw HTTP/1.1 server on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_llm::{
    CancellationToken, ChatEvent, ChatModel, ChatRequest, FinishReason, LlmError, Message, OpenAiChatModel,
    OpenAiConfig, StreamCut, ToolCall, ToolDefinition, Usage, collect_response, complete,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

mod server;

use server::*;

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
