//! How [`McpToolServer::serve_http`](crate::McpToolServer::serve_http)
//! serves: its path, its options and the agents it gives each session. Both
//! the front ([`super::front`]) and the sessions ([`super::sessions`]) read
//! these, so they live apart from the serving loop.

use std::net::SocketAddr;
use std::time::Duration;

use dsh_tools::AgentRef;
use futures::future::BoxFuture;

use crate::server::tool_server::{MIN_TOKEN_BYTES, McpServeError};

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How long a client may take to send a request's body, by default.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How [`McpToolServer::serve_http`](crate::McpToolServer::serve_http) serves.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServeOptions {
    /// The token every request must carry (`Authorization: Bearer <token>`,
    /// the scheme in any case); required to listen on anything but
    /// loopback, and at least [`MIN_TOKEN_BYTES`] long.
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
    /// How long a request's body may take to arrive once its headers have
    /// (default 30 s, like the headers); past it the request gets 408 and
    /// had no effect.
    pub body_timeout: Duration,
}

impl std::fmt::Debug for HttpServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServeOptions")
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "<set>"))
            .field("max_sessions", &self.max_sessions)
            .field("allowed_origins", &self.allowed_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("idle_timeout", &self.idle_timeout)
            .field("body_timeout", &self.body_timeout)
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
            body_timeout: BODY_READ_TIMEOUT,
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

    /// Sets [`HttpServeOptions::body_timeout`].
    #[must_use]
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Whether these options may serve on `address`: beyond loopback only
    /// with a bearer token (anyone who reaches the port could otherwise
    /// start agents that spend the model key), and a token only when it is
    /// at least [`MIN_TOKEN_BYTES`] long (a short one can be guessed).
    pub fn check(&self, address: SocketAddr) -> Result<(), McpServeError> {
        match &self.bearer_token {
            Some(token) if token.len() < MIN_TOKEN_BYTES => Err(McpServeError::TokenTooShort { length: token.len() }),
            Some(_) => Ok(()),
            None if address.ip().is_loopback() => Ok(()),
            None => Err(McpServeError::NeedsBearerToken {
                address: address.to_string(),
            }),
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
