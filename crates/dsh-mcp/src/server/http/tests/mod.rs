//! Streamable HTTP both ways on a loopback port: our client (`McpMount`) and
//! rmcp's client against `McpToolServer::serve_http`, and the server's
//! refusals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_tools::{AgentRef, CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::client::http::HttpClient;
use crate::{
    CallProgress, ClientOptions, HttpServeOptions, McpMount, McpServeError, McpServerSpec, McpToolServer, RemoteServer,
    SessionAgents, StartFailure,
};

mod fuzz;
mod liveness;
mod refusals;

const GUARD: Duration = Duration::from_secs(30);

/// `whoami` answers the calling agent's id, `wait` runs until cancelled,
/// `steps` reports three steps and answers.
struct TestTool(&'static str);

impl Tool for TestTool {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "A test tool."
    }
    fn parameters(&self) -> &Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        SCHEMA.get_or_init(|| json!({"type": "object", "properties": {}}))
    }
    fn execute(&self, _args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            match self.0 {
                "whoami" => Ok(ToolOutput::text(
                    exec.agent().map(|agent| agent.id().to_string()).unwrap_or_default(),
                )),
                "steps" => {
                    let progress = CallProgress::current();
                    for step in ["one", "two", "three"] {
                        if let Some(progress) = &progress {
                            progress.report(step);
                        }
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                    Ok(ToolOutput::text("stepped"))
                }
                _ => {
                    exec.cancel().cancelled().await;
                    Err(ToolError::new("wait was cancelled"))
                }
            }
        })
    }
}

/// Opens `session-1`, `session-2`, … and records which were closed.
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

type Ended = Arc<Mutex<Vec<(String, bool)>>>;

pub(super) struct Running {
    url: String,
    agents: Arc<Agents>,
    ended: Ended,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), McpServeError>>,
    _registrations: Vec<dsh_tools::ToolRegistration>,
}

pub(super) async fn serve(options: HttpServeOptions) -> Running {
    let tools = ToolRegistry::new();
    let registrations = ["whoami", "wait", "steps"]
        .into_iter()
        .map(|name| tools.register(Arc::new(TestTool(name))).unwrap())
        .collect();
    let ended: Ended = Arc::default();
    let sink = ended.clone();
    let server = McpToolServer::new(tools)
        .progress_interval(Duration::from_secs(60))
        .progress_gap(Duration::from_millis(40))
        .on_call_end(move |end| sink.lock().unwrap().push((end.tool.to_owned(), end.cancelled)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let agents = Arc::new(Agents::default());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn({
        let agents = agents.clone() as Arc<dyn SessionAgents>;
        let shutdown = shutdown.clone();
        async move { server.serve_http(listener, options, agents, shutdown).await }
    });
    Running {
        url,
        agents,
        ended,
        shutdown,
        task,
        _registrations: registrations,
    }
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(GUARD, self.task).await.unwrap().unwrap().unwrap();
    }

    fn closed(&self) -> Vec<String> {
        self.agents.closed.lock().unwrap().clone()
    }

    fn opened(&self) -> u32 {
        *self.agents.opened.lock().unwrap()
    }

    /// The `host:port` the server listens on.
    fn authority(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

/// What a raw HTTP request got back: the status, the headers, and as much
/// of the body as arrived within 300 ms (an SSE answer stays open).
#[derive(Debug)]
pub(super) struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    /// The `Mcp-Session-Id` the server gave.
    fn session(&self) -> Option<String> {
        self.headers
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    }

    fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }

    /// The JSON-RPC message of the body: the body itself, or the first SSE
    /// event that carries data.
    fn message(&self) -> Value {
        if self.content_type().starts_with("text/event-stream") {
            let data = self
                .body
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim)
                .find(|data| !data.is_empty())
                .unwrap_or_else(|| panic!("no event in {self:?}"));
            serde_json::from_str(data).unwrap()
        } else {
            serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {self:?}"))
        }
    }
}

/// `initialize`, as a raw body.
fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string()
}

/// Sends one request on a connection of its own, with the headers an MCP
/// client sends and `headers` on top.
pub(super) async fn send(method: reqwest::Method, url: &str, headers: &[(&str, &str)], body: Option<String>) -> Answer {
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut request = client
        .request(method, url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    let response = tokio::time::timeout(GUARD, request.send()).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    let mut response = response;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        body.extend_from_slice(&chunk);
    }
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Opens a session (`initialize`, then `notifications/initialized`); its id.
pub(super) async fn open(url: &str) -> String {
    let answer = send(reqwest::Method::POST, url, &[], Some(initialize_body())).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let session = answer.session().unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let answer = send(
        reqwest::Method::POST,
        url,
        &[("Mcp-Session-Id", &session)],
        Some(initialized),
    )
    .await;
    assert_eq!(answer.status, 202, "{answer:?}");
    session
}

/// `tools/list` in `session`.
pub(super) async fn list_tools(url: &str, session: &str) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    send(reqwest::Method::POST, url, &[("Mcp-Session-Id", session)], Some(body)).await
}

fn remote(url: &str) -> McpServerSpec {
    McpServerSpec::remote("r", RemoteServer::new(url).unwrap()).unwrap()
}

fn exec() -> ToolExecution {
    ToolExecution::new(CancellationToken::new())
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether the notifications heard are 1, 2, … n without a gap and one of
/// them ends with `last`.
fn all_heard(heard: &[ProgressNotificationParam], last: &str) -> bool {
    let numbered = (1..=heard.len()).all(|n| heard.iter().any(|params| params.progress == n as f64));
    numbered
        && heard
            .iter()
            .any(|params| params.message.as_deref().is_some_and(|message| message.ends_with(last)))
}

/// rmcp's client over our HTTP client, collecting progress.
struct Client(mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(params);
    }
}

async fn rmcp_client(
    url: &str,
) -> (
    RunningService<RoleClient, Client>,
    mpsc::UnboundedReceiver<ProgressNotificationParam>,
) {
    let transport = StreamableHttpClientTransport::with_client(
        HttpClient::new().unwrap(),
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    (Client(tx).serve(transport).await.unwrap(), rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_mounts_our_server_and_each_session_has_its_own_agent() {
    let server = serve(HttpServeOptions::default()).await;
    let first_tools = ToolRegistry::new();
    let first = McpMount::start(&remote(&server.url), &first_tools, &ClientOptions::default())
        .await
        .unwrap();
    assert_eq!(first.tool_names(), ["mcp__r__steps", "mcp__r__wait", "mcp__r__whoami"]);
    let second_tools = ToolRegistry::new();
    let second = McpMount::start(&remote(&server.url), &second_tools, &ClientOptions::default())
        .await
        .unwrap();
    let me = first_tools.call("mcp__r__whoami", json!({}), exec()).await;
    let other = second_tools.call("mcp__r__whoami", json!({}), exec()).await;
    assert_eq!((me.text.as_str(), other.text.as_str()), ("session-1", "session-2"));
    // Releasing a mount ends its session (DELETE), and only that one.
    first.release().await.unwrap();
    eventually("session-1 released", || server.closed() == ["session-1"]).await;
    let still = second_tools.call("mcp__r__whoami", json!({}), exec()).await;
    assert_eq!(still.text, "session-2");
    drop(second);
    eventually("session-2 released", || server.closed().len() == 2).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_reaches_the_server_and_delete_cancels_what_runs() {
    let server = serve(HttpServeOptions::default()).await;
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&remote(&server.url), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let call = tokio::spawn({
        let tools = tools.clone();
        let exec = ToolExecution::new(cancel.clone());
        async move { tools.call("mcp__r__wait", json!({}), exec).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel.cancel();
    let result = tokio::time::timeout(GUARD, call).await.unwrap().unwrap();
    assert_eq!(
        result.text,
        "Error: the call to MCP tool \"wait\" of server \"r\" was cancelled"
    );
    eventually("the server saw the cancellation", || {
        *server.ended.lock().unwrap() == [("wait".to_owned(), true)]
    })
    .await;

    // A call still running when the client ends the session is cancelled by the DELETE.
    let pending = tokio::spawn({
        let tools = tools.clone();
        async move { tools.call("mcp__r__wait", json!({}), exec()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(GUARD, mount.release()).await.unwrap().unwrap();
    eventually("the second call ended cancelled", || {
        server.ended.lock().unwrap().len() == 2
    })
    .await;
    assert_eq!(server.ended.lock().unwrap()[1], ("wait".to_owned(), true));
    eventually("the session released", || server.closed() == ["session-1"]).await;
    let _ = pending.await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_arrive_coalesced_and_an_unknown_tool_is_a_json_rpc_error() {
    let server = serve(HttpServeOptions::default()).await;
    let (client, mut progress) = rmcp_client(&server.url).await;
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("steps"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let token = handle.progress_token.clone();
    let answer = tokio::time::timeout(GUARD, handle.await_response())
        .await
        .unwrap()
        .unwrap();
    assert!(format!("{answer:?}").contains("stepped"), "{answer:?}");
    // The client may hear notifications after the answer, and not in the
    // order they were sent: collect them all, then order them by progress.
    let mut heard: Vec<ProgressNotificationParam> = Vec::new();
    while !all_heard(&heard, "three") {
        let params = tokio::time::timeout(GUARD, progress.recv())
            .await
            .unwrap_or_else(|_| panic!("not all heard: {heard:?}"))
            .unwrap();
        assert_eq!(params.progress_token, token);
        heard.push(params);
    }
    heard.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let messages: Vec<String> = heard
        .into_iter()
        .map(|params| params.message.unwrap_or_default())
        .collect();
    // Every step arrives, in order, none twice; none is a heartbeat.
    assert_eq!(
        messages.join("; ").split("; ").collect::<Vec<_>>(),
        ["one", "two", "three"]
    );

    let unknown = client
        .peer()
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap_err();
    let ServiceError::McpError(error) = unknown else {
        panic!("not a JSON-RPC error: {unknown:?}")
    };
    assert_eq!(error.code.0, -32602);
    assert_eq!(error.message, "unknown tool \"nope\"");
    client.cancel().await.unwrap();
    server.stop().await;
}

async fn post(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    // An SSE answer stays open: read only what is there.
    let body = match tokio::time::timeout(Duration::from_millis(300), response.text()).await {
        Ok(Ok(body)) => body,
        _ => String::new(),
    };
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_server_refuses_every_request_without_it() {
    // The token is the value of a variable cargo sets for test processes, so
    // that the client can read it from there (setting one needs `unsafe`);
    // the description is longer than the 32 bytes a token needs.
    let variable = "CARGO_PKG_DESCRIPTION";
    let secret = std::env::var(variable).unwrap();
    let server = serve(HttpServeOptions::default().bearer_token(secret.clone())).await;
    assert_eq!(post(&server.url, &[]).await.0, 401);
    assert_eq!(post(&server.url, &[("Authorization", "Bearer wrong")]).await.0, 401);
    assert_eq!(post(&server.url, &[("Authorization", &secret)]).await.0, 401);
    let delete = reqwest::Client::new()
        .delete(&server.url)
        .header("Mcp-Session-Id", "whatever")
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status().as_u16(), 401);
    assert_eq!(
        delete.headers().get("www-authenticate").and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    let bearer = format!("Bearer {secret}");
    assert_eq!(post(&server.url, &[("Authorization", &bearer)]).await.0, 200);

    // Our client without the token: exit-2 material, naming the server.
    let tools = ToolRegistry::new();
    let error = McpMount::start(&remote(&server.url), &tools, &ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "MCP server \"r\" failed to start: {} answered HTTP 401 Unauthorized (missing or wrong credentials: see bearer_token_env)",
            server.url
        )
    );
    // With it, read from the named variable.
    let spec = McpServerSpec::remote(
        "r",
        RemoteServer::new(&server.url)
            .unwrap()
            .bearer_token_env(variable)
            .unwrap(),
    )
    .unwrap();
    let mount = McpMount::start(&spec, &tools, &ClientOptions::default()).await.unwrap();
    assert_eq!(tools.call("mcp__r__whoami", json!({}), exec()).await.text, "session-2");
    mount.release().await.unwrap();
    let unset = McpServerSpec::remote(
        "r",
        RemoteServer::new(&server.url)
            .unwrap()
            .bearer_token_env("DSH_MCP_HTTP_TEST_UNSET")
            .unwrap(),
    )
    .unwrap();
    let error = McpMount::start(&unset, &tools, &ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "MCP server \"r\" failed to start: the environment variable DSH_MCP_HTTP_TEST_UNSET (its bearer token) is not set or empty"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebinding_origins_and_hosts_are_refused_and_loopback_ones_accepted() {
    let server = serve(HttpServeOptions::default()).await;
    let authority = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    assert_eq!(post(&server.url, &[("Origin", "http://evil.example.com")]).await.0, 403);
    assert_eq!(post(&server.url, &[("Host", "evil.example.com")]).await.0, 403);
    let origin = format!("http://{authority}");
    assert_eq!(
        post(&server.url, &[("Origin", &origin), ("Host", &authority)]).await.0,
        200
    );
    let other_path = server.url.replace("/mcp", "/other");
    assert_eq!(post(&other_path, &[]).await.0, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_bound_are_refused_until_one_ends() {
    let server = serve(HttpServeOptions::default().max_sessions(1)).await;
    let tools = ToolRegistry::new();
    let first = McpMount::start(&remote(&server.url), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let (status, body) = post(&server.url, &[]).await;
    assert_eq!(status, 503);
    assert!(
        body.contains("too many MCP sessions (1 are open): end one (HTTP DELETE) or try again later"),
        "{body}"
    );
    // A rebinding attempt is refused as such, not for want of room.
    assert_eq!(post(&server.url, &[("Origin", "http://evil.example.com")]).await.0, 403);
    let refused = McpMount::start(&remote(&server.url), &ToolRegistry::new(), &ClientOptions::default())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("HTTP 503 Service Unavailable"),
        "{refused}"
    );
    first.release().await.unwrap();
    eventually("the first session ended", || server.closed() == ["session-1"]).await;
    let again = McpMount::start(&remote(&server.url), &tools, &ClientOptions::default())
        .await
        .unwrap();
    again.release().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_beyond_loopback_needs_a_token() {
    let tools = ToolRegistry::new();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let error = McpToolServer::new(tools)
        .serve_http(
            listener,
            HttpServeOptions::default(),
            Arc::new(Agents::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        error.to_string().starts_with("refusing to serve MCP on 0.0.0.0:"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_and_missing_endpoints_name_the_server_and_the_cause() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let tools = ToolRegistry::new();
    let error = McpMount::start(&remote(&url), &tools, &ClientOptions::default())
        .await
        .unwrap_err();
    // The SDK's error for the failed step stays reachable below the words.
    assert!(
        matches!(&error.cause, StartFailure::Unreachable { source, .. } if !source.to_string().is_empty()),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.starts_with(&format!("MCP server \"r\" failed to start: cannot reach {url}: ")),
        "{error}"
    );
    let server = serve(HttpServeOptions::default()).await;
    let missing = server.url.replace("/mcp", "/nothing-here");
    let error = McpMount::start(&remote(&missing), &tools, &ClientOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "MCP server \"r\" failed to start: {missing} answered HTTP 404 Not Found (no MCP endpoint at that URL?)"
        )
    );
    assert!(
        matches!(error.cause, StartFailure::Refused { status: 404, .. }),
        "{error:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_ends_every_session() {
    let server = serve(HttpServeOptions::default()).await;
    let tools = ToolRegistry::new();
    let _mount = McpMount::start(&remote(&server.url), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let running = tokio::spawn({
        let tools = tools.clone();
        async move { tools.call("mcp__r__wait", json!({}), exec()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let agents = server.agents.clone();
    let ended = server.ended.clone();
    server.stop().await;
    assert_eq!(
        *agents.closed.lock().unwrap(),
        ["session-1"],
        "released before serve_http returned"
    );
    assert_eq!(*ended.lock().unwrap(), [("wait".to_owned(), true)]);
    // The client's call fails (the server is gone) rather than hanging.
    let failed = tokio::time::timeout(GUARD, running).await.unwrap().unwrap();
    assert!(failed.is_error, "{}", failed.text);
}
