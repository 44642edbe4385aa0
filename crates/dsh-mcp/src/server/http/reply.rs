//! Every error the HTTP server answers is a JSON-RPC error response (as
//! MCP's Streamable HTTP transport and its official TypeScript SDK give
//! them): ours are written so, and rmcp's plain-text ones are rewrapped,
//! their text kept as the message.

use std::convert::Infallible;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::server::screen::{self, Refusal};

/// A response body.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// The most of one of rmcp's error texts kept.
const ERROR_TEXT_BYTES: usize = 4096;

/// An error response: `status`, and the JSON-RPC error `code` with `message`.
pub(crate) fn error(status: StatusCode, code: i64, message: &str, id: Option<&Value>) -> Response<Body> {
    json(status, &screen::error_body(code, message, id))
}

/// The response to a refused message: its JSON-RPC error, with `status`.
pub(crate) fn refusal(status: StatusCode, refusal: &Refusal) -> Response<Body> {
    json(status, &refusal.body())
}

fn json(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `response` as it goes out: an error that is not JSON yet (one of rmcp's
/// plain-text refusals) becomes a JSON-RPC error with its text as the
/// message, `-32001` for a session not found, else `-32000`; its other
/// headers (`Allow`, `WWW-Authenticate`) stay.
pub(crate) async fn in_json_rpc_shape(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // rmcp's error bodies are short texts, already whole.
    let text = match Limited::new(body, ERROR_TEXT_BYTES).collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).trim().to_owned(),
        Err(_) => String::new(),
    };
    let message = match text.as_str() {
        "" => status.canonical_reason().unwrap_or("error").to_owned(),
        _ => text,
    };
    let code = match status {
        StatusCode::NOT_FOUND => screen::SESSION_NOT_FOUND,
        _ => screen::SERVER_ERROR,
    };
    let body = screen::error_body(code, &message, None).to_string();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Full::new(Bytes::from(body)).boxed())
}
