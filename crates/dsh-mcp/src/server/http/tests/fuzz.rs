//! A property test of the HTTP front: random methods, headers, bodies and
//! orders, bodies cut short and bodies that stall, sent raw on connections
//! of their own against a server with a token, a bound of four sessions
//! and a short body deadline. Whatever comes:
//!
//! - every request that was sent whole (or cut short) gets an answer: the
//!   server never panics on one, and stays up;
//! - a request that is refused (any status but 2xx) ends no session and
//!   opens none; an accepted `DELETE` ends exactly its session;
//! - a client with a session of its own is never kept waiting: a probe
//!   answers within a second after every request, stalled ones included;
//! - at the end the server's count of sessions is the truth: with every
//!   session ended, exactly four open again and a fifth is refused.
//!
//! Cases: `DSH_FUZZ_CASES` (default 16), each a sequence of up to 16
//! requests.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Running, serve};
use crate::HttpServeOptions;

const TOKEN: &str = "fuzz-0123456789abcdef0123456789abcdef";
const MAX_SESSIONS: usize = 4;

#[derive(Clone, Copy, Debug)]
enum Target {
    /// No `Mcp-Session-Id`.
    None,
    /// One of the sessions the case opened first (by index, modulo).
    Known(usize),
    /// An id no session has.
    Unknown,
}

#[derive(Clone, Copy, Debug)]
enum Auth {
    Good,
    LowerCaseScheme,
    Wrong,
    Missing,
}

#[derive(Clone, Copy, Debug)]
enum Header {
    Good,
    Evil,
    Garbage,
    Missing,
}

#[derive(Clone, Debug)]
enum Payload {
    Empty,
    Initialize,
    ListTools,
    Initialized,
    CallWithBadParams,
    NotJson,
    NotAMessage,
    Bytes(Vec<u8>),
}

#[derive(Clone, Copy, Debug)]
enum Delivery {
    Whole,
    /// `Content-Length` promises more; the client then closes its side.
    CutShort,
    /// `Content-Length` promises more, and nothing more comes.
    Stalled,
}

#[derive(Clone, Debug)]
struct Op {
    method: &'static str,
    target: Target,
    auth: Auth,
    host: Header,
    origin: Header,
    json_content: bool,
    accepts_both: bool,
    payload: Payload,
    delivery: Delivery,
}

fn op() -> impl Strategy<Value = Op> {
    let method = prop::sample::select(vec![
        "POST", "POST", "POST", "DELETE", "DELETE", "GET", "PUT", "OPTIONS", "HEAD",
    ]);
    let target = prop_oneof![
        Just(Target::None),
        (0usize..4).prop_map(Target::Known),
        Just(Target::Unknown)
    ];
    let auth = prop_oneof![
        4 => Just(Auth::Good),
        1 => Just(Auth::LowerCaseScheme),
        1 => Just(Auth::Wrong),
        1 => Just(Auth::Missing)
    ];
    let header = || {
        prop_oneof![
            4 => Just(Header::Good),
            1 => Just(Header::Evil),
            1 => Just(Header::Garbage),
            1 => Just(Header::Missing)
        ]
    };
    let payload = prop_oneof![
        Just(Payload::Empty),
        Just(Payload::Initialize),
        Just(Payload::ListTools),
        Just(Payload::Initialized),
        Just(Payload::CallWithBadParams),
        Just(Payload::NotJson),
        Just(Payload::NotAMessage),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Payload::Bytes)
    ];
    let delivery = prop_oneof![
        6 => Just(Delivery::Whole),
        1 => Just(Delivery::CutShort),
        1 => Just(Delivery::Stalled)
    ];
    (
        method,
        target,
        auth,
        header(),
        header(),
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.9),
        payload,
        delivery,
    )
        .prop_map(
            |(method, target, auth, host, origin, json_content, accepts_both, payload, delivery)| Op {
                method,
                target,
                auth,
                host,
                origin,
                json_content,
                accepts_both,
                payload,
                delivery,
            },
        )
}

impl Payload {
    fn bytes(&self) -> Vec<u8> {
        let text = match self {
            Self::Empty => String::new(),
            Self::Initialize => super::initialize_body(),
            Self::ListTools => json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
            Self::Initialized => json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            Self::CallWithBadParams => {
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}}).to_string()
            }
            Self::NotJson => "{\"jsonrpc\": \"2.0\", \"id\": 4,".to_owned(),
            Self::NotAMessage => json!({"hello": "world"}).to_string(),
            Self::Bytes(bytes) => return bytes.clone(),
        };
        text.into_bytes()
    }
}

/// The raw request of `op` (its body whole; the caller sends less of it
/// when the delivery says so).
fn request(op: &Op, authority: &str, sessions: &[String]) -> (Vec<u8>, Vec<u8>) {
    let body = op.payload.bytes();
    let mut head = format!("{} /mcp HTTP/1.1\r\nConnection: close\r\n", op.method);
    match op.host {
        Header::Good => head.push_str(&format!("Host: {authority}\r\n")),
        Header::Evil => head.push_str("Host: evil.example.com\r\n"),
        Header::Garbage => head.push_str("Host: not a host\r\n"),
        Header::Missing => {}
    }
    match op.origin {
        Header::Good => head.push_str(&format!("Origin: http://{authority}\r\n")),
        Header::Evil => head.push_str("Origin: http://evil.example.com\r\n"),
        Header::Garbage => head.push_str("Origin: ::not an origin::\r\n"),
        Header::Missing => {}
    }
    match op.auth {
        Auth::Good => head.push_str(&format!("Authorization: Bearer {TOKEN}\r\n")),
        Auth::LowerCaseScheme => head.push_str(&format!("Authorization: bearer {TOKEN}\r\n")),
        Auth::Wrong => head.push_str("Authorization: Bearer wrong\r\n"),
        Auth::Missing => {}
    }
    match op.target {
        Target::None => {}
        Target::Known(index) => head.push_str(&format!("Mcp-Session-Id: {}\r\n", sessions[index % sessions.len()])),
        Target::Unknown => head.push_str("Mcp-Session-Id: 00000000-0000-0000-0000-000000000000\r\n"),
    }
    if op.json_content {
        head.push_str("Content-Type: application/json\r\n");
    }
    if op.accepts_both {
        head.push_str("Accept: application/json, text/event-stream\r\n");
    }
    let promised = match op.delivery {
        Delivery::Whole => body.len(),
        Delivery::CutShort | Delivery::Stalled => body.len() + 100,
    };
    head.push_str(&format!("Content-Length: {promised}\r\n\r\n"));
    (head.into_bytes(), body)
}

/// The status an answer starts with, if it is an HTTP answer.
fn status_of(answer: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(answer);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// The session id an answer gave.
fn session_of(answer: &[u8]) -> Option<String> {
    String::from_utf8_lossy(answer).lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    })
}

/// Sends `op`: its connection, the body sent as its delivery says.
async fn send(op: &Op, authority: &str, sessions: &[String]) -> TcpStream {
    let (head, body) = request(op, authority, sessions);
    let mut stream = TcpStream::connect(authority).await.unwrap();
    stream.write_all(&head).await.unwrap();
    // The server may answer (and close) before the body: a refused request.
    let _ = stream.write_all(&body).await;
    if let Delivery::CutShort = op.delivery {
        let _ = stream.shutdown().await;
    }
    stream
}

/// The answer on `stream`, read to its end; an SSE answer may stay open,
/// so of one, what comes in 300 ms is enough.
async fn answer(mut stream: TcpStream) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut chunk = [0u8; 4096];
    while let Ok(Ok(read @ 1..)) = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
        answer.extend_from_slice(&chunk[..read]);
        if String::from_utf8_lossy(&answer).contains("text/event-stream") {
            deadline = deadline.min(tokio::time::Instant::now() + Duration::from_millis(300));
        }
    }
    answer
}

/// The probe: `tools/list` in its own session answers, within a second.
async fn probe(server: &Running, session: &str) {
    let started = tokio::time::Instant::now();
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string();
    let bearer = format!("Bearer {TOKEN}");
    let headers = [("Mcp-Session-Id", session), ("Authorization", bearer.as_str())];
    let answer = tokio::time::timeout(
        Duration::from_secs(1),
        super::send(reqwest::Method::POST, &server.url, &headers, Some(body)),
    )
    .await
    .unwrap_or_else(|_| panic!("the probe waited more than a second"));
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

async fn open(server: &Running) -> String {
    let bearer = format!("Bearer {TOKEN}");
    let answer = super::send(
        reqwest::Method::POST,
        &server.url,
        &[("Authorization", &bearer)],
        Some(super::initialize_body()),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.session().unwrap()
}

#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
async fn run_case(ops: Vec<Op>) {
    let server = serve(
        HttpServeOptions::default()
            .bearer_token(TOKEN)
            .max_sessions(MAX_SESSIONS)
            .body_timeout(Duration::from_millis(200)),
    )
    .await;
    let authority = server.authority();
    let probe_session = open(&server).await;
    let sessions = vec![open(&server).await, open(&server).await];
    let mut alive = sessions.clone();
    let mut opened_by_ops: Vec<String> = Vec::new();
    for op in &ops {
        let (opened, closed) = (server.opened(), server.closed());
        let stream = send(op, &authority, &sessions).await;
        if let Delivery::Stalled = op.delivery {
            // While its body stalls, others are served.
            probe(&server, &probe_session).await;
        }
        // A stalled body gets its answer too: 408 once its deadline passes,
        // or at once when the request needs no body.
        let answer = answer(stream).await;
        let status =
            status_of(&answer).unwrap_or_else(|| panic!("no answer to {op:?}: {:?}", String::from_utf8_lossy(&answer)));
        let deleted = match op.target {
            Target::Known(index) => Some(sessions[index % sessions.len()].clone()),
            _ => None,
        };
        if !(200..300).contains(&status) {
            // A session's release runs in the background: give one time to show.
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert_eq!(server.opened(), opened, "a refused {op:?} ({status}) opened a session");
            assert_eq!(server.closed(), closed, "a refused {op:?} ({status}) ended a session");
        } else if op.method == "DELETE" {
            let deleted = deleted.unwrap_or_else(|| panic!("{op:?} accepted without a session"));
            assert!(alive.contains(&deleted), "{op:?} ended a session twice");
            alive.retain(|session| *session != deleted);
            super::eventually("the deleted session released", || {
                server.closed().len() == closed.len() + 1
            })
            .await;
        } else if let Some(session) = session_of(&answer)
            && session != probe_session
            && !sessions.contains(&session)
            && !opened_by_ops.contains(&session)
        {
            opened_by_ops.push(session);
        }
        probe(&server, &probe_session).await;
    }
    assert_eq!(
        server.opened() as usize,
        3 + opened_by_ops.len(),
        "only accepted initializes opened sessions"
    );

    // The count is the truth: every session ended, then exactly the bound opens.
    let bearer = format!("Bearer {TOKEN}");
    let everyone: Vec<String> = alive
        .iter()
        .chain(&opened_by_ops)
        .chain(std::iter::once(&probe_session))
        .cloned()
        .collect();
    for session in &everyone {
        let answer = super::send(
            reqwest::Method::DELETE,
            &server.url,
            &[("Mcp-Session-Id", session), ("Authorization", &bearer)],
            None,
        )
        .await;
        assert_eq!(answer.status, 202, "{session}: {answer:?}");
    }
    let opened = server.opened() as usize;
    super::eventually("every session released", || server.closed().len() == opened).await;
    for _ in 0..MAX_SESSIONS {
        open(&server).await;
    }
    let refused = super::send(
        reqwest::Method::POST,
        &server.url,
        &[("Authorization", &bearer)],
        Some(super::initialize_body()),
    )
    .await;
    assert_eq!(refused.status, 503, "{refused:?}");
    server.stop().await;
}

#[test]
fn no_request_panics_the_server_changes_a_session_when_refused_or_keeps_another_waiting() {
    let cases = std::env::var("DSH_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(16);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(op(), 1..16), |ops| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(run_case(ops));
            Ok(())
        })
        .unwrap();
}
