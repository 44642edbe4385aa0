//! No request can keep another waiting: clients that send their headers and
//! then stall hold nothing that others need, and their bodies have a
//! deadline.

use std::time::Duration;

use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{GUARD, list_tools, open, send, serve};
use crate::HttpServeOptions;

/// A client that sends the headers of a `POST` (no session: it would open
/// one) and the start of its body, then nothing more.
pub(super) async fn stall(authority: &str) -> TcpStream {
    let mut stream = TcpStream::connect(authority).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\": \"2.0\", "
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Opens a session, lists its tools and ends it: how long that took.
pub(super) async fn session_round(url: &str) -> Duration {
    let started = tokio::time::Instant::now();
    let session = open(url).await;
    assert_eq!(list_tools(url, &session).await.status, 200);
    let ended = send(Method::DELETE, url, &[("Mcp-Session-Id", &session)], None).await;
    assert!((200..300).contains(&ended.status), "{ended:?}");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_stalled_clients_keep_no_session_from_opening_or_closing() {
    let server = serve(HttpServeOptions::default().max_sessions(200)).await;
    let mut stalled = Vec::new();
    for _ in 0..50 {
        stalled.push(stall(&server.authority()).await);
    }
    // 100 sessions, ten at a time, while all 50 stall.
    let mut lanes = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let url = server.url.clone();
        lanes.spawn(async move {
            let mut slowest = Duration::ZERO;
            for _ in 0..10 {
                slowest = slowest.max(session_round(&url).await);
            }
            slowest
        });
    }
    let mut slowest = Duration::ZERO;
    while let Some(lane) = tokio::time::timeout(GUARD, lanes.join_next()).await.unwrap() {
        slowest = slowest.max(lane.unwrap());
    }
    assert!(slowest < Duration::from_secs(1), "a session took {slowest:?}");
    assert_eq!(server.opened(), 100);
    super::eventually("every session released", || server.closed().len() == 100).await;
    drop(stalled);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_answered_408_and_opens_nothing() {
    let timeout = Duration::from_millis(300);
    let server = serve(HttpServeOptions::default().body_timeout(timeout)).await;
    let mut stalled = stall(&server.authority()).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(GUARD, stalled.read_to_end(&mut answer))
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "{read:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains(
            r#""error":{"code":-32000,"message":"Request Timeout: the request body did not arrive within 300 ms"}"#
        ),
        "{answer}"
    );
    assert_eq!(server.opened(), 0);
    server.stop().await;
}
