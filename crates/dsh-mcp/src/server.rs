//! The server half, and its rmcp adapter: serve the tools of a
//! [`ToolRegistry`] over MCP, one calling agent per session.

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool as McpToolDef,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::task::TaskTracker;

use crate::wording;

/// How long a closing session waits for its calls to wind down after
/// cancelling them.
const WIND_DOWN: Duration = Duration::from_secs(10);

/// The buffer between the client's input and the protocol reader.
const PIPE_BYTES: usize = 1 << 16;

/// How one served call ended, for whoever watches the server.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallEnd<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// What the tool returned (sent to the client unless the call was cancelled).
    pub result: &'a ToolResult,
    /// Whether the client cancelled the call (or closed the session) before it ended.
    pub cancelled: bool,
}

type CallWatcher = Arc<dyn Fn(CallEnd<'_>) + Send + Sync>;

/// Serves the tools of a [`ToolRegistry`] to MCP clients.
///
/// - `tools/list` gives each mounted tool's name, description and input
///   schema exactly as the registry holds them.
/// - `tools/call` runs the tool on behalf of the session's calling agent
///   ([`McpToolServer::serve`]'s `agent`); an error result (bad arguments
///   included) is `isError: true` with the tool's `Error: …` text.
/// - `notifications/cancelled` cancels the call's token; per MCP, no
///   response is sent for a cancelled request.
/// - A request with a `progressToken` gets a progress notification every
///   [`McpToolServer::progress_interval`] while the tool runs.
/// - When the client closes the session, every call still running is
///   cancelled and awaited before [`McpToolServer::serve`] returns.
#[derive(Clone)]
pub struct McpToolServer {
    tools: ToolRegistry,
    name: String,
    version: String,
    progress_interval: Duration,
    on_call_end: Option<CallWatcher>,
}

impl std::fmt::Debug for McpToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolServer")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .finish()
    }
}

impl McpToolServer {
    /// A server named `dsh` for the tools mounted in `tools` (read at each
    /// `tools/list`, so later mounts show), with progress every 5 s.
    pub fn new(tools: ToolRegistry) -> Self {
        Self {
            tools,
            name: "dsh".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            progress_interval: Duration::from_secs(5),
            on_call_end: None,
        }
    }

    /// The name and version announced at `initialize`.
    #[must_use]
    pub fn identity(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// How often a running call with a progress token reports progress.
    #[must_use]
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Called as each call ends, cancelled ones included (whose result the
    /// client never sees).
    #[must_use]
    pub fn on_call_end(mut self, watcher: impl Fn(CallEnd<'_>) + Send + Sync + 'static) -> Self {
        self.on_call_end = Some(Arc::new(watcher));
        self
    }

    /// Serves one session over `read`/`write` (newline-delimited JSON-RPC),
    /// with `agent` as the calling agent of every call, until the client
    /// closes it. Calls still running then are cancelled and awaited.
    pub async fn serve<R, W>(&self, agent: AgentRef, read: R, write: W) -> Result<(), McpServeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let session = Session {
            server: self.clone(),
            agent,
            cancel: CancellationToken::new(),
            calls: TaskTracker::new(),
        };
        let cancel = session.cancel.clone();
        let calls = session.calls.clone();
        // The client's bytes pass through a pipe so that its end of input
        // cancels the running calls at once: left to itself, rmcp first
        // waits a few seconds for their responses.
        let (mut feed, input) = tokio::io::duplex(PIPE_BYTES);
        let on_eof = cancel.clone();
        let mut read = read;
        tokio::spawn(async move {
            if let Err(error) = tokio::io::copy(&mut read, &mut feed).await {
                tracing::debug!("{}", wording::log_input_ended(&error));
            }
            on_eof.cancel();
        });
        let running = session
            .serve((input, write))
            .await
            .map_err(|error| McpServeError(error.to_string()))?;
        let quit = running.waiting().await;
        cancel.cancel();
        calls.close();
        if tokio::time::timeout(WIND_DOWN, calls.wait()).await.is_err() {
            tracing::warn!("{}", wording::log_calls_outlived_session(WIND_DOWN));
        }
        quit.map(drop).map_err(|error| McpServeError(error.to_string()))
    }
}

/// Why a session could not be served (the handshake or the connection failed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::session_failed(.0))]
pub struct McpServeError(String);

/// One client session: its calling agent and its running calls.
struct Session {
    server: McpToolServer,
    agent: AgentRef,
    cancel: CancellationToken,
    calls: TaskTracker,
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(Implementation::new(
            self.server.name.clone(),
            self.server.version.clone(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .server
            .tools
            .specs()
            .into_iter()
            .map(|spec| {
                let schema = match spec.parameters {
                    Value::Object(schema) => schema,
                    _ => Map::new(),
                };
                McpToolDef::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let args = request
            .arguments
            .map_or_else(|| Value::Object(Map::new()), Value::Object);
        let cancel = self.cancel.child_token();
        // A request abandoned by the service (the session ending) cancels its call too.
        let _cancel_if_dropped = cancel.clone().drop_guard();
        let exec = ToolExecution::new(cancel.clone()).with_agent(self.agent.clone());
        let tools = self.server.tools.clone();
        let tool = name.clone();
        // The call runs as its own task, so it always runs to its end (and
        // releases what it started) even if this request is dropped.
        let watcher = self.server.on_call_end.clone();
        let call_cancel = cancel.clone();
        let mut call = self.calls.spawn(async move {
            let result = tools.call(&tool, args, exec).await;
            // Here, not in the handler: the watcher sees every call end
            // before the session's wind-down completes.
            if let Some(watcher) = watcher {
                watcher(CallEnd {
                    tool: &tool,
                    result: &result,
                    cancelled: call_cancel.is_cancelled(),
                });
            }
            result
        });
        let progress_token = context.meta.get_progress_token();
        let started = tokio::time::Instant::now();
        let interval = self.server.progress_interval;
        let mut ticks = tokio::time::interval_at(started + interval, interval);
        let mut reported = 0_u32;
        let result = loop {
            tokio::select! {
                joined = &mut call => break joined.unwrap_or_else(|error| {
                    ToolResult::from(dsh_tools::ToolError::new(wording::call_task_failed(&name, &error.to_string())))
                }),
                () = context.ct.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
                _ = ticks.tick(), if progress_token.is_some() => {
                    if let Some(token) = &progress_token {
                        reported += 1;
                        let message = wording::progress(&name, started.elapsed());
                        let _ = context
                            .peer
                            .notify_progress(ProgressNotificationParam::new(token.clone(), f64::from(reported)).with_message(message))
                            .await;
                    }
                }
            }
        };
        let content = vec![ContentBlock::text(result.text)];
        Ok(CallToolResponse::Complete(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }))
    }
}
