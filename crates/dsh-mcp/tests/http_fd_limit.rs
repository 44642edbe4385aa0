//! The loop a probe once ran against `dsh mcp --listen`: `DELETE`s carrying
//! a forbidden `Origin` or `Host`, and `initialize`s from a forbidden
//! origin, each on a connection of its own, hundreds of times, in a process
//! limited to 256 open files (`ulimit -n 256`). Each is refused and has no
//! effect: no session ends or opens, the bound on sessions still holds, and
//! the file descriptors come back to where they were.
//!
//! Its own test binary: the limit applies to the whole process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_mcp::{HttpServeOptions, McpToolServer, SessionAgents};
use dsh_tools::{AgentRef, CancellationToken, ToolRegistry};
use futures::future::BoxFuture;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use reqwest::Method;
use serde_json::json;

const GUARD: Duration = Duration::from_secs(30);

/// More requests than the process may hold files.
const ROUNDS: usize = 300;

#[derive(Default)]
struct Agents {
    opened: Mutex<u32>,
    closed: Mutex<Vec<String>>,
}

impl SessionAgents for Agents {
    fn open(&self) -> Result<AgentRef, String> {
        let mut opened = self.opened.lock().unwrap();
        *opened += 1;
        Ok(AgentRef::new(format!("session-{opened}")))
    }
    fn close(&self, agent: AgentRef) -> BoxFuture<'static, ()> {
        self.closed.lock().unwrap().push(agent.id().to_string());
        Box::pin(async {})
    }
}

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// One request on a connection of its own: its status and its
/// `Mcp-Session-Id`.
async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> (u16, Option<String>) {
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut request = client
        .request(method, url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body.to_owned());
    }
    let response = tokio::time::timeout(GUARD, request.send()).await.unwrap().unwrap();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let status = response.status().as_u16();
    // Read what is there (an SSE answer may stay open), then let it go.
    let _ = tokio::time::timeout(Duration::from_millis(200), response.bytes()).await;
    (status, session)
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}})
    .to_string()
}

async fn list_tools(url: &str, session: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    send(Method::POST, url, &[("Mcp-Session-Id", session)], Some(&body))
        .await
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_deletes_under_256_open_files_end_nothing_and_leak_nothing() {
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, 256, hard).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let agents = Arc::new(Agents::default());
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn({
        let agents = agents.clone() as Arc<dyn SessionAgents>;
        let shutdown = shutdown.clone();
        async move {
            McpToolServer::new(ToolRegistry::new())
                .serve_http(listener, HttpServeOptions::default().max_sessions(2), agents, shutdown)
                .await
        }
    });
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (status, session) = send(Method::POST, &url, &[], Some(&initialize())).await;
        assert_eq!(status, 200);
        sessions.push(session.unwrap());
    }
    let before = open_files();

    let evil_origin = ("Origin", "http://evil.example.com");
    let evil_host = ("Host", "evil.example.com");
    for round in 0..ROUNDS {
        let session = sessions[round % 2].as_str();
        for evil in [evil_origin, evil_host] {
            let (status, _) = send(Method::DELETE, &url, &[evil, ("Mcp-Session-Id", session)], None).await;
            assert_eq!(status, 403, "round {round}");
        }
        let (status, opened) = send(Method::POST, &url, &[evil_origin], Some(&initialize())).await;
        assert_eq!((status, opened), (403, None), "round {round}");
    }

    // Nothing ended, nothing opened, and the bound still holds.
    for session in &sessions {
        assert_eq!(list_tools(&url, session).await, 200);
    }
    assert!(agents.closed.lock().unwrap().is_empty());
    assert_eq!(*agents.opened.lock().unwrap(), 2);
    assert_eq!(send(Method::POST, &url, &[], Some(&initialize())).await.0, 503);
    // The connections of the refused requests are all closed.
    let deadline = tokio::time::Instant::now() + GUARD;
    while open_files() > before + 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} files open, {before} before the loop",
            open_files()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The real DELETEs end their sessions.
    for session in &sessions {
        let (status, _) = send(Method::DELETE, &url, &[("Mcp-Session-Id", session)], None).await;
        assert_eq!(status, 202);
    }
    let deadline = tokio::time::Instant::now() + GUARD;
    while agents.closed.lock().unwrap().len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the sessions were not released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    tokio::time::timeout(GUARD, serving).await.unwrap().unwrap().unwrap();
}
