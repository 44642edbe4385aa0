//! Serving a [`McpToolServer`] over Streamable HTTP: rmcp's tower service
//! (sessions, SSE streams) on hyper's HTTP/1 server, behind a layer of ours
//! ([`Front`]) that holds the policy rmcp leaves to the application and
//! runs every check before any effect:
//!
//! - only `/mcp` is served;
//! - with a bearer token (at least [`MIN_TOKEN_BYTES`](crate::MIN_TOKEN_BYTES)), every request
//!   without it gets 401;
//! - `Host` and `Origin` are checked against DNS rebinding (403);
//! - headers and a `POST` body each arrive within a deadline (408);
//! - a bounded number of sessions: a new one past the bound gets 503;
//! - each session gets its own calling agent ([`SessionAgents::open`]), and
//!   when it ends (`DELETE`, idle, the server shutting down) its calls are
//!   cancelled and awaited and its agent released ([`SessionAgents::close`]);
//!   an accepted `DELETE` does that at once, not after rmcp's drain;
//! - every error is a JSON-RPC error response.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::CancellationToken;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::server::http::access::{AccessCheck, LOOPBACK_ORIGINS, Reach};
use crate::server::http::front::{Front, Inner, MAX_BODY_BYTES};
use crate::server::http::options::{HttpServeOptions, SessionAgents};
use crate::server::http::sessions::{EndWith, Sessions};
use crate::server::tool_server::{McpServeError, McpToolServer, Session};
use crate::wording;

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an open connection may take to finish once the server shuts down.
const CONNECTION_GRACE: Duration = Duration::from_secs(2);

impl McpToolServer {
    /// Serves the tools over Streamable HTTP at `/mcp` on `listener`, until
    /// `shutdown` is cancelled; then every session ends (its calls
    /// cancelled and awaited, its agent released) before this returns.
    ///
    /// Each MCP session (`Mcp-Session-Id`) gets its own calling agent from
    /// `agents`, so sessions never see each other's children or tasks.
    /// `Host` and `Origin` are checked against DNS rebinding (loopback
    /// hosts and origins, plus those in `options`); a request with another
    /// `Origin` gets 403. A refused request has no effect. Refuses to start
    /// on an address beyond loopback without
    /// [`HttpServeOptions::bearer_token`], or with a token shorter than
    /// [`MIN_TOKEN_BYTES`](crate::MIN_TOKEN_BYTES).
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        options: HttpServeOptions,
        agents: Arc<dyn SessionAgents>,
        shutdown: CancellationToken,
    ) -> Result<(), McpServeError> {
        let address = listener.local_addr().map_err(McpServeError::Http)?;
        options.check(address)?;
        let reach = Reach::of(address.ip());
        let sessions = Arc::new(Sessions::new(agents, options.max_sessions));
        let front = Front {
            inner: rmcp_service(self, &options, &sessions, reach, &shutdown),
            sessions: sessions.clone(),
            access: Arc::new(AccessCheck::new(
                options.bearer_token.as_deref(),
                reach,
                &options.allowed_hosts,
                &options.allowed_origins,
            )),
            body_timeout: options.body_timeout,
        };
        let connections = TaskTracker::new();
        let failure = loop {
            let accepted = tokio::select! {
                biased;
                () = shutdown.cancelled() => break None,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_connection(front.clone(), stream, peer, shutdown.clone()));
                }
                // Out of file descriptors and the like: wait, then go on.
                Err(error) if is_transient(&error) => {
                    tracing::warn!("{}", wording::log_accept_failed(&error));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => break Some(error),
            }
        };
        shutdown.cancel();
        sessions.end_all().await;
        connections.close();
        let _ = tokio::time::timeout(CONNECTION_GRACE, connections.wait()).await;
        match failure {
            Some(error) => Err(McpServeError::Http(error)),
            None => Ok(()),
        }
    }
}

fn is_transient(error: &std::io::Error) -> bool {
    !matches!(
        error.kind(),
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
    )
}

/// rmcp's service, configured: sessions (idle ones end), one handler per
/// session with its own agent, and its own `Host` and `Origin` validation
/// as a second line behind [`AccessCheck`]'s (configured alike; every request
/// that reaches it has passed ours).
fn rmcp_service(
    server: &McpToolServer,
    options: &HttpServeOptions,
    sessions: &Arc<Sessions>,
    reach: Reach,
    shutdown: &CancellationToken,
) -> Inner {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_allowed_origins(
            LOOPBACK_ORIGINS
                .iter()
                .map(|origin| (*origin).to_owned())
                .chain(options.allowed_origins.iter().cloned()),
        )
        .enforce_origin_validation();
    if reach == Reach::Loopback {
        let defaults = config.allowed_hosts.clone();
        config = config.with_allowed_hosts(defaults.into_iter().chain(options.allowed_hosts.iter().cloned()));
    } else if options.allowed_hosts.is_empty() {
        config = config.disable_allowed_hosts();
    } else {
        config = config.with_allowed_hosts(options.allowed_hosts.iter().cloned());
    }
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(options.idle_timeout);
    let server = server.clone();
    let sessions = sessions.clone();
    StreamableHttpService::new(
        move || {
            let session = sessions.open_session().map_err(std::io::Error::other)?;
            Ok(Session {
                server: server.clone(),
                state: session.state.clone(),
                on_drop: Some(Arc::new(EndWith {
                    sessions: sessions.clone(),
                    session,
                })),
            })
        },
        Arc::new(manager),
        config,
    )
}

/// Serves one connection until it closes, or until shortly after shutdown.
async fn serve_connection(front: Front, stream: tokio::net::TcpStream, peer: SocketAddr, shutdown: CancellationToken) {
    let service = hyper::service::service_fn(move |request| {
        let front = front.clone();
        async move { Ok::<_, Infallible>(front.handle(request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(CONNECTION_GRACE, connection.as_mut()).await {
                Ok(served) => served,
                Err(_) => Ok(()),
            }
        }
    };
    if let Err(error) = served {
        tracing::debug!(peer = %peer, "{}", wording::log_connection_failed(&error));
    }
}
