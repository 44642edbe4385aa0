//! The server half in process: rmcp's client over an in-memory pipe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_mcp::{McpServeError, McpToolServer};
use dsh_tools::{AgentRef, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const GUARD: Duration = Duration::from_secs(30);

/// `whoami` answers the calling agent's id; `wait` runs until cancelled.
struct TestTool {
    name: &'static str,
    parameters: Value,
}

impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A test tool."
    }
    fn parameters(&self) -> &Value {
        &self.parameters
    }
    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            match self.name {
                "whoami" => match args.get("greeting").and_then(Value::as_str) {
                    Some(greeting) => Ok(ToolOutput::text(format!(
                        "{greeting}, {}",
                        exec.agent().map(|agent| agent.id().to_string()).unwrap_or_default()
                    ))),
                    None => Err(ToolError::invalid_arguments("whoami argument \"greeting\" is required")),
                },
                _ => {
                    exec.cancel().cancelled().await;
                    Err(ToolError::new("wait was cancelled"))
                }
            }
        })
    }
}

fn registry() -> (ToolRegistry, Vec<dsh_tools::ToolRegistration>) {
    let tools = ToolRegistry::new();
    let registrations = vec![
        tools
            .register(Arc::new(TestTool {
                name: "whoami",
                parameters: json!({"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}),
            }))
            .unwrap(),
        tools
            .register(Arc::new(TestTool {
                name: "wait",
                parameters: json!({"type": "object", "properties": {}}),
            }))
            .unwrap(),
    ];
    (tools, registrations)
}

struct Client(mpsc::UnboundedSender<ProgressNotificationParam>);

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(params);
    }
}

type Ended = Arc<Mutex<Vec<(String, String, bool)>>>;

/// Starts one session for `agent`; returns the client, its progress, and the server task.
async fn session(
    server: &McpToolServer,
    agent: &str,
) -> (
    RunningService<RoleClient, Client>,
    mpsc::UnboundedReceiver<ProgressNotificationParam>,
    tokio::task::JoinHandle<()>,
) {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let server = server.clone();
    let agent = AgentRef::new(agent);
    let task = tokio::spawn(async move { server.serve(agent, read, write).await.unwrap() });
    let (tx, rx) = mpsc::unbounded_channel();
    let client = Client(tx).serve(client_io).await.unwrap();
    (client, rx, task)
}

fn watched(tools: ToolRegistry) -> (McpToolServer, Ended) {
    let ended: Ended = Arc::default();
    let sink = ended.clone();
    let server = McpToolServer::new(tools)
        .progress_interval(Duration::from_millis(20))
        .on_call_end(move |end| {
            sink.lock()
                .unwrap()
                .push((end.tool.to_owned(), end.result.text.clone(), end.cancelled));
        });
    (server, ended)
}

async fn call(client: &RunningService<RoleClient, Client>, tool: &str, args: Value) -> (String, bool) {
    let Value::Object(args) = args else { panic!() };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    (text, result.is_error == Some(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_as_registered_and_called_for_the_sessions_agent() {
    let (tools, _registrations) = registry();
    let (server, _) = watched(tools.clone());
    let (first, _, first_task) = session(&server, "session-a").await;
    let (second, _, second_task) = session(&server, "session-b").await;

    let listed = first.peer().list_all_tools().await.unwrap();
    let listed: Vec<(String, String, Value)> = listed
        .into_iter()
        .map(|tool| {
            (
                tool.name.to_string(),
                tool.description.unwrap_or_default().to_string(),
                Value::Object((*tool.input_schema).clone()),
            )
        })
        .collect();
    let registered: Vec<(String, String, Value)> = tools
        .specs()
        .into_iter()
        .map(|spec| (spec.name, spec.description, spec.parameters))
        .collect();
    assert_eq!(listed, registered);

    assert_eq!(
        call(&first, "whoami", json!({"greeting": "hi"})).await,
        ("hi, session-a".into(), false)
    );
    assert_eq!(
        call(&second, "whoami", json!({"greeting": "hi"})).await,
        ("hi, session-b".into(), false)
    );
    assert_eq!(
        call(&first, "whoami", json!({})).await,
        ("Error: whoami argument \"greeting\" is required".into(), true)
    );
    // A tool that is not mounted is a JSON-RPC error (invalid params), not a tool result.
    let unknown = first
        .peer()
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap_err();
    let rmcp::service::ServiceError::McpError(error) = unknown else {
        panic!("not a JSON-RPC error: {unknown:?}")
    };
    assert_eq!(
        (error.code.0, error.message.as_ref()),
        (-32602, "unknown tool \"nope\"")
    );
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
    tokio::time::timeout(GUARD, first_task).await.unwrap().unwrap();
    tokio::time::timeout(GUARD, second_task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_reports_progress_then_ends_cancelled_without_a_response() {
    let (tools, _registrations) = registry();
    let (server, ended) = watched(tools);
    let (client, mut progress, task) = session(&server, "a").await;
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("wait"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let first = tokio::time::timeout(GUARD, progress.recv()).await.unwrap().unwrap();
    assert_eq!(first.progress_token, handle.progress_token);
    assert_eq!(first.progress, 1.0);
    assert_eq!(first.message.as_deref(), Some("wait still running after 0 s"));
    handle.cancel(Some("no longer needed".into())).await.unwrap();
    let deadline = tokio::time::Instant::now() + GUARD;
    while ended.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        ended.lock().unwrap()[0],
        ("wait".to_owned(), "Error: wait was cancelled".to_owned(), true)
    );
    client.cancel().await.unwrap();
    tokio::time::timeout(GUARD, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_session_cancels_its_running_calls_before_serve_returns() {
    let (tools, _registrations) = registry();
    let (server, ended) = watched(tools);
    let (client, _progress, task) = session(&server, "a").await;
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("wait")).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.cancel().await.unwrap();
    tokio::time::timeout(GUARD, task).await.unwrap().unwrap();
    assert_eq!(
        *ended.lock().unwrap(),
        [("wait".to_owned(), "Error: wait was cancelled".to_owned(), true)],
        "serve returned only after the call ended"
    );
    assert!(pending.await.unwrap().is_err());
}

/// Writes `lines` to a session served on an in-memory pipe and reads what
/// it answers until `count` answers have come.
async fn raw_session(lines: Vec<String>, count: usize) -> Vec<Value> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let (tools, _registrations) = registry();
    let server = McpToolServer::new(tools);
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    let task = tokio::spawn(async move { server.serve(AgentRef::new("raw"), read, write).await });
    let (client_read, mut client_write) = tokio::io::split(client_io);
    let writer = tokio::spawn(async move {
        for line in lines {
            client_write.write_all(line.as_bytes()).await.unwrap();
            client_write.write_all(b"\n").await.unwrap();
        }
        client_write
    });
    let mut answers = Vec::new();
    let mut reader = BufReader::new(client_read).lines();
    while answers.len() < count {
        let line = tokio::time::timeout(GUARD, reader.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        answers.push(serde_json::from_str(&line).unwrap());
    }
    drop(tokio::time::timeout(GUARD, writer).await.unwrap().unwrap());
    drop(reader);
    tokio::time::timeout(GUARD, task).await.unwrap().unwrap().unwrap();
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_line_past_16_mib_and_a_bad_message_are_answered_with_their_ids_and_serving_goes_on() {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let huge = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "whoami", "arguments": {"greeting": "a".repeat(17 << 20)}}});
    let lines = vec![
        initialize.to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        huge.to_string(),
        json!({"jsonrpc": "2.0", "id": 6, "method": 42}).to_string(),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "whoami", "arguments": {"greeting": "still here"}}}).to_string(),
    ];
    let answers = raw_session(lines, 5).await;
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|answer| answer["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
    };
    assert_eq!(
        by_id(5)["error"],
        json!({"code": -32600, "message": "Invalid Request: the message is larger than the limit of 16 MiB (16777216 bytes) and was not read"})
    );
    assert_eq!(by_id(6)["error"]["code"], json!(-32600));
    assert_eq!(by_id(7)["error"]["code"], json!(-32602));
    assert!(
        by_id(7)["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid params for tools/call: "),
        "{answers:?}"
    );
    assert_eq!(by_id(8)["result"]["content"][0]["text"], json!("still here, raw"));
}

#[tokio::test]
async fn a_session_closed_before_the_handshake_fails_with_the_sdk_error_as_its_source() {
    let server = McpToolServer::new(ToolRegistry::new());
    let (server_io, client_io) = tokio::io::duplex(1 << 10);
    drop(client_io);
    let (read, write) = tokio::io::split(server_io);
    let error = tokio::time::timeout(GUARD, server.serve(AgentRef::new("a"), read, write))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(error, McpServeError::Session(_)), "{error:?}");
    let source = std::error::Error::source(&error).expect("the SDK's error");
    assert_eq!(error.to_string(), format!("MCP session failed: {source}"));
}
