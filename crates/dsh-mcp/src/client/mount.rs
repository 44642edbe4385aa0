//! The client half, and its rmcp adapter: connect to an MCP server (a child
//! process on stdio, or a remote server over Streamable HTTP) and mount its
//! tools into a [`ToolRegistry`] as `mcp__<server>__<tool>`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dsh_process::{Program, TeardownError};
use dsh_tools::{ShelfPlace, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistration, ToolRegistry, json_kind};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock, Implementation,
    ProtocolVersion, ResourceContents, Tool as McpToolDef,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};

use crate::client::error::{HandshakeStep, McpReleaseError, McpStartError, StartFailure};
use crate::client::http::{Failure, HttpClient};
use crate::client::process::ServerProcess;
use crate::{BoxedCause, ClientOptions, ErrorCode, McpEndpoint, McpServerSpec, RemoteServer, wording};

/// How long to wait, after the connection breaks, for the server's exit
/// status, so that the error can say how it ended.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// How often a broken event stream of a remote server is reopened before
/// its calls fail.
const SSE_RETRIES: usize = 4;

/// What is behind a connection: the server process we started, or a
/// remote server.
enum Backend {
    Process(ServerProcess),
    Remote { url: String, http: HttpClient },
}

impl Backend {
    /// Whether the server is known to be gone.
    fn is_gone(&self) -> bool {
        match self {
            Self::Process(process) => process.exit().is_some(),
            Self::Remote { .. } => false,
        }
    }

    /// Resolves when a server process ends; never for a remote server.
    async fn exited(&self) {
        match self {
            Self::Process(process) => {
                process.exited().await;
            }
            Self::Remote { .. } => std::future::pending().await,
        }
    }
}

/// One live connection: the protocol session and the server behind it.
struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    backend: Backend,
    options: ClientOptions,
}

impl Connection {
    /// Closes the session (which closes a process's stdin, or ends the
    /// remote session), then tears a process group down.
    async fn release(&self) -> Result<(), TeardownError> {
        let service = self.service.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(service) = service {
            let _ = service.cancel().await;
        }
        match &self.backend {
            Backend::Process(process) => process.teardown().await,
            Backend::Remote { .. } => Ok(()),
        }
    }

    /// How the server went away: a process's end (waiting briefly for its
    /// exit status), or what failed on the way to a remote one.
    async fn gone(&self) -> String {
        match &self.backend {
            Backend::Process(process) => {
                let _ = tokio::time::timeout(EXIT_WAIT, process.exited()).await;
                process.describe_exit().await
            }
            Backend::Remote { url, http } => remote_failure(url, http.failure().as_ref()),
        }
    }

    /// The error for a call whose connection broke.
    async fn broke_mid_call(&self, tool: &str) -> ToolError {
        let how = self.gone().await;
        let text = match &self.backend {
            Backend::Process(_) => wording::server_exited_mid_call(&self.server, tool, &how),
            Backend::Remote { .. } => wording::connection_lost_mid_call(&self.server, tool, &how),
        };
        ToolError::new(text).with_code(ErrorCode::ServerGone)
    }
}

/// What went wrong on the way to a remote server, in words.
fn remote_failure(url: &str, failure: Option<&Failure>) -> String {
    match failure {
        Some(Failure::Unreachable(error)) => wording::unreachable(url, error),
        Some(Failure::Status(status)) => wording::http_refused(url, *status),
        None => wording::connection_closed(url),
    }
}

/// Who we are at `initialize`, asking for the newest protocol version that
/// has the `initialize` handshake (the SDK's newest drops it), so that every
/// server that speaks it can answer with its own.
fn identity() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("dsh", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// A started session, the server's tools, and what is behind it.
type Started = (RunningService<RoleClient, ClientConfig>, Vec<McpToolDef>, Backend);

/// Runs the server's program and does the handshake on its stdio.
async fn start_process(
    spec: &McpServerSpec,
    program: &Program,
    options: &ClientOptions,
) -> Result<Started, StartFailure> {
    let (process, stdin, stdout) =
        ServerProcess::spawn(&spec.name, program).map_err(|source| StartFailure::CannotRun {
            program: program.command.to_string_lossy().into_owned(),
            source,
        })?;
    let handshake = async {
        let service = identity().serve((stdout, stdin)).await.map_err(BoxedCause::from)?;
        let listed = service.peer().list_all_tools().await.map_err(BoxedCause::from);
        Ok::<_, BoxedCause>((service, listed))
    };
    match tokio::time::timeout(options.startup_timeout, handshake).await {
        Ok(Ok((service, Ok(listed)))) => Ok((service, listed, Backend::Process(process))),
        Ok(Ok((service, Err(error)))) => {
            drop(service);
            Err(startup_failure(&process, HandshakeStep::ToolsList, error).await)
        }
        Ok(Err(error)) => Err(startup_failure(&process, HandshakeStep::Initialize, error).await),
        Err(_elapsed) => {
            let _ = process.kill().await;
            Err(StartFailure::TimedOut {
                timeout: options.startup_timeout,
            })
        }
    }
}

/// Connects to a remote server over Streamable HTTP and does the handshake.
async fn start_remote(server: &RemoteServer, options: &ClientOptions) -> Result<Started, StartFailure> {
    let token = match &server.bearer_token_env {
        Some(variable) => match std::env::var(variable) {
            Ok(token) if !token.trim().is_empty() => Some(token.trim().to_owned()),
            _ => {
                return Err(StartFailure::TokenVariableUnset {
                    variable: variable.clone(),
                });
            }
        },
        None => None,
    };
    let mut headers = HashMap::new();
    for (name, value) in &server.headers {
        let header = reqwest::header::HeaderName::from_bytes(name.as_bytes());
        let value = reqwest::header::HeaderValue::from_str(value);
        let (Ok(header), Ok(value)) = (header, value) else {
            return Err(StartFailure::BadHeader { header: name.clone() });
        };
        headers.insert(header, value);
    }
    let http = HttpClient::new().map_err(|error| StartFailure::HttpClient { source: error.into() })?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(server.url.clone());
    // A server gone for good fails the calls waiting on it (about 4 s of
    // retries), instead of being retried forever.
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(SSE_RETRIES);
    retry.base_duration = Duration::from_millis(250);
    retry.max_delay = Some(Duration::from_secs(2));
    config.retry_config = Arc::new(retry);
    config.auth_header = token;
    config.custom_headers = headers;
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    let handshake = async {
        let service = identity()
            .serve(transport)
            .await
            .map_err(|error| (HandshakeStep::Initialize, BoxedCause::from(error)))?;
        match service.peer().list_all_tools().await {
            Ok(listed) => Ok((service, listed)),
            Err(error) => {
                let _ = service.cancel().await;
                Err((HandshakeStep::ToolsList, BoxedCause::from(error)))
            }
        }
    };
    match tokio::time::timeout(options.startup_timeout, handshake).await {
        Ok(Ok((service, listed))) => Ok((
            service,
            listed,
            Backend::Remote {
                url: server.url.clone(),
                http,
            },
        )),
        // What failed below the protocol says it plainest.
        Ok(Err((step, source))) => Err(match http.failure() {
            Some(Failure::Unreachable(error)) => StartFailure::Unreachable {
                url: server.url.clone(),
                error,
                source,
            },
            Some(Failure::Status(status)) => StartFailure::Refused {
                url: server.url.clone(),
                status,
                source,
            },
            None => StartFailure::Handshake { step, source },
        }),
        Err(_elapsed) => Err(StartFailure::TimedOut {
            timeout: options.startup_timeout,
        }),
    }
}

/// The tools of one MCP server, mounted in a registry.
///
/// Dropping it unmounts the tools and releases the server: a process's stdin
/// is closed, then its process group gets SIGTERM, then SIGKILL; a remote
/// session is ended with `DELETE` (in the background, when a tokio runtime
/// is there; at once otherwise). Prefer [`McpMount::release`], which waits
/// until that is done.
pub struct McpMount {
    registrations: Vec<ToolRegistration>,
    names: Vec<String>,
    connection: Option<Arc<Connection>>,
}

impl std::fmt::Debug for McpMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpMount").field("tools", &self.tool_names()).finish()
    }
}

impl McpMount {
    /// Starts the server (or connects to a remote one), lists its tools and
    /// mounts each one in `tools` as `mcp__<server>__<tool>` with the
    /// server's description and input schema. Each tool's results stay
    /// within `options`' result budget ([`ClientOptions::results`]).
    ///
    /// Fails, naming the server and the cause, when the program cannot run,
    /// the server exits or does not answer `initialize`/`tools/list` within
    /// the startup timeout, a remote server cannot be reached or refuses the
    /// request (an HTTP 401 or 404, say), the bearer token's variable is not
    /// set, or a tool name is already taken. Tools whose names
    /// cannot be a model-facing name (anything but ASCII letters, digits, `-`
    /// and `_`) are skipped with a warning.
    pub async fn start(
        spec: &McpServerSpec,
        tools: &ToolRegistry,
        options: &ClientOptions,
    ) -> Result<Self, McpStartError> {
        let failed = |cause: StartFailure| McpStartError {
            server: spec.name.clone(),
            cause,
        };
        let started = match &spec.endpoint {
            McpEndpoint::Stdio(program) => start_process(spec, program, options).await,
            McpEndpoint::Url(server) => start_remote(server, options).await,
        };
        let (service, listed, backend) = started.map_err(failed)?;
        let connection = Arc::new(Connection {
            server: spec.name.clone(),
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            backend,
            options: options.clone(),
        });
        let mut mount = Self {
            registrations: Vec::new(),
            names: Vec::new(),
            connection: Some(connection.clone()),
        };
        for tool in listed {
            let remote = tool.name.to_string();
            if !remote
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                || remote.is_empty()
            {
                tracing::warn!(server = %spec.name, tool = %remote, "{}", wording::LOG_SKIPPED_TOOL);
                continue;
            }
            let name = spec.tool_name(&remote);
            let mounted = McpTool {
                name: name.clone(),
                remote,
                description: tool.description.map(|text| text.into_owned()).unwrap_or_default(),
                parameters: Value::Object((*tool.input_schema).clone()),
                connection: connection.clone(),
            };
            match tools.register(Arc::new(mounted)) {
                Ok(registration) => {
                    mount.registrations.push(registration);
                    mount.names.push(name);
                }
                Err(error) => {
                    let _ = mount.release().await;
                    return Err(failed(StartFailure::Register(error)));
                }
            }
        }
        Ok(mount)
    }

    /// The names this mount registered, in the server's order.
    pub fn tool_names(&self) -> Vec<String> {
        self.names.clone()
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        self.connection.as_ref().map_or("", |connection| &connection.server)
    }

    /// Unmounts the tools and releases the server, returning once its whole
    /// process group is gone (or the remote session is ended).
    pub async fn release(mut self) -> Result<(), McpReleaseError> {
        self.registrations.clear();
        match self.connection.take() {
            Some(connection) => connection.release().await.map_err(|cause| McpReleaseError {
                server: connection.server.clone(),
                cause,
            }),
            None => Ok(()),
        }
    }
}

impl Drop for McpMount {
    fn drop(&mut self) {
        self.registrations.clear();
        if let Some(connection) = self.connection.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        if let Err(error) = connection.release().await {
                            tracing::warn!(server = %connection.server, "{error}");
                        }
                    });
                }
                // No runtime: the process group is killed when the last
                // reference to the connection goes.
                Err(_) => drop(connection),
            }
        }
    }
}

/// Why the handshake failed: the process's end when it ended.
async fn startup_failure(process: &ServerProcess, step: HandshakeStep, source: BoxedCause) -> StartFailure {
    let _ = tokio::time::timeout(EXIT_WAIT, process.exited()).await;
    let cause = match process.exit() {
        Some(_) => StartFailure::ExitedBeforeAnswering {
            how: process.describe_exit().await,
            step,
            source,
        },
        None => StartFailure::Handshake { step, source },
    };
    let _ = process.kill().await;
    cause
}

/// One tool of an MCP server, as mounted.
struct McpTool {
    name: String,
    remote: String,
    description: String,
    parameters: Value,
    connection: Arc<Connection>,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        // Reserved now, before the call awaits anything: the calls of one
        // round start in call order, so their kept results are numbered so.
        let place = self.connection.options.results.reserve(exec.agent());
        Box::pin(self.call(args, exec, place))
    }
}

impl McpTool {
    async fn call(
        &self,
        args: Value,
        exec: ToolExecution,
        place: Option<Box<dyn ShelfPlace>>,
    ) -> Result<ToolOutput, ToolError> {
        let connection = &self.connection;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::invalid_arguments(wording::arguments_not_object(
                    &self.name,
                    json_kind(&other),
                )));
            }
        };
        if connection.backend.is_gone() || connection.peer.is_transport_closed() {
            let how = connection.gone().await;
            return Err(
                ToolError::new(wording::server_gone(&connection.server, &self.remote, &how))
                    .with_code(ErrorCode::ServerGone),
            );
        }
        let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        // Dropping the pending call (the cancel branch) makes rmcp send
        // `notifications/cancelled` for it.
        let outcome = tokio::select! {
            biased;
            () = exec.cancel().cancelled() => {
                return Err(ToolError::new(wording::call_cancelled(&connection.server, &self.remote))
                    .with_code(ErrorCode::CallCancelled));
            }
            outcome = connection.peer.call_tool(params) => outcome,
            () = connection.backend.exited() => Err(ServiceError::TransportClosed),
        };
        let outcome = match outcome {
            Ok(result) => render(result),
            Err(ServiceError::McpError(error)) => {
                Err(
                    ToolError::new(wording::call_failed(&connection.server, &self.remote, &error.message))
                        .with_code(ErrorCode::CallFailed),
                )
            }
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                Err(connection.broke_mid_call(&self.remote).await)
            }
            Err(other) => Err(ToolError::new(wording::call_failed(
                &connection.server,
                &self.remote,
                &other.to_string(),
            ))
            .with_code(ErrorCode::CallFailed)),
        };
        // Within the result budget: a longer answer reads as its head and
        // tail, its whole text kept for `task_output` where a shelf is given.
        connection.options.results.within(outcome, place, &self.name)
    }
}

/// What the model reads of a result: its text blocks, one per line (other
/// content named, not inlined), else its structured content as JSON.
fn render(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => wording::non_text_content("image", &image.mime_type),
            ContentBlock::Audio(audio) => wording::non_text_content("audio", &audio.mime_type),
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { text, .. } => text.clone(),
                ResourceContents::BlobResourceContents { uri, .. } => wording::non_text_content("resource", uri),
                #[allow(unreachable_patterns)]
                _ => wording::non_text_content("resource", "unknown"),
            },
            ContentBlock::ResourceLink(link) => link.uri.clone(),
            #[allow(unreachable_patterns)]
            _ => wording::non_text_content("unknown", "unknown"),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        Err(ToolError::new(text).with_code(ErrorCode::ToolError))
    } else {
        Ok(ToolOutput::text(text))
    }
}
