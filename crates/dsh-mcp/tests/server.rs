//! The server half in process: rmcp's client over an in-memory pipe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_mcp::McpToolServer;
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
