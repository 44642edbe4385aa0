//! Our layer in front of rmcp's service. Every check runs before any
//! effect, in this order:
//!
//! 1. only `/mcp` is served (404);
//! 2. the bearer token, then `Host`, then `Origin` ([`AccessCheck`]: 401, 400, 403);
//! 3. a `POST` body is read whole, within a deadline (408) and a size (413),
//!    and screened ([`screen`]: not JSON 400 `-32700`, not a message 400
//!    `-32600`, an `initialize` with wrong params `-32602`);
//! 4. a `DELETE` names a session that exists (404);
//!
//! and only then does rmcp see the request. A `DELETE` ends its session
//! once rmcp has accepted it. Every error is a JSON-RPC error
//! ([`reply`]). No lock is held while anything waits: a session's opening
//! learns what it opened through [`Opening`], a task-local of its request.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tower_service::Service as _;

use crate::server::http::access::{AccessCheck, Refused};
use crate::server::http::options::MCP_PATH;
use crate::server::http::reply::{self, Body};
use crate::server::http::sessions::{Opening, Sessions};
use crate::server::screen::{self, Kind, Refusal};
use crate::server::tool_server::Session;
use crate::wording;

/// The largest request body read (as rmcp's own limit).
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub(crate) type Inner = StreamableHttpService<Session, LocalSessionManager>;

/// Our layer in front of rmcp's service.
#[derive(Clone)]
pub(crate) struct Front {
    pub(crate) inner: Inner,
    pub(crate) sessions: Arc<Sessions>,
    pub(crate) access: Arc<AccessCheck>,
    /// How long a request body may take to arrive.
    pub(crate) body_timeout: Duration,
}

/// Why a body was not read.
enum Unread {
    TooLarge(Vec<u8>),
    TimedOut,
    Failed(hyper::Error),
}

impl Front {
    /// Answers one request.
    pub(crate) async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        reply::in_json_rpc_shape(self.route(request).await).await
    }

    async fn route(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != MCP_PATH {
            return reply::error(
                StatusCode::NOT_FOUND,
                screen::SERVER_ERROR,
                &wording::http_not_served(MCP_PATH),
                None,
            );
        }
        if let Err(refused) = self.access.check(request.headers()) {
            return refusal(&refused);
        }
        match *request.method() {
            Method::POST => self.post(request).await,
            Method::DELETE => self.delete(request).await,
            _ => self.forward(request).await,
        }
    }

    async fn forward<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Display,
    {
        let mut inner = self.inner.clone();
        match inner.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    async fn post(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body, MAX_BODY_BYTES, self.body_timeout).await {
            Ok(bytes) => bytes,
            Err(Unread::TooLarge(prefix)) => {
                return reply::refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &Refusal::too_large(&prefix, MAX_BODY_BYTES),
                );
            }
            Err(Unread::TimedOut) => {
                return reply::error(
                    StatusCode::REQUEST_TIMEOUT,
                    screen::SERVER_ERROR,
                    &wording::http_body_timeout(self.body_timeout),
                    None,
                );
            }
            Err(Unread::Failed(error)) => {
                return reply::error(
                    StatusCode::BAD_REQUEST,
                    screen::SERVER_ERROR,
                    &wording::http_body_unreadable(&error),
                    None,
                );
            }
        };
        if let Err(refused) = screen::screen(&bytes) {
            // Params of the wrong type are the request's own error, in-band;
            // what is not a message at all is the transport's (400).
            let status = match refused.kind {
                Kind::BadParams => StatusCode::OK,
                Kind::NotJson | Kind::NotMessage | Kind::TooLarge => StatusCode::BAD_REQUEST,
            };
            return reply::refusal(status, &refused);
        }
        let opens = !parts.headers.contains_key(HEADER_SESSION_ID);
        let request = Request::from_parts(parts, Full::new(bytes));
        if opens {
            self.open_session(request).await
        } else {
            self.forward(request).await
        }
    }

    /// A `DELETE`: the session must exist; it ends once rmcp has closed it
    /// (every other check passed), at once rather than after rmcp's drain.
    async fn delete(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(id) = session_id(&request) else {
            // rmcp refuses it (400).
            return self.forward(request).await;
        };
        let Some(session) = self.sessions.get(&id) else {
            return reply::error(
                StatusCode::NOT_FOUND,
                screen::SESSION_NOT_FOUND,
                wording::HTTP_SESSION_NOT_FOUND,
                None,
            );
        };
        let response = self.forward(request).await;
        if response.status().is_success() {
            self.sessions.end_session(&session);
        }
        response
    }

    /// A request that may open a session (an `initialize`): forwarded, the
    /// session it opened given its id, or, when the bound refused it, a
    /// clear 503.
    async fn open_session(&self, request: Request<Full<Bytes>>) -> Response<Body> {
        let opening = Arc::new(Opening::default());
        let response = opening.run(self.forward(request)).await;
        if opening.refused() {
            // rmcp answers a refused factory with a bare 500.
            return reply::error(
                StatusCode::SERVICE_UNAVAILABLE,
                screen::SERVER_ERROR,
                &wording::too_many_sessions(self.sessions.max),
                None,
            );
        }
        let id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        if let (Some(session), Some(id)) = (opening.opened(), id) {
            self.sessions.name(session, id);
        }
        response
    }
}

fn session_id<B>(request: &Request<B>) -> Option<String> {
    request
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// The response to a request refused at the gate.
fn refusal(refused: &Refused) -> Response<Body> {
    let status = match refused {
        Refused::Unauthorized => StatusCode::UNAUTHORIZED,
        Refused::BadHost => StatusCode::BAD_REQUEST,
        Refused::HostNotAllowed | Refused::OriginNotAllowed => StatusCode::FORBIDDEN,
    };
    let mut response = reply::error(status, screen::SERVER_ERROR, refused.message(), None);
    if *refused == Refused::Unauthorized {
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The whole body, if it is at most `limit` bytes and arrives within
/// `timeout`; past the limit, what was read up to it.
async fn read_body(mut body: Incoming, limit: usize, timeout: Duration) -> Result<Bytes, Unread> {
    let read = async {
        let mut collected: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(Unread::Failed)?;
            let Ok(data) = frame.into_data() else { continue };
            if collected.len() + data.len() > limit {
                let room = limit - collected.len();
                collected.extend_from_slice(&data[..room]);
                return Err(Unread::TooLarge(collected));
            }
            collected.extend_from_slice(&data);
        }
        Ok(Bytes::from(collected))
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(Unread::TimedOut))
}
