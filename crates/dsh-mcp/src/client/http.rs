//! The HTTP half of rmcp's Streamable HTTP client transport, on the
//! workspace's reqwest 0.12 (rustls): rmcp's transport does the protocol
//! (sessions, SSE streams, reconnection with `Last-Event-ID` after the
//! server's `retry`), this module sends its requests.
//!
//! rmcp ships such a client for reqwest 0.13 only; this one keeps a single
//! HTTP stack in the workspace.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use crate::wording;

/// How long connecting to a server may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong with the last request that failed below the protocol,
/// kept so that a failed start can say it plainly (the transport's own
/// error is several layers deep).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server could not be reached at all.
    Unreachable(String),
    /// The server answered with an HTTP error status.
    Status(u16),
}

/// rmcp's Streamable HTTP client, over a reqwest 0.12 client.
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    failure: Arc<Mutex<Option<Failure>>>,
}

impl HttpClient {
    /// A client with our connect timeout (no overall timeout: a tool call's
    /// stream may last as long as the tool runs).
    pub(crate) fn new() -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            failure: Arc::default(),
        })
    }

    /// The last failure below the protocol, if any.
    pub(crate) fn failure(&self) -> Option<Failure> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn record(&self, failure: Failure) {
        *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(failure);
    }

    /// Sends a request, recording a connection failure.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StreamableHttpError<reqwest::Error>> {
        match request.send().await {
            Ok(response) => {
                if !response.status().is_success() {
                    self.record(Failure::Status(response.status().as_u16()));
                }
                Ok(response)
            }
            Err(error) => {
                self.record(Failure::Unreachable(describe(&error)));
                Err(StreamableHttpError::Client(error))
            }
        }
    }
}

/// An error with its causes, the way a person reads it (for reqwest's:
/// `error sending request: … Connection refused`).
pub(crate) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
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

fn with_headers(
    mut request: reqwest::RequestBuilder,
    session_id: Option<&str>,
    auth_token: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> reqwest::RequestBuilder {
    if let Some(token) = auth_token {
        request = request.bearer_auth(token);
    }
    for (name, value) in custom_headers {
        request = request.header(name, value);
    }
    if let Some(session_id) = session_id {
        request = request.header(HEADER_SESSION_ID, session_id);
    }
    request
}

/// Whether a `Content-Type` value is `expected` (parameters and case ignored).
fn media_type_is(value: Option<&HeaderValue>, expected: &str) -> bool {
    value
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

/// An HTTP failure the transport may retry on (rate limits, server errors).
fn retryable(response: &reqwest::Response) -> Option<HttpStatusError> {
    let status = response.status();
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

/// A 401 with a challenge becomes rmcp's `AuthRequired`.
fn auth_required(response: &reqwest::Response) -> Option<StreamableHttpError<reqwest::Error>> {
    if response.status() != StatusCode::UNAUTHORIZED {
        return None;
    }
    let header = response.headers().get(WWW_AUTHENTICATE)?.to_str().ok()?.to_owned();
    Some(StreamableHttpError::AuthRequired(AuthRequiredError::new(header)))
}

/// At most `limit` bytes of a body, for a diagnostic.
async fn body_prefix(response: reqwest::Response, limit: usize) -> String {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while body.len() < limit {
        match chunks.next().await {
            Some(Ok(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A whole body, refused past `limit` bytes.
async fn bounded_body(
    response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, StreamableHttpError<reqwest::Error>> {
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if chunk.len() > limit - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error for a status the protocol does not expect, with a prefix of the body.
async fn unexpected_status(response: reqwest::Response, limit: usize) -> StreamableHttpError<reqwest::Error> {
    if let Some(error) = retryable(&response) {
        return error.into();
    }
    let status = response.status();
    let body = body_prefix(response, limit).await;
    StreamableHttpError::UnexpectedServerResponse(Cow::Owned(wording::http_status_body(&status.to_string(), &body)))
}

/// The SSE events of a response body, each refused past `limit` bytes.
fn sse_events(response: reqwest::Response, limit: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    let bytes = EventLimit {
        inner: response.bytes_stream(),
        limit,
        event: 0,
        line: 0,
        after_cr: false,
        failed: false,
    };
    SseStream::from_bytes_stream(bytes).boxed()
}

/// Why an SSE body stopped.
#[derive(Debug, thiserror::Error)]
enum SseBodyError {
    #[error(transparent)]
    Read(reqwest::Error),
    #[error("{}", wording::sse_event_too_large(*.0))]
    TooLarge(usize),
}

/// Passes a byte stream through, failing once one event (the bytes between
/// two blank lines) grows past `limit`.
struct EventLimit<S> {
    inner: S,
    limit: usize,
    event: usize,
    line: usize,
    after_cr: bool,
    failed: bool,
}

impl<S> EventLimit<S> {
    fn observe(&mut self, chunk: &[u8]) -> bool {
        for &byte in chunk {
            let skip = self.after_cr && byte == b'\n';
            self.after_cr = byte == b'\r';
            if skip {
                continue;
            }
            if byte == b'\n' || byte == b'\r' {
                if self.line == 0 {
                    self.event = 0;
                }
                self.line = 0;
            } else {
                self.line += 1;
                self.event += 1;
                if self.event > self.limit {
                    return false;
                }
            }
        }
        true
    }
}

impl<S, D> Stream for EventLimit<S>
where
    S: Stream<Item = Result<D, reqwest::Error>> + Unpin,
    D: AsRef<[u8]>,
{
    type Item = Result<D, SseBodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.observe(chunk.as_ref()) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.failed = true;
                    Poll::Ready(Some(Err(SseBodyError::TooLarge(self.limit))))
                }
            }
            Poll::Ready(Some(Err(error))) => {
                self.failed = true;
                Poll::Ready(Some(Err(SseBodyError::Read(error))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            custom_headers,
            limits.max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"));
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        let request = with_headers(request, session_id.as_deref(), auth_token, custom_headers);
        let response = self.send(request).await?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(error) = auth_required(&response) {
            return Err(error);
        }
        if !response.status().is_success() {
            let limit = StreamableHttpResponseLimits::default().max_error_response_size;
            return Err(unexpected_status(response, limit).await);
        }
        let content_type = response.headers().get(CONTENT_TYPE);
        if !media_type_is(content_type, EVENT_STREAM_MIME_TYPE) {
            return Err(StreamableHttpError::UnexpectedContentType(
                content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
            ));
        }
        Ok(sse_events(response, max_sse_event_size))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let request = with_headers(
            self.client.delete(uri.as_ref()),
            Some(&session_id),
            auth_token,
            custom_headers,
        );
        let response = self.send(request).await?;
        // A server that does not end sessions on request says so with 405.
        if response.status() == StatusCode::METHOD_NOT_ALLOWED || response.status().is_success() {
            return Ok(());
        }
        let limit = StreamableHttpResponseLimits::default().max_error_response_size;
        Err(unexpected_status(response, limit).await)
    }

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(uri, message, session_id, auth_token, custom_headers, limits)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let had_session = session_id.is_some();
        let body = serde_json::to_vec(&message).map_err(StreamableHttpError::Deserialize)?;
        let request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"))
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body);
        let request = with_headers(request, session_id.as_deref(), auth_token, custom_headers);
        let response = self.send(request).await?;
        let status = response.status();
        if let Some(error) = auth_required(&response) {
            return Err(error);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let awaits_no_response = !matches!(message, JsonRpcMessage::Request(_));
        let session_id = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        if !status.is_success() {
            // A JSON-RPC error in an error response is the server's answer.
            if media_type_is(content_type.as_ref(), JSON_MIME_TYPE) && status != StatusCode::UNAUTHORIZED {
                let retry = retryable(&response);
                let body = bounded_body(response, limits.max_json_response_size).await?;
                if let Ok(error @ JsonRpcMessage::Error(_)) = serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    return Ok(StreamableHttpPostResponse::Json(error, session_id));
                }
                if let Some(retry) = retry {
                    return Err(retry.into());
                }
                let body = String::from_utf8_lossy(&body[..body.len().min(limits.max_error_response_size)]);
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    wording::http_status_body(&status.to_string(), &body),
                )));
            }
            return Err(unexpected_status(response, limits.max_error_response_size).await);
        }
        if media_type_is(content_type.as_ref(), EVENT_STREAM_MIME_TYPE) {
            return Ok(StreamableHttpPostResponse::Sse(
                sse_events(response, limits.max_sse_event_size),
                session_id,
            ));
        }
        if media_type_is(content_type.as_ref(), JSON_MIME_TYPE) {
            let body = bounded_body(response, limits.max_json_response_size).await?;
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session_id)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(StreamableHttpError::Deserialize(error)),
            };
        }
        if awaits_no_response {
            // Some servers answer a notification with an empty 200.
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(bytes: &[&[u8]], limit: usize) -> Vec<bool> {
        let mut events = EventLimit {
            inner: futures::stream::empty::<Result<Vec<u8>, reqwest::Error>>(),
            limit,
            event: 0,
            line: 0,
            after_cr: false,
            failed: false,
        };
        bytes.iter().map(|chunk| events.observe(chunk)).collect()
    }

    #[test]
    fn one_event_may_not_outgrow_the_limit_but_many_small_ones_may_pass() {
        assert_eq!(limit(&[b"data: 1234\n\n", b"data: 1234\r\n\r\n"], 10), [true, true]);
        assert_eq!(limit(&[b"data: 12", b"34\ndata: 5\n"], 10), [true, false]);
        assert_eq!(limit(&[b"data: 123\r", b"\n\r\ndata: 123\n\n"], 9), [true, true]);
    }
}
