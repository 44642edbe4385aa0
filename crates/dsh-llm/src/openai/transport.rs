//! The HTTP exchange under the client: one POST of a request body and the
//! answer as it comes (status, the headers that matter, the body's bytes).
//!
//! Everything above it (retries, timeouts, SSE decoding, refusals) is the
//! client's and runs the same whoever answers: the network
//! ([`Network`]), or a cassette being recorded or replayed
//! (`crate::cassette`). So a recorded quirk — a cut stream, a refusal
//! inside a 200, a 429 and its retry — replays through the very code that
//! met it.

use std::pin::Pin;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt};

use super::wire::Delivery;

/// Response headers the client reads or a recording keeps (lowercase); no
/// other header is passed up, so none can leak into a cassette.
const KEPT_HEADERS: &[&str] = &["content-type", "retry-after"];

/// One request: the endpoint and the JSON body. The transport adds the
/// credentials it holds; they never appear here.
#[derive(Debug, Clone)]
pub(crate) struct HttpRequest {
    /// The full endpoint URL.
    pub(crate) url: String,
    /// The JSON body, as sent.
    pub(crate) body: String,
    /// How the body asks for its answer: what the request accepts.
    pub(crate) delivery: Delivery,
}

/// The answer to an [`HttpRequest`]: its head, and its body still to read.
pub(crate) struct HttpAnswer {
    /// The HTTP status code.
    pub(crate) status: u16,
    /// The [`KEPT_HEADERS`] the server sent, in its order.
    pub(crate) headers: Vec<(String, String)>,
    /// The body's bytes as they arrive; an error ends it (a cut stream).
    pub(crate) body: Body,
}

impl HttpAnswer {
    /// The value of header `name` (lowercase), if the server sent it.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A response body: chunks of bytes, or the error that cut it.
pub(crate) type Body = Pin<Box<dyn Stream<Item = Result<Bytes, BodyError>> + Send>>;

/// Why a body stopped early: the transport's error, flattened to text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BodyError(pub(crate) String);

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The connect timeout elapsed.
    ConnectTimeout,
    /// The connection failed or broke before the response began (the
    /// transport's error chain, as text).
    Connection(String),
    /// The transport holds no answer for this request (a replay that has
    /// none recorded); the text says why.
    NoAnswer(String),
}

/// Sends one [`HttpRequest`] and hands back its answer.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug + 'static {
    /// Sends `request`; dropping the future (or the answer's body) drops
    /// the exchange.
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpAnswer, SendError>>;
}

/// The real network, through a shared `reqwest` client.
#[derive(Debug)]
pub(crate) struct Network {
    pub(crate) client: reqwest::Client,
    /// Sent as a bearer token; never handed up.
    pub(crate) api_key: Option<String>,
}

impl Transport for Network {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpAnswer, SendError>> {
        let mut builder = self
            .client
            .post(&request.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept(request.delivery))
            .body(request.body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        Box::pin(async move {
            let response = match builder.send().await {
                Ok(response) => response,
                Err(err) if err.is_timeout() => return Err(SendError::ConnectTimeout),
                Err(err) => return Err(SendError::Connection(error_chain(&err))),
            };
            let headers = response
                .headers()
                .iter()
                .filter(|(name, _)| KEPT_HEADERS.contains(&name.as_str()))
                .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
                .collect();
            Ok(HttpAnswer {
                status: response.status().as_u16(),
                headers,
                body: Box::pin(
                    response
                        .bytes_stream()
                        .map(|chunk| chunk.map_err(|err| BodyError(error_chain(&err)))),
                ),
            })
        })
    }
}

/// The `Accept` header of a request delivered as `delivery`: a stream
/// asks for server-sent events, a whole answer for JSON.
fn accept(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Streamed => "text/event-stream",
        Delivery::Whole => "application/json",
    }
}

/// An error and its sources, joined with `: ` (reqwest's own message is terse).
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
