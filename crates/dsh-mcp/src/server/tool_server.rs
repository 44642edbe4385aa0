//! The server half, and its rmcp adapter: serve the tools of a
//! [`ToolRegistry`] over MCP, one calling agent per session (stdio here,
//! Streamable HTTP in [`crate::server::http`]).

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::budget::CUT_META_KEY;
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, CallToolResponse, CallToolResult, ConstString, ContentBlock,
    CustomRequest, CustomResult, ErrorCode, Implementation, JsonObject, ListToolsRequestMethod, ListToolsResult,
    MetaObject, PaginatedRequestParams, PingRequestMethod, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool as McpToolDef,
};
use rmcp::service::{Peer, RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::server::call_progress::{CALL_PROGRESS, CallProgress};
use crate::server::{screen, stdio};
use crate::{BoxedCause, wording};

/// The shortest bearer token [`McpToolServer::serve_http`] accepts: 32
/// bytes (256 bits when random).
pub const MIN_TOKEN_BYTES: usize = 32;

/// How long a closing session waits for its calls to wind down after
/// cancelling them.
pub(crate) const WIND_DOWN: Duration = Duration::from_secs(10);

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
/// - `tools/call` runs the tool on behalf of the session's calling agent;
///   an error result (bad arguments included) is `isError: true` with the
///   tool's `Error: …` text. A tool that is not mounted is a JSON-RPC error
///   (`-32602`, invalid params) naming it.
/// - `notifications/cancelled` cancels the call's token; per MCP, no
///   response is sent for a cancelled request.
/// - A request with a `progressToken` gets progress notifications: what
///   the call reports through [`CallProgress`] (at most one notification
///   per [`McpToolServer::progress_gap`], coalescing), and a heartbeat
///   only when nothing was reported for [`McpToolServer::progress_interval`].
/// - When the session ends, every call still running is cancelled and
///   awaited.
///
/// [`McpToolServer::serve`] serves one session on a byte stream (stdio);
/// [`McpToolServer::serve_http`] serves many over Streamable HTTP.
#[derive(Clone)]
pub struct McpToolServer {
    pub(crate) tools: ToolRegistry,
    name: String,
    version: String,
    progress_interval: Duration,
    progress_gap: Duration,
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
    /// `tools/list`, so later mounts show), with a heartbeat after 5 s of
    /// silence and at most one progress notification per 250 ms.
    pub fn new(tools: ToolRegistry) -> Self {
        Self {
            tools,
            name: "dsh".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            progress_interval: Duration::from_secs(5),
            progress_gap: Duration::from_millis(250),
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

    /// How long a running call with a progress token may go without a
    /// notification before a heartbeat is sent.
    #[must_use]
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// The least time between two progress notifications of one call; what
    /// is reported meanwhile goes out together in the next one.
    #[must_use]
    pub fn progress_gap(mut self, gap: Duration) -> Self {
        self.progress_gap = gap;
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
        let state = Arc::new(SessionState::new(agent));
        let session = Session {
            server: self.clone(),
            state: state.clone(),
            on_drop: None,
        };
        // We read and write the lines ourselves (see `crate::server::stdio`): every
        // message is screened, and the end of input cancels the calls at once.
        let transport = stdio::transport(read, write, state.cancel.clone());
        let writer = transport.writer;
        let running = session
            .serve((transport.answers, transport.messages))
            .await
            .map_err(|error| McpServeError::Session(error.into()))?;
        let quit = running.waiting().await;
        state.wind_down().await;
        // Every answer is out before this returns.
        let _ = writer.await;
        quit.map(drop).map_err(|error| McpServeError::Session(error.into()))
    }
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    /// A session's handshake or connection failed (the SDK's error).
    #[error("{}", wording::session_failed(&.0.to_string()))]
    Session(#[source] BoxedCause),
    /// The HTTP server could not start, or its listener failed.
    #[error("{}", wording::http_serve_failed(&.0.to_string()))]
    Http(#[source] std::io::Error),
    /// The HTTP server would listen beyond loopback without a bearer token.
    #[error("{}", wording::needs_bearer_token(address))]
    NeedsBearerToken {
        /// The address it was to listen on.
        address: String,
    },
    /// The bearer token is shorter than
    /// [`MIN_TOKEN_BYTES`].
    #[error("{}", wording::token_too_short(*length, MIN_TOKEN_BYTES))]
    TokenTooShort {
        /// Its length in bytes.
        length: usize,
    },
}

/// One session: its calling agent and its running calls.
pub(crate) struct SessionState {
    pub(crate) agent: AgentRef,
    pub(crate) cancel: CancellationToken,
    calls: TaskTracker,
}

impl SessionState {
    pub(crate) fn new(agent: AgentRef) -> Self {
        Self {
            agent,
            cancel: CancellationToken::new(),
            calls: TaskTracker::new(),
        }
    }

    /// Cancels the session's calls and waits (at most [`WIND_DOWN`]) for them to end.
    pub(crate) async fn wind_down(&self) {
        self.cancel.cancel();
        self.calls.close();
        if tokio::time::timeout(WIND_DOWN, self.calls.wait()).await.is_err() {
            tracing::warn!("{}", wording::log_calls_outlived_session(WIND_DOWN));
        }
    }
}

/// What ends a session when its handler goes (the HTTP sessions).
pub(crate) trait EndOnDrop: Send + Sync + 'static {
    fn end(&self, state: &Arc<SessionState>);
}

/// The rmcp handler of one session.
pub(crate) struct Session {
    pub(crate) server: McpToolServer,
    pub(crate) state: Arc<SessionState>,
    pub(crate) on_drop: Option<Arc<dyn EndOnDrop>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(end) = &self.on_drop {
            end.end(&self.state);
        }
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(Implementation::new(
            self.server.name.clone(),
            self.server.version.clone(),
        ))
    }

    /// A request rmcp could not type: of a method this server serves, its
    /// params are wrong (`-32602`, naming what); of any other, the method
    /// is not served (`-32601`).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let params = request.params.as_ref();
        let error = match request.method.as_str() {
            CallToolRequestMethod::VALUE => screen::bad_params::<CallToolRequestParams>(params),
            ListToolsRequestMethod::VALUE => screen::bad_params::<PaginatedRequestParams>(params),
            PingRequestMethod::VALUE => screen::bad_params::<serde_json::Map<String, Value>>(params),
            _ => return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None)),
        };
        Err(ErrorData::invalid_params(
            wording::invalid_params(&request.method, &error),
            None,
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
        if self.server.tools.get(&name).is_none() {
            return Err(ErrorData::invalid_params(wording::unknown_tool(&name), None));
        }
        if self.state.cancel.is_cancelled() {
            return Err(ErrorData::internal_error(wording::SESSION_ENDED, None));
        }
        let args = request
            .arguments
            .map_or_else(|| Value::Object(Map::new()), Value::Object);
        let cancel = self.state.cancel.child_token();
        // A request abandoned by the service (the session ending) cancels its call too.
        let _cancel_if_dropped = cancel.clone().drop_guard();
        let progress_token = context.meta.get_progress_token();
        let (progress, reports) = match &progress_token {
            Some(_) => {
                let (tx, rx) = mpsc::unbounded_channel();
                (Some(CallProgress::new(tx)), Some(rx))
            }
            None => (None, None),
        };
        let call = self.spawn_call(&name, args, &cancel, progress);
        let notifier = progress_token.map(|token| Notifier::new(token, &context.peer, &self.server, &name));
        let result = finish_call(call, notifier, reports, &name, &cancel, &context.ct).await;
        Ok(CallToolResponse::Complete(mcp_result(result)))
    }
}

impl Session {
    /// Runs the call as its own task, so that it always runs to its end
    /// (and releases what it started) even if its request is dropped. The
    /// server's watcher sees it end.
    fn spawn_call(
        &self,
        name: &str,
        args: Value,
        cancel: &CancellationToken,
        progress: Option<CallProgress>,
    ) -> JoinHandle<ToolResult> {
        let exec = ToolExecution::new(cancel.clone()).with_agent(self.state.agent.clone());
        let tools = self.server.tools.clone();
        let tool = name.to_owned();
        let watcher = self.server.on_call_end.clone();
        let call_cancel = cancel.clone();
        self.state.calls.spawn(async move {
            let run = tools.call(&tool, args, exec);
            let result = match progress {
                Some(progress) => CALL_PROGRESS.scope(progress, run).await,
                None => run.await,
            };
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
        })
    }
}

/// Waits for the call `name` to end. Meanwhile its progress `reports` go
/// out as notifications when the client asked for them (`notifier`), and a
/// request the client cancels (`client_cancel`) cancels the call. What the
/// call reported last goes out before its result.
async fn finish_call(
    mut call: JoinHandle<ToolResult>,
    mut notifier: Option<Notifier>,
    mut reports: Option<mpsc::UnboundedReceiver<String>>,
    name: &str,
    cancel: &CancellationToken,
    client_cancel: &CancellationToken,
) -> ToolResult {
    let result = loop {
        let next_report = async {
            match reports.as_mut() {
                Some(reports) => reports.recv().await,
                None => std::future::pending().await,
            }
        };
        let due = notifier.as_ref().map(Notifier::due);
        let mut reporting_ended = false;
        tokio::select! {
            joined = &mut call => break joined.unwrap_or_else(|error| {
                ToolResult::from(dsh_tools::ToolError::new(wording::call_task_failed(name, &error.to_string())))
            }),
            () = client_cancel.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
            report = next_report => match (report, notifier.as_mut()) {
                (Some(report), Some(notifier)) => notifier.add(report),
                _ => reporting_ended = true,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                if let Some(notifier) = notifier.as_mut() {
                    notifier.send().await;
                }
            }
        }
        if reporting_ended {
            reports = None;
        }
    };
    if let Some(notifier) = notifier.as_mut() {
        // What the call reported last (its children settling) goes out
        // before the answer.
        while let Some(report) = reports.as_mut().and_then(|reports| reports.try_recv().ok()) {
            notifier.add(report);
        }
        if !notifier.pending.is_empty() && !cancel.is_cancelled() {
            notifier.send().await;
        }
    }
    result
}

/// A call's result as MCP's: its text, flagged when it is an error. A
/// result cut to its budget says how in `_meta`, beside the text (whose
/// notice says it too): the full size, the size shown, the task that keeps
/// the rest.
fn mcp_result(result: ToolResult) -> CallToolResult {
    let content = vec![ContentBlock::text(result.text)];
    let mut response = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    if let Some(cut) = &result.cut {
        let summary = JsonObject::from_iter([(CUT_META_KEY.to_owned(), cut.summary())]);
        response.meta = Some(MetaObject(summary));
    }
    response
}

/// The progress notifications of one call: reports are sent at most one
/// notification per `gap` (those that arrive meanwhile go out together),
/// and a heartbeat after `interval` without any.
struct Notifier {
    token: ProgressToken,
    peer: Peer<RoleServer>,
    tool: String,
    started: tokio::time::Instant,
    last: tokio::time::Instant,
    gap: Duration,
    interval: Duration,
    sent: u32,
    pending: Vec<String>,
    /// Reports left out of `pending` since the last notification.
    skipped: usize,
}

/// The most reports one notification carries; older ones are counted.
const MAX_REPORTS: usize = 8;

impl Notifier {
    fn new(token: ProgressToken, peer: &Peer<RoleServer>, server: &McpToolServer, tool: &str) -> Self {
        let now = tokio::time::Instant::now();
        Self {
            token,
            peer: peer.clone(),
            tool: tool.to_owned(),
            started: now,
            // The first report goes out at once.
            last: now.checked_sub(server.progress_gap).unwrap_or(now),
            gap: server.progress_gap,
            interval: server.progress_interval,
            sent: 0,
            pending: Vec::new(),
            skipped: 0,
        }
    }

    /// Adds a report to the next notification.
    fn add(&mut self, report: String) {
        if self.pending.len() == MAX_REPORTS {
            self.pending.remove(0);
            self.skipped += 1;
        }
        self.pending.push(report);
    }

    /// When the next notification is due: the pending reports after the
    /// gap, else a heartbeat after the interval.
    fn due(&self) -> tokio::time::Instant {
        if self.pending.is_empty() {
            self.last.max(self.started) + self.interval
        } else {
            self.last + self.gap
        }
    }

    /// Sends the pending reports, or a heartbeat when there are none.
    async fn send(&mut self) {
        let message = if self.pending.is_empty() {
            wording::progress(&self.tool, self.started.elapsed())
        } else {
            wording::progress_reports(&std::mem::take(&mut self.pending), std::mem::take(&mut self.skipped))
        };
        self.sent += 1;
        self.last = tokio::time::Instant::now();
        let params = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent)).with_message(message);
        let _ = self.peer.notify_progress(params).await;
    }
}
