//! The OpenAI-compatible client against a raw HTTP/1.1 server on
//! loopback: streams cut before their finish reason (never an answer), and
//! empty answers asked again without streaming.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_llm::{
    CancellationToken, ChatEvent, ChatModel, FinishReason, LlmError, OpenAiChatModel, StreamCut, ToolCall, Usage,
};
use futures::StreamExt;
use serde_json::json;

mod server;

use server::*;

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
