//! The client against a server that interrupts, as llama-cpp-python does
//! with its default `interrupt_requests`: a request that arrives while
//! another stream runs cuts that stream (`data: [DONE]` after the role,
//! no finish reason). Parallel calls must all be answered, one at a time
//! once the first cut beside another request is seen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_llm::{
    CancellationToken, ChatModel, ChatRequest, ChatResponse, Concurrency, LlmError, Message, OpenAiChatModel,
    OpenAiConfig, complete,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const SOON: Duration = Duration::from_secs(10);

/// How long the server "evaluates" a prompt before it answers: a request
/// that arrives meanwhile cuts the stream.
const EVALUATION: Duration = Duration::from_millis(150);

/// The server: how many requests arrived, and how many streams it cut.
struct Server {
    base_url: String,
    arrived: Arc<AtomicUsize>,
    cut: Arc<AtomicUsize>,
}

impl Server {
    /// Interrupts every running stream when a request arrives, or (with
    /// `cut_first_alone`) cuts the first stream even when it runs alone.
    async fn start(cut_first_alone: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let arrived = Arc::new(AtomicUsize::new(0));
        let cut = Arc::new(AtomicUsize::new(0));
        let (arrivals, _) = watch::channel(0usize);
        let arrivals = Arc::new(arrivals);
        let (counted, cuts) = (Arc::clone(&arrived), Arc::clone(&cut));
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let (counted, cuts, arrivals) = (Arc::clone(&counted), Arc::clone(&cuts), Arc::clone(&arrivals));
                tokio::spawn(async move {
                    let Some(body) = read_body(&mut socket).await else {
                        return;
                    };
                    let mine = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    let mut later = arrivals.subscribe();
                    arrivals.send_modify(|count| *count = mine.max(*count));
                    let question = body["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
                    let _ = socket.write_all(SSE_HEAD.as_bytes()).await;
                    write(
                        &mut socket,
                        &json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
                    )
                    .await;
                    let interrupted = tokio::select! {
                        () = tokio::time::sleep(EVALUATION) => cut_first_alone && mine == 1,
                        _ = later.wait_for(|count| *count > mine) => true,
                    };
                    if interrupted {
                        cuts.fetch_add(1, Ordering::SeqCst);
                    } else {
                        let answer = json!({"choices": [{"index": 0, "delta": {"content": format!("answer to {question}")}, "finish_reason": "stop"}]});
                        write(&mut socket, &answer).await;
                    }
                    let _ = socket.write_all(b"data: [DONE]\n\n").await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Server { base_url, arrived, cut }
    }

    fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new()
            .with_base_url(&self.base_url)
            .with_api_key("x")
            .with_model("test-model")
            .with_retry_base_delay(Duration::from_millis(1))
            .with_request_timeout(SOON)
            .with_idle_timeout(SOON)
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

async fn write(socket: &mut TcpStream, data: &Value) {
    let _ = socket.write_all(format!("data: {data}\n\n").as_bytes()).await;
}

async fn read_body(socket: &mut TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    line.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return serde_json::from_slice(&buf[end + 4..end + 4 + length]).ok();
            }
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn ask(model: &OpenAiChatModel, question: String) -> Result<ChatResponse, LlmError> {
    let request = ChatRequest::new(vec![Message::user(question)]);
    tokio::time::timeout(SOON * 3, complete(model, request, &CancellationToken::new()))
        .await
        .expect("answered in time")
}

/// `calls` questions asked at once of `model`: every answer, in order.
async fn ask_at_once(model: &OpenAiChatModel, calls: usize) -> Vec<ChatResponse> {
    let asks = (0..calls).map(|index| ask(model, format!("question {index}")));
    futures::future::join_all(asks)
        .await
        .into_iter()
        .map(|answer| answer.expect("every call is answered"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_cut_by_each_other_are_all_answered_one_at_a_time() {
    for calls in [2, 8] {
        let server = Server::start(false).await;
        let model = OpenAiChatModel::new(server.config()).unwrap();
        let answers = ask_at_once(&model, calls).await;
        for (index, answer) in answers.iter().enumerate() {
            assert_eq!(answer.text, format!("answer to question {index}"), "{calls}");
        }
        let cut = server.cut.load(Ordering::SeqCst);
        assert!(cut >= 1, "{calls}: the server cut a stream");
        // Each cut request waited for its turn once, and was never cut again.
        assert_eq!(server.arrived.load(Ordering::SeqCst), calls + cut, "{calls}");
        assert!(cut < calls, "{calls}: {cut} cuts");
        let waited = answers.iter().filter(|answer| !answer.queued.is_zero()).count();
        assert!(waited >= cut, "{calls}: {waited} waited, {cut} cut");
        assert_eq!(model.learned_concurrency("test-model"), Some(Concurrency::ONE));
        assert_eq!(model.learned_concurrency("another-model"), None);
        // From now on one request at a time: nothing is cut.
        let before = server.cut.load(Ordering::SeqCst);
        let again = ask_at_once(&model, 3).await;
        assert_eq!(again.len(), 3);
        assert_eq!(server.cut.load(Ordering::SeqCst), before, "{calls}");
    }
}

#[tokio::test]
async fn a_cut_with_no_other_request_in_flight_is_retried_as_before() {
    let server = Server::start(true).await;
    let model = OpenAiChatModel::new(server.config()).unwrap();
    let answer = ask(&model, "alone".into()).await.unwrap();
    assert_eq!(answer.text, "answer to alone");
    assert!(answer.queued.is_zero());
    assert_eq!(server.arrived.load(Ordering::SeqCst), 2);
    assert_eq!(model.learned_concurrency("test-model"), None, "nothing learned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_limit_holds_from_the_start_and_a_kept_one_does_not_override_it() {
    let server = Server::start(false).await;
    let config = server.config().with_max_concurrent(Concurrency::ONE);
    let model = OpenAiChatModel::new(config).unwrap();
    let answers = ask_at_once(&model, 3).await;
    assert_eq!(server.cut.load(Ordering::SeqCst), 0, "never two at once");
    assert_eq!(server.arrived.load(Ordering::SeqCst), 3);
    assert!(answers.iter().any(|answer| !answer.queued.is_zero()));
    // Configured, not learned: nothing to keep, and a kept limit yields to it.
    assert_eq!(model.learned_concurrency("test-model"), None);
    model.keep_concurrency("test-model", Concurrency::new(4).unwrap());
    assert_eq!(model.learned_concurrency("test-model"), None);

    // Kept from an earlier run: in force from the first call.
    let server = Server::start(false).await;
    let model = OpenAiChatModel::new(server.config()).unwrap();
    model.keep_concurrency("test-model", Concurrency::ONE);
    assert_eq!(model.learned_concurrency("test-model"), Some(Concurrency::ONE));
    ask_at_once(&model, 3).await;
    assert_eq!(server.cut.load(Ordering::SeqCst), 0);
}
