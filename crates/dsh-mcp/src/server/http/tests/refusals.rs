//! What the server refuses, and that a refused request changes nothing: no
//! session ends, none opens, the bound still holds; every refusal is a
//! JSON-RPC error.

use reqwest::Method;
use serde_json::{Value, json};

use super::{list_tools, open, send, serve};
use crate::HttpServeOptions;

/// The JSON-RPC error of an answer: its code and its id.
fn error_of(message: &Value) -> (i64, Value) {
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    let code = message["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {message}"));
    assert!(message["error"]["message"].is_string(), "{message}");
    (
        code,
        message.get("id").cloned().unwrap_or_else(|| panic!("no id: {message}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_ends_nothing_and_the_bound_still_holds() {
    let server = serve(HttpServeOptions::default().max_sessions(2)).await;
    let first = open(&server.url).await;
    let second = open(&server.url).await;
    let evil_origin = [("Origin", "http://evil.example.com")];
    let evil_host = [("Host", "evil.example.com")];
    for session in [&first, &second] {
        for _ in 0..3 {
            for headers in [&evil_origin, &evil_host] {
                let mut headers = headers.to_vec();
                headers.push(("Mcp-Session-Id", session));
                let answer = send(Method::DELETE, &server.url, &headers, None).await;
                assert_eq!(answer.status, 403, "{answer:?}");
            }
        }
    }
    // Nothing ended: both sessions answer, their agents are still open …
    for session in [&first, &second] {
        let answer = list_tools(&server.url, session).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(answer.message()["result"]["tools"].is_array(), "{answer:?}");
    }
    assert_eq!(server.closed(), Vec::<String>::new());
    // … and they still count: a third is refused.
    let third = send(Method::POST, &server.url, &[], Some(super::initialize_body())).await;
    assert_eq!(third.status, 503, "{third:?}");
    assert_eq!(server.opened(), 2);

    // A DELETE that passes every check ends its session at once, once.
    let answer = send(Method::DELETE, &server.url, &[("Mcp-Session-Id", &first)], None).await;
    assert!((200..300).contains(&answer.status), "{answer:?}");
    assert_eq!(server.closed(), ["session-1"]);
    for session in [first.as_str(), "no-such-session"] {
        let answer = send(Method::DELETE, &server.url, &[("Mcp-Session-Id", session)], None).await;
        assert_eq!(answer.status, 404, "{answer:?}");
        assert_eq!(error_of(&answer.message()), (-32001, Value::Null));
    }
    assert_eq!(server.closed(), ["session-1"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_json_rpc_errors_with_the_id_when_it_could_be_read() {
    let server = serve(HttpServeOptions::default()).await;
    let session = open(&server.url).await;
    let in_session = [("Mcp-Session-Id", session.as_str())];
    let post = |headers: &'static [(&'static str, &'static str)], body: &str| {
        let url = server.url.clone();
        let body = body.to_owned();
        async move { send(Method::POST, &url, headers, Some(body)).await }
    };

    // Not JSON: 400, -32700, "id": null; with a session or without.
    for answer in [
        post(&[], "{not json").await,
        send(Method::POST, &server.url, &in_session, Some("[1, 2".to_owned())).await,
    ] {
        assert_eq!(answer.status, 400, "{answer:?}");
        assert!(answer.content_type().starts_with("application/json"), "{answer:?}");
        assert_eq!(error_of(&answer.message()), (-32700, Value::Null));
    }
    // JSON, but not a JSON-RPC message: -32600, with the id when there is one.
    let answer = post(&[], r#"{"hello": "world"}"#).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(error_of(&answer.message()), (-32600, Value::Null));
    let answer = post(&[], r#"{"jsonrpc": "2.0", "id": 7, "method": 42}"#).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert_eq!(error_of(&answer.message()), (-32600, json!(7)));

    // Params of the wrong type: -32602 with the request's id, in the session.
    let call = json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": {"name": 5}});
    let answer = send(Method::POST, &server.url, &in_session, Some(call.to_string())).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(error_of(&answer.message()), (-32602, json!("call-1")));
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call"});
    let answer = send(Method::POST, &server.url, &in_session, Some(list.to_string())).await;
    assert_eq!(error_of(&answer.message()), (-32602, json!(9)));
    // … and an initialize whose params are wrong opens nothing.
    let initialize = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 2025}});
    let answer = post(&[], &initialize.to_string()).await;
    assert_eq!(error_of(&answer.message()), (-32602, json!(3)));
    assert_eq!(answer.session(), None);
    assert_eq!(server.opened(), 1);

    // An unknown method stays -32601.
    let unknown = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/frobnicate", "params": {}});
    let answer = send(Method::POST, &server.url, &in_session, Some(unknown.to_string())).await;
    assert_eq!(error_of(&answer.message()), (-32601, json!(4)));

    // The transport's own refusals carry the JSON-RPC shape too.
    for (answer, status) in [
        (send(Method::PUT, &server.url, &[], None).await, 405),
        (
            send(
                Method::POST,
                &server.url,
                &[("Origin", "http://evil.example.com")],
                Some(super::initialize_body()),
            )
            .await,
            403,
        ),
        (list_tools(&server.url, "no-such-session").await, 404),
        (
            send(Method::POST, &server.url.replace("/mcp", "/other"), &[], None).await,
            404,
        ),
    ] {
        assert_eq!(answer.status, status, "{answer:?}");
        assert!(answer.content_type().starts_with("application/json"), "{answer:?}");
        let (code, id) = error_of(&answer.message());
        assert!(code == -32000 || code == -32001, "{answer:?}");
        assert_eq!(id, Value::Null);
    }
    // The session is untouched by all of it.
    assert_eq!(list_tools(&server.url, &session).await.status, 200);
    assert_eq!(server.closed(), Vec::<String>::new());
    server.stop().await;
}

/// A token of the length the server asks for.
const TOKEN: &str = "0123456789abcdef0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_matches_whatever_its_case() {
    let server = serve(HttpServeOptions::default().bearer_token(TOKEN)).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let authorization = format!("{scheme} {TOKEN}");
        let answer = send(
            Method::POST,
            &server.url,
            &[("Authorization", &authorization)],
            Some(super::initialize_body()),
        )
        .await;
        assert_eq!(answer.status, 200, "{scheme}: {answer:?}");
    }
    for authorization in [
        TOKEN.to_owned(),
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        "Bearer ".to_owned(),
    ] {
        let answer = send(
            Method::POST,
            &server.url,
            &[("Authorization", &authorization)],
            Some(super::initialize_body()),
        )
        .await;
        assert_eq!(answer.status, 401, "{authorization}: {answer:?}");
    }
    assert_eq!(server.opened(), 4);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_shorter_than_32_bytes_is_refused_at_start() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let short = &TOKEN[..31];
    let server = crate::McpToolServer::new(dsh_tools::ToolRegistry::new());
    let serving = server.serve_http(
        listener,
        HttpServeOptions::default().bearer_token(short),
        std::sync::Arc::new(super::Agents::default()),
        dsh_tools::CancellationToken::new(),
    );
    let error = tokio::time::timeout(super::GUARD, serving)
        .await
        .expect("it served instead of refusing")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the bearer token is 31 bytes long: it must be at least 32 (for example 64 hex digits from `openssl rand -hex 32`)"
    );
    let address = "127.0.0.1:1".parse().unwrap();
    assert!(HttpServeOptions::default().bearer_token(short).check(address).is_err());
    assert!(HttpServeOptions::default().bearer_token(TOKEN).check(address).is_ok());
}
