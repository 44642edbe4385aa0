//! A raw HTTP/1.1 server on loopback that answers the OpenAI-compatible
//! client as a test scripts it, and the chunks it streams: shared by the
//! test programs of the client.
#![allow(dead_code, reason = "each test program uses part of the server")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_llm::{CancellationToken, ChatRequest, LlmError, Message, OpenAiChatModel, OpenAiConfig, complete};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Generous bound for things that should happen at once.
pub(crate) const SOON: Duration = Duration::from_secs(10);

/// What the server does for one request.
pub(crate) enum Reply {
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
pub(crate) struct Captured {
    pub(crate) head: String,
    pub(crate) body: Value,
}

pub(crate) struct Server {
    pub(crate) base_url: String,
    pub(crate) requests: Arc<Mutex<Vec<Captured>>>,
}

impl Server {
    /// Serves `replies` in order (one connection per request).
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
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

    pub(crate) fn config(&self) -> OpenAiConfig {
        OpenAiConfig::new()
            .with_base_url(&self.base_url)
            .with_api_key("sk-test")
            .with_model("test-model")
            .with_retry_base_delay(Duration::from_millis(1))
            .with_request_timeout(SOON)
            .with_idle_timeout(SOON)
    }

    pub(crate) fn model(&self) -> OpenAiChatModel {
        OpenAiChatModel::new(self.config()).unwrap()
    }

    pub(crate) fn count(&self) -> usize {
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

pub(crate) fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

pub(crate) fn text_chunk(text: &str) -> String {
    data(
        json!({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}], "usage": null}),
    )
}

pub(crate) fn finish_chunk(reason: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

pub(crate) fn usage_chunk(prompt: u64, completion: u64) -> String {
    data(
        json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}),
    )
}

pub(crate) fn tool_delta(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> String {
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

pub(crate) const DONE: &str = "data: [DONE]\n\n";

pub(crate) fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user("hi")])
}

pub(crate) async fn run(model: &OpenAiChatModel) -> Result<dsh_llm::ChatResponse, LlmError> {
    tokio::time::timeout(SOON, complete(model, request(), &CancellationToken::new()))
        .await
        .expect("call hung")
}

/// llama-cpp-python's refusal of a request over its window, which it sends
/// only to a request that is not streamed.
pub(crate) const LLAMA_CPP_PYTHON_REFUSAL: &str = r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5180 tokens (4156 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
