//! The client half, and its rmcp adapter: start an MCP server as a child
//! process and mount its tools into a [`ToolRegistry`] as
//! `mcp__<server>__<tool>`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistration, ToolRegistry, json_kind};
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock, Implementation,
    ResourceContents,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, ServiceExt};
use serde_json::{Map, Value};

use crate::process::ServerProcess;
use crate::{ErrorCode, McpServerSpec, wording};

/// How long to wait, after the connection breaks, for the server's exit
/// status, so that the error can say how it ended.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// How servers are started and released.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long `initialize` and `tools/list` together may take (default 30 s).
    pub startup_timeout: Duration,
    /// At release: how long the server may take to exit after its stdin closes (default 2 s).
    pub eof_grace: Duration,
    /// At release: how long the group may take to exit after SIGTERM, before SIGKILL (default 2 s).
    pub term_grace: Duration,
    /// Variables set for a server started as a process, on top of the
    /// environment it inherits (default none); they win over inherited values.
    pub env: Vec<(String, String)>,
    /// The working directory of a server started as a process (default:
    /// ours).
    pub cwd: Option<PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            eof_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            env: Vec::new(),
            cwd: None,
        }
    }
}

impl ClientOptions {
    /// Sets [`ClientOptions::startup_timeout`].
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets one variable for the server's process (see [`ClientOptions::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets the working directory of the server's process.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets both release graces.
    #[must_use]
    pub fn release_graces(mut self, eof: Duration, term: Duration) -> Self {
        self.eof_grace = eof;
        self.term_grace = term;
        self
    }
}

/// Why a server could not be mounted: it names the server and the cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::start_error(server, cause))]
#[non_exhaustive]
pub struct McpStartError {
    /// The server's name.
    pub server: String,
    /// What went wrong.
    pub cause: String,
}

/// Why a server's process group could not be released: it names the server
/// and what was still there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::release_error(server, cause))]
#[non_exhaustive]
pub struct McpReleaseError {
    /// The server's name.
    pub server: String,
    /// What went wrong.
    pub cause: String,
}

/// One live connection: the protocol session and the process behind it.
struct Connection {
    server: String,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    process: ServerProcess,
    options: ClientOptions,
}

impl Connection {
    /// Closes the session (which closes the server's stdin), then tears the
    /// process group down.
    async fn release(&self) -> Result<(), String> {
        let service = self.service.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(service) = service {
            let _ = service.cancel().await;
        }
        self.process
            .teardown(self.options.eof_grace, self.options.term_grace)
            .await
    }

    /// How the server ended, waiting briefly for its exit status.
    async fn gone(&self) -> String {
        let _ = tokio::time::timeout(EXIT_WAIT, self.process.exited()).await;
        self.process.describe_exit()
    }
}

/// The tools of one MCP server, mounted in a registry.
///
/// Dropping it unmounts the tools and releases the server: its stdin is
/// closed, then its process group gets SIGTERM, then SIGKILL (in the
/// background, when a tokio runtime is there; at once otherwise). Prefer
/// [`McpMount::release`], which waits until the group is gone.
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
    /// Starts the server, lists its tools and mounts each one in `tools` as
    /// `mcp__<server>__<tool>` with the server's description and input schema.
    ///
    /// Fails, naming the server and the cause, when the program cannot run,
    /// the server exits or does not answer `initialize`/`tools/list` within
    /// the startup timeout, or a tool name is already taken. Tools whose names
    /// cannot be a model-facing name (anything but ASCII letters, digits, `-`
    /// and `_`) are skipped with a warning.
    pub async fn start(
        spec: &McpServerSpec,
        tools: &ToolRegistry,
        options: &ClientOptions,
    ) -> Result<Self, McpStartError> {
        let failed = |cause: String| McpStartError {
            server: spec.name.clone(),
            cause,
        };
        let (process, stdin, stdout) = ServerProcess::spawn(spec, &options.env, options.cwd.as_deref())
            .map_err(|error| failed(wording::cannot_run(&spec.program, &error)))?;
        let identity = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("dsh", env!("CARGO_PKG_VERSION")),
        );
        let handshake = async {
            let service = identity
                .serve((stdout, stdin))
                .await
                .map_err(|error| error.to_string())?;
            let listed = service.peer().list_all_tools().await.map_err(|error| error.to_string());
            Ok::<_, String>((service, listed))
        };
        let outcome = tokio::time::timeout(options.startup_timeout, handshake).await;
        let (service, listed) = match outcome {
            Ok(Ok((service, Ok(listed)))) => (service, listed),
            Ok(Ok((service, Err(error)))) => {
                drop(service);
                return Err(failed(startup_failure(&process, "tools/list", &error).await));
            }
            Ok(Err(error)) => return Err(failed(startup_failure(&process, "initialize", &error).await)),
            Err(_elapsed) => {
                let _ = process.teardown(Duration::ZERO, Duration::ZERO).await;
                return Err(failed(wording::startup_timed_out(options.startup_timeout)));
            }
        };
        let connection = Arc::new(Connection {
            server: spec.name.clone(),
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            process,
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
                    return Err(failed(error.to_string()));
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
    /// process group is gone.
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

/// Why the handshake failed, in words: the process's end when it ended.
async fn startup_failure(process: &ServerProcess, step: &str, error: &str) -> String {
    let _ = tokio::time::timeout(EXIT_WAIT, process.exited()).await;
    let cause = match process.exit() {
        Some(_) => wording::exited_before_answering(&process.describe_exit(), step),
        None => wording::handshake_failed(step, error),
    };
    let _ = process.teardown(Duration::ZERO, Duration::ZERO).await;
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
        Box::pin(self.call(args, exec))
    }
}

impl McpTool {
    async fn call(&self, args: Value, exec: ToolExecution) -> Result<ToolOutput, ToolError> {
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
        if connection.process.exit().is_some() || connection.peer.is_transport_closed() {
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
            _ = connection.process.exited() => Err(ServiceError::TransportClosed),
        };
        match outcome {
            Ok(result) => render(result),
            Err(ServiceError::McpError(error)) => {
                Err(
                    ToolError::new(wording::call_failed(&connection.server, &self.remote, &error.message))
                        .with_code(ErrorCode::CallFailed),
                )
            }
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                let how = connection.gone().await;
                Err(
                    ToolError::new(wording::server_exited_mid_call(&connection.server, &self.remote, &how))
                        .with_code(ErrorCode::ServerGone),
                )
            }
            Err(other) => Err(ToolError::new(wording::call_failed(
                &connection.server,
                &self.remote,
                &other.to_string(),
            ))
            .with_code(ErrorCode::CallFailed)),
        }
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
