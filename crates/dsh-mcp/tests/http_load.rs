//! The HTTP server under load: 500 sessions opened and closed at once
//! (each `initialize`, `notifications/initialized`, `tools/list`,
//! `DELETE`) while 50 clients stall in the middle of a body. Every session
//! completes, every session's agent is released, and the process's file
//! descriptors and memory come back to where they were.
//!
//! Its own test binary: it counts the whole process's files and memory.
//! `DSH_LOAD_SESSIONS` sets the number of sessions (default 500).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_mcp::{HttpServeOptions, McpToolServer, SessionAgents};
use dsh_tools::{AgentRef, CancellationToken, ToolRegistry};
use futures::future::BoxFuture;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const GUARD: Duration = Duration::from_secs(120);
const STALLED: usize = 50;
/// Longer than the server's own header and body read timeouts (30 s), which
/// bound how long it keeps a connection a client left open.
const SETTLE: Duration = Duration::from_secs(40);

#[derive(Default)]
struct Agents {
    opened: Mutex<usize>,
    closed: Mutex<usize>,
}

impl SessionAgents for Agents {
    fn open(&self) -> Result<AgentRef, String> {
        let mut opened = self.opened.lock().unwrap();
        *opened += 1;
        Ok(AgentRef::new(format!("session-{opened}")))
    }
    fn close(&self, _agent: AgentRef) -> BoxFuture<'static, ()> {
        *self.closed.lock().unwrap() += 1;
        Box::pin(async {})
    }
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// What each open file is (`socket:[…]`, `anon_inode:[eventpoll]`, a
/// path), sorted: named in a failure, so a leak says what leaked.
fn open_file_kinds() -> Vec<String> {
    let mut kinds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .collect();
    kinds.sort();
    kinds
}

/// Resident memory, in bytes.
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A client that sends the headers of a new-session `POST` and the start
/// of its body, then nothing more.
async fn stall(authority: &str) -> TcpStream {
    let mut stream = TcpStream::connect(authority).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\": \"2.0\", "
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    request.send().await.unwrap()
}

/// One session, start to end.
async fn round(client: reqwest::Client, url: String) {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "load", "version": "0"}}});
    let opened = post(&client, &url, None, initialize).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(opened.text().await.unwrap().contains("\"result\""));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&client, &url, Some(&session), initialized).await.status(), 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = post(&client, &url, Some(&session), list).await;
    assert_eq!(listed.status(), 200);
    assert!(listed.text().await.unwrap().contains("\"tools\""));
    let ended = client
        .delete(&url)
        .header("Mcp-Session-Id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 202);
}

/// `sessions` rounds at once, on one client; then the client is gone.
async fn rounds(url: &str, sessions: usize) {
    let client = reqwest::Client::new();
    let mut all = tokio::task::JoinSet::new();
    for _ in 0..sessions {
        all.spawn(round(client.clone(), url.to_owned()));
    }
    while let Some(done) = tokio::time::timeout(GUARD, all.join_next()).await.unwrap() {
        done.unwrap();
    }
}

/// Waits until `agents` has released as many as it opened.
async fn released(agents: &Agents) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while *agents.closed.lock().unwrap() < *agents.opened.lock().unwrap() {
        assert!(tokio::time::Instant::now() < deadline, "sessions were not released");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many files are open once the count has stopped changing for half
/// a second (bounded): connections of a round that just ended are still
/// closing, by the hundreds on a loaded machine.
async fn settled_files() -> usize {
    let deadline = tokio::time::Instant::now() + SETTLE;
    let mut last = open_files();
    let mut still = 0;
    while still < 5 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = open_files();
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    last
}

/// Waits (bounded) until at most `limit` files are open; how many are.
async fn files_down_to(limit: usize) -> usize {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while open_files() > limit && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    open_files()
}

/// One round of the load: `STALLED` clients stall while `sessions`
/// sessions run start to end; then the stalled clients hang up.
async fn load(url: &str, authority: &str, sessions: usize, agents: &Agents) {
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(stall(authority).await);
    }
    rounds(url, sessions).await;
    released(agents).await;
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_sessions_open_and_close_while_fifty_clients_stall_and_nothing_stays() {
    let sessions = std::env::var("DSH_LOAD_SESSIONS")
        .ok()
        .and_then(|sessions| sessions.parse().ok())
        .unwrap_or(500);
    // Each session holds two sockets of this process while it runs.
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let url = format!("http://{authority}/mcp");
    let agents = Arc::new(Agents::default());
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn({
        let agents = agents.clone() as Arc<dyn SessionAgents>;
        let shutdown = shutdown.clone();
        async move {
            let options = HttpServeOptions::default().max_sessions(sessions + 1);
            McpToolServer::new(ToolRegistry::new())
                .serve_http(listener, options, agents, shutdown)
                .await
        }
    });

    // Two rounds of the same shape first warm up what is made once and
    // then kept (the runtime's threads and queues, the allocator's free
    // lists, maps that grow and never shrink): resident memory climbs over
    // the first rounds and levels off, and the third is measured against
    // them.
    for _ in 0..2 {
        load(&url, &authority, sessions, &agents).await;
    }
    let files = settled_files().await;
    let kinds = open_file_kinds();
    let memory = resident();

    load(&url, &authority, sessions, &agents).await;
    assert_eq!(
        *agents.opened.lock().unwrap(),
        3 * sessions,
        "the stalled clients opened nothing"
    );

    let files_after = files_down_to(files).await;
    assert!(
        files_after <= files,
        "{files_after} files open, {files} before: {:?} now, {kinds:?} before",
        open_file_kinds()
    );
    let memory_after = resident();
    eprintln!(
        "resident memory: {} KiB before, {} KiB after",
        memory >> 10,
        memory_after >> 10
    );
    // Allocators keep some freed memory (a few MiB a round here, less each
    // time); 64 KiB kept per session would be 32 MiB, and fails this.
    assert!(
        memory_after < memory + sessions * (64 << 10),
        "{} KiB resident after the load, {} KiB before",
        memory_after >> 10,
        memory >> 10
    );
    shutdown.cancel();
    tokio::time::timeout(GUARD, serving).await.unwrap().unwrap().unwrap();
}
