//! Records real model traffic into cassettes, once, against a live
//! OpenAI-compatible server; dsh-llm's `tests/recorded.rs` replays them
//! offline (not a product binary).
//!
//! ```text
//! DSH_BASE_URL=http://127.0.0.1:8761/v1 DSH_MODEL=SmolLM2-135M-Instruct \
//!     cargo run -p dsh-test-programs --bin record-live-cassettes -- crates/dsh-llm/tests/cassettes
//! ```
//!
//! (`scripts/record-cassettes.sh` starts llama-cpp-python and runs this.)
//! It writes three cassettes at the HTTP level:
//! - `parallel.jsonl`: three short questions asked at once, as parallel
//!   children ask;
//! - `refused.jsonl`: one request longer than the server's context window,
//!   and the server's refusal;
//! - `cut.jsonl`: one answer whose stream is cut part-way by a proxy in
//!   front of the server (a connection lost mid-answer).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use dsh_llm::cassette::Recorder;
use dsh_llm::{CancellationToken, ChatModel, ChatRequest, Message, OpenAiChatModel, OpenAiConfig, complete};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The questions of `parallel.jsonl` (and of its test).
const QUESTIONS: [&str; 3] = [
    "What is the capital of France? One word.",
    "What is the capital of Italy? One word.",
    "What is the capital of Spain? One word.",
];

/// The words of the request `refused.jsonl` holds: more tokens than an
/// 8192-token window.
const LONG_WORDS: usize = 9000;

/// How many bytes of the answer's body the cutting proxy lets through.
const CUT_AFTER: usize = 700;

#[tokio::main]
async fn main() {
    let out = PathBuf::from(std::env::args().nth(1).expect("usage: record-live-cassettes OUT_DIR"));
    std::fs::create_dir_all(&out).unwrap();
    let config = OpenAiConfig::from_env();
    let cancel = CancellationToken::new();

    let recorder = start(&out, "parallel.jsonl");
    let model = OpenAiChatModel::new(config.clone())
        .unwrap()
        .recorded(&recorder)
        .unwrap();
    let answers = futures::future::join_all(QUESTIONS.map(|question| complete(&model, short(question), &cancel))).await;
    for (question, answer) in QUESTIONS.iter().zip(answers) {
        println!("{question} -> {:?}", answer.map(|answer| answer.text));
    }
    println!("parallel.jsonl: {} exchanges", recorder.finish().unwrap());

    let recorder = start(&out, "refused.jsonl");
    let model = OpenAiChatModel::new(config.clone())
        .unwrap()
        .recorded(&recorder)
        .unwrap();
    let long = ChatRequest::new(vec![Message::user("a ".repeat(LONG_WORDS))]).with_max_tokens(8);
    println!(
        "refused: {:?}",
        complete(&model, long, &cancel).await.map(|answer| answer.text)
    );
    println!("refused.jsonl: {} exchanges", recorder.finish().unwrap());

    let recorder = start(&out, "cut.jsonl");
    let upstream = config.base_url.clone();
    let cutting = cutting_proxy(&upstream).await;
    let model = OpenAiChatModel::new(config.with_base_url(cutting))
        .unwrap()
        .recorded(&recorder)
        .unwrap();
    let story = ChatRequest::new(vec![Message::user("Tell me a short story about a cat.")]).with_max_tokens(64);
    println!(
        "cut: {:?}",
        complete(&model, story, &cancel).await.map(|answer| answer.text)
    );
    println!(
        "cut.jsonl: {} exchanges; model {}",
        recorder.finish().unwrap(),
        model.model_name()
    );
}

/// A recorder for `out/name`, replacing an earlier cassette.
fn start(out: &Path, name: &str) -> Recorder {
    let file = out.join(name);
    let _ = std::fs::remove_file(&file);
    Recorder::create(file).unwrap()
}

/// A short question, answered briefly and deterministically.
fn short(question: &str) -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user(question)]).with_max_tokens(12);
    request.temperature = Some(0.0);
    request
}

/// A proxy on loopback in front of `upstream` (`http://host:port/v1`) that
/// passes each request on and the answer back, but closes the connection
/// once [`CUT_AFTER`] bytes of the answer's body have passed. Returns its
/// base URL.
async fn cutting_proxy(upstream: &str) -> String {
    let target = upstream
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(cut(client, target.clone()));
        }
    });
    base
}

async fn cut(mut client: TcpStream, target: String) {
    let mut server = TcpStream::connect(&target).await.unwrap();
    // The request: its head and its body, by content-length.
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = client.read(&mut buf).await.unwrap();
        request.extend_from_slice(&buf[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break;
            }
        }
        if n == 0 {
            return;
        }
    }
    server.write_all(&request).await.unwrap();
    // The answer: its head, then the body until the cut.
    let mut passed = Vec::new();
    loop {
        let n = server.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        passed.extend_from_slice(&buf[..n]);
        let body_start = passed.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
        let allowed = body_start.map_or(passed.len(), |start| (start + CUT_AFTER).min(passed.len()));
        let sent = passed.len() - n;
        if allowed > sent {
            client.write_all(&passed[sent..allowed]).await.unwrap();
        }
        if body_start.is_some_and(|start| passed.len() >= start + CUT_AFTER) {
            // Cut: the rest of the stream never arrives.
            return;
        }
    }
}
