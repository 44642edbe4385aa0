//! Serving a [`McpToolServer`] over Streamable HTTP: rmcp's tower service
//! (sessions, SSE streams, `Host` and `Origin` checks) on hyper's HTTP/1
//! server, behind a small layer of ours that holds the policy rmcp leaves
//! to the application:
//!
//! - only `/mcp` is served;
//! - with a bearer token, every request without it gets 401;
//! - a bounded number of sessions: a new one past the bound gets 503;
//! - each session gets its own calling agent ([`SessionAgents::open`]), and
//!   when it ends (`DELETE`, idle, the server shutting down) its calls are
//!   cancelled and awaited and its agent released ([`SessionAgents::close`]);
//!   `DELETE` does that at once, before rmcp closes the session.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use dsh_tools::{AgentRef, CancellationToken};
use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::task::TaskTracker;
use tower_service::Service as _;

use crate::server::{EndOnDrop, McpServeError, McpToolServer, Session, SessionState, WIND_DOWN};
use crate::wording;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an open connection may take to finish once the server shuts down.
const CONNECTION_GRACE: Duration = Duration::from_secs(2);

/// The origins every server accepts: pages served from loopback.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

type Body = BoxBody<Bytes, Infallible>;

/// How [`McpToolServer::serve_http`] serves.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServeOptions {
    /// The token every request must carry (`Authorization: Bearer <token>`);
    /// required to listen on anything but loopback.
    pub bearer_token: Option<String>,
    /// The most sessions open at once (default 16); a new one past it is
    /// refused with 503.
    pub max_sessions: usize,
    /// Browser origins accepted besides loopback ones (`https://app.example:443`,
    /// `:*` for any port). A request that carries any other `Origin` gets 403.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted (`example.com` or `example.com:8443`). On
    /// loopback, `localhost`, `127.0.0.1` and `::1` always are; beyond
    /// loopback, an empty list accepts any host (the token guards the server).
    pub allowed_hosts: Vec<String>,
    /// How long a session may stay idle before it ends (default 30 minutes).
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for HttpServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServeOptions")
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("max_sessions", &self.max_sessions)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl Default for HttpServeOptions {
    fn default() -> Self {
        Self {
            bearer_token: None,
            max_sessions: 16,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl HttpServeOptions {
    /// Sets [`HttpServeOptions::bearer_token`].
    #[must_use]
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Sets [`HttpServeOptions::max_sessions`] (at least one).
    #[must_use]
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// Adds to [`HttpServeOptions::allowed_origins`].
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Adds to [`HttpServeOptions::allowed_hosts`].
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Sets [`HttpServeOptions::idle_timeout`].
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Whether these options may serve on `address`: beyond loopback only
    /// with a bearer token (anyone who reaches the port could otherwise
    /// start agents that spend the model key).
    pub fn check(&self, address: SocketAddr) -> Result<(), McpServeError> {
        if address.ip().is_loopback() || self.bearer_token.is_some() {
            Ok(())
        } else {
            Err(McpServeError::NeedsBearerToken {
                address: address.to_string(),
            })
        }
    }
}

/// Makes and releases the calling agent of each session served over HTTP.
pub trait SessionAgents: Send + Sync + 'static {
    /// The calling agent of a new session; an error refuses the session.
    fn open(&self) -> Result<AgentRef, String>;

    /// The session ended and its calls are over: release what its agent
    /// owns (its background tasks and children).
    fn close(&self, agent: AgentRef) -> BoxFuture<'static, ()>;
}

/// The sessions of one HTTP server.
struct Sessions {
    agents: Arc<dyn SessionAgents>,
    max: usize,
    /// Sessions opened and not yet ended.
    open: AtomicUsize,
    /// The sessions with an id, by `Mcp-Session-Id`.
    by_id: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// Serialises session openings, so the bound holds and the one session
    /// a new-session request opened (or its refusal) is known.
    opening: tokio::sync::Mutex<()>,
    just_opened: Mutex<Option<Arc<HttpSession>>>,
    /// Set when the bound refused the session a request would have opened.
    refused: AtomicBool,
    releases: TaskTracker,
    ended: Notify,
}

/// One session over HTTP: its state, its id once rmcp gave it one.
struct HttpSession {
    state: Arc<SessionState>,
    id: OnceLock<String>,
    ended: AtomicBool,
}

impl Sessions {
    fn lock_ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession>>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a session: its calling agent and its state; refused past the bound.
    fn open_session(&self) -> Result<Arc<HttpSession>, String> {
        if self.open.load(Ordering::SeqCst) >= self.max {
            self.refused.store(true, Ordering::SeqCst);
            return Err(wording::too_many_sessions(self.max));
        }
        let agent = self.agents.open()?;
        self.open.fetch_add(1, Ordering::SeqCst);
        let session = Arc::new(HttpSession {
            state: Arc::new(SessionState::new(agent)),
            id: OnceLock::new(),
            ended: AtomicBool::new(false),
        });
        *self.just_opened.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        Ok(session)
    }

    /// Ends a session once: cancels its calls now, and in the background
    /// waits for them and releases its agent.
    fn end_session(&self, session: &HttpSession) {
        if session.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        session.state.cancel.cancel();
        if let Some(id) = session.id.get() {
            self.lock_ids().remove(id);
        }
        let state = session.state.clone();
        let agents = self.agents.clone();
        self.releases.spawn(async move {
            state.wind_down().await;
            agents.close(state.agent.clone()).await;
        });
        self.open.fetch_sub(1, Ordering::SeqCst);
        self.ended.notify_waiters();
    }

    /// Ends every session and waits (bounded) for their releases.
    async fn end_all(&self) {
        let deadline = tokio::time::Instant::now() + WIND_DOWN;
        let sessions: Vec<Arc<HttpSession>> = self.lock_ids().values().cloned().collect();
        for session in sessions {
            self.end_session(&session);
        }
        // Sessions rmcp never gave an id end as their handlers go.
        while self.open.load(Ordering::SeqCst) > 0 {
            let ended = self.ended.notified();
            if self.open.load(Ordering::SeqCst) == 0 || tokio::time::timeout_at(deadline, ended).await.is_err() {
                break;
            }
        }
        self.releases.close();
        let _ = tokio::time::timeout_at(deadline, self.releases.wait()).await;
    }
}

/// Ends the session of a handler rmcp dropped.
struct EndWith {
    sessions: Arc<Sessions>,
    session: Arc<HttpSession>,
}

impl EndOnDrop for EndWith {
    fn end(&self, _state: &Arc<SessionState>) {
        self.sessions.end_session(&self.session);
    }
}

type Inner = StreamableHttpService<Session, LocalSessionManager>;

/// Our layer in front of rmcp's service.
#[derive(Clone)]
struct Front {
    inner: Inner,
    sessions: Arc<Sessions>,
    token: Option<Arc<str>>,
}

fn respond(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response
}

/// Compares without stopping at the first difference.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len() && given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

impl Front {
    fn authorized(&self, request: &Request<Incoming>) -> bool {
        let Some(token) = &self.token else { return true };
        request
            .headers()
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|given| same_secret(given.trim().as_bytes(), token.as_bytes()))
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != MCP_PATH {
            return respond(StatusCode::NOT_FOUND, wording::http_not_served(MCP_PATH));
        }
        if !self.authorized(&request) {
            let mut response = respond(StatusCode::UNAUTHORIZED, wording::HTTP_UNAUTHORIZED.to_owned());
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
        let session_id = request
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        match (request.method(), session_id) {
            (&Method::DELETE, Some(id)) => {
                // End it now (its children are released at once), then let
                // rmcp close the session.
                let session = self.sessions.lock_ids().get(&id).cloned();
                if let Some(session) = session {
                    self.sessions.end_session(&session);
                }
                self.forward(request).await
            }
            (&Method::POST, None) => self.open_session(request).await,
            _ => self.forward(request).await,
        }
    }

    async fn forward(&self, request: Request<Incoming>) -> Response<Body> {
        let mut inner = self.inner.clone();
        match inner.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// A request that may open a session (an `initialize`): forwarded (so
    /// that rmcp checks `Host` and `Origin` first), the session it opened
    /// given its id, or, when the bound refused it, a clear 503.
    async fn open_session(&self, request: Request<Incoming>) -> Response<Body> {
        let _opening = self.sessions.opening.lock().await;
        self.sessions.refused.store(false, Ordering::SeqCst);
        self.sessions
            .just_opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let response = self.forward(request).await;
        if self.sessions.refused.swap(false, Ordering::SeqCst) {
            // rmcp answers a refused service with a bare 500.
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {"code": -32000, "message": wording::too_many_sessions(self.sessions.max)},
            });
            let mut refusal = respond(StatusCode::SERVICE_UNAVAILABLE, body.to_string());
            refusal
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return refusal;
        }
        let opened = self
            .sessions
            .just_opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if let (Some(session), Some(id)) = (opened, id)
            && session.id.set(id.clone()).is_ok()
            && !session.ended.load(Ordering::SeqCst)
        {
            self.sessions.lock_ids().insert(id, session);
        }
        response
    }
}

impl McpToolServer {
    /// Serves the tools over Streamable HTTP at `/mcp` on `listener`, until
    /// `shutdown` is cancelled; then every session ends (its calls
    /// cancelled and awaited, its agent released) before this returns.
    ///
    /// Each MCP session (`Mcp-Session-Id`) gets its own calling agent from
    /// `agents`, so sessions never see each other's children or tasks.
    /// `Host` and `Origin` are checked against DNS rebinding (loopback
    /// hosts and origins, plus those in `options`); a request with another
    /// `Origin` gets 403. Refuses to start on an address beyond loopback
    /// without [`HttpServeOptions::bearer_token`].
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        options: HttpServeOptions,
        agents: Arc<dyn SessionAgents>,
        shutdown: CancellationToken,
    ) -> Result<(), McpServeError> {
        let address = listener
            .local_addr()
            .map_err(|error| McpServeError::Http(error.to_string()))?;
        options.check(address)?;
        let loopback = address.ip().is_loopback();
        let sessions = Arc::new(Sessions {
            agents,
            max: options.max_sessions.max(1),
            open: AtomicUsize::new(0),
            by_id: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
            just_opened: Mutex::default(),
            refused: AtomicBool::new(false),
            releases: TaskTracker::new(),
            ended: Notify::new(),
        });
        let front = Front {
            inner: rmcp_service(self, &options, &sessions, loopback, &shutdown),
            sessions: sessions.clone(),
            token: options.bearer_token.as_deref().map(Arc::from),
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
            Some(error) => Err(McpServeError::Http(error.to_string())),
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

/// rmcp's service, configured: sessions (idle ones end), `Host` and
/// `Origin` validation, and one handler per session with its own agent.
fn rmcp_service(
    server: &McpToolServer,
    options: &HttpServeOptions,
    sessions: &Arc<Sessions>,
    loopback: bool,
    shutdown: &CancellationToken,
) -> Inner {
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_allowed_origins(
            LOOPBACK_ORIGINS
                .iter()
                .map(|origin| (*origin).to_owned())
                .chain(options.allowed_origins.iter().cloned()),
        )
        .enforce_origin_validation();
    if loopback {
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
