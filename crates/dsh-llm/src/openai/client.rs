//! The HTTP side: retries, timeouts, SSE decoding, cancellation.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::OpenAiConfig;
use super::slots::{Place, Slot, Slots};
use super::transport::{Body, BodyError, HttpAnswer, HttpRequest, Network, SendError, Transport, error_chain};
use super::wire::{Assembler, Delivery, QUOTE_LIMIT, error_message, prompt_tokens, request_text};
use crate::Concurrency;
use crate::error::{LlmError, truncate};
use crate::model::{ChatEvent, ChatModel, ChatRequest, ChatStream, PromptCount};
use crate::wording;
use crate::{ContextRefusal, StreamCut};

/// The endpoint's path under the base URL.
pub(crate) const CHAT_COMPLETIONS: &str = "/chat/completions";

/// How much of an error response body is read (the rest is ignored).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How much of a whole (not streamed) answer is read: far more than any
/// answer a `max_tokens` allows.
const WHOLE_BODY_LIMIT: usize = 16 * 1024 * 1024;

type SseStream = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<BodyError>>> + Send>>;

/// A [`ChatModel`] backed by an OpenAI-compatible `/chat/completions`
/// endpoint, always streaming.
///
/// Cheap to clone; clones share one connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiChatModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: OpenAiConfig,
    /// Who answers the exchange: the network, or a cassette.
    transport: Arc<dyn Transport>,
    url: String,
    /// The requests in flight to each model, and their limits.
    slots: Slots,
}

impl Inner {
    fn new(config: OpenAiConfig, transport: Arc<dyn Transport>, url: String) -> Self {
        let slots = Slots::new(config.max_concurrent);
        Inner {
            config,
            transport,
            url,
            slots,
        }
    }

    /// The slot of the model `request` asks (the configured one unless it names one).
    fn slot(&self, request: &ChatRequest) -> Arc<Slot> {
        self.slots.of(request.model.as_deref().unwrap_or(&self.config.model))
    }
}

impl OpenAiChatModel {
    /// Builds a client from `config`; fails on an unusable base URL.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let parsed =
            reqwest::Url::parse(base).map_err(|err| LlmError::Config(wording::base_url_invalid(base, &err)))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(LlmError::Config(wording::base_url_scheme(base)));
        }
        let url = format!("{base}{CHAT_COMPLETIONS}");
        let mut builder = reqwest::Client::builder().connect_timeout(config.request_timeout);
        let loopback = parsed.host_str().is_some_and(|host| {
            host.eq_ignore_ascii_case("localhost")
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        });
        if loopback {
            // A proxy from the environment must not capture local servers.
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|err| LlmError::Config(wording::client_build_failed(&error_chain(&err))))?;
        let transport = Arc::new(Network {
            client,
            api_key: config.api_key.clone(),
        });
        Ok(OpenAiChatModel {
            inner: Arc::new(Inner::new(config, transport, url)),
        })
    }

    /// A client over `transport`, configured by `config`, posting to `url`:
    /// how a recording or a replay puts itself under the client.
    pub(crate) fn with_transport(config: OpenAiConfig, url: String, transport: Arc<dyn Transport>) -> Self {
        OpenAiChatModel {
            inner: Arc::new(Inner::new(config, transport, url)),
        }
    }

    /// The transport the client sends through.
    pub(crate) fn transport(&self) -> Arc<dyn Transport> {
        Arc::clone(&self.inner.transport)
    }

    /// Builds a client from `DSH_BASE_URL`, `DSH_API_KEY` and `DSH_MODEL`.
    pub fn from_env() -> Result<Self, LlmError> {
        OpenAiChatModel::new(OpenAiConfig::from_env())
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.config
    }

    /// The full endpoint URL (`{base_url}/chat/completions`).
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The endpoint as what is learned of it is kept under: the base URL
    /// without a user, a password, a query or a fragment (which may hold a
    /// credential) and without a trailing `/`.
    ///
    /// ```
    /// use dsh_llm::{OpenAiChatModel, OpenAiConfig};
    /// let config = OpenAiConfig::new().with_base_url("http://me:pw@127.0.0.1:8080/v1/?key=x");
    /// assert_eq!(OpenAiChatModel::new(config)?.endpoint(), "http://127.0.0.1:8080/v1");
    /// # Ok::<(), dsh_llm::LlmError>(())
    /// ```
    pub fn endpoint(&self) -> String {
        endpoint_of(self.inner.url.trim_end_matches(CHAT_COMPLETIONS))
    }
}

/// `url` without credentials, query, fragment or trailing `/`.
fn endpoint_of(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.trim_end_matches('/').to_owned();
    };
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_query(None);
    parsed.set_fragment(None);
    parsed.as_str().trim_end_matches('/').to_owned()
}

impl ChatModel for OpenAiChatModel {
    fn model_name(&self) -> &str {
        &self.inner.config.model
    }

    fn provider_name(&self) -> &str {
        if self.inner.url.contains("deepseek.com") {
            "deepseek"
        } else {
            "openai"
        }
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let model = &self.inner.config.model;
        let run = Run {
            inner: Arc::clone(&self.inner),
            slot: self.inner.slot(&request),
            model: request.model.clone().unwrap_or_else(|| model.clone()),
            place: None,
            queued_after_cut: false,
            cancel,
            body: request_text(model, &request, Delivery::Streamed),
            whole: request_text(model, &request, Delivery::Whole),
            send: Some(Delivery::Streamed),
            events: None,
            heard_bytes: Arc::new(Mutex::new(Instant::now())),
            assembler: Assembler::default(),
            pending: VecDeque::new(),
            done: false,
            sends: Sends::default(),
            heard: false,
            asked_whole: false,
            yielded: false,
        };
        Box::pin(futures::stream::unfold(run, Run::next))
    }

    /// Sends `request` once without streaming and with `max_tokens` 1, and
    /// reads the prompt tokens of its usage: a server that never counts in
    /// a stream (llama-cpp-python) counts a whole answer. A whole answer's
    /// headers come once the server has evaluated the prompt, so they are
    /// awaited for `request_timeout` and `idle_timeout` together (a
    /// stream's first token may take as long); never retried, since a
    /// server that serves one request at a time would evaluate the prompt
    /// again behind the one it is still evaluating. A refusal for length is
    /// [`LlmError::ContextLength`].
    fn count_prompt(&self, request: ChatRequest, cancel: CancellationToken) -> PromptCount {
        let inner = Arc::clone(&self.inner);
        let slot = inner.slot(&request);
        let body = request_text(&inner.config.model, &request.with_max_tokens(1), Delivery::Whole);
        Box::pin(async move {
            // An ask is a request in flight like any: a server that
            // interrupts streams would cut a sibling's for it.
            let _place = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(LlmError::Cancelled),
                (place, _) = slot.take() => place,
            };
            tracing::debug!(url = %inner.url, "{}", wording::LOG_COUNTING);
            let within = inner.config.request_timeout.saturating_add(inner.config.idle_timeout);
            let answer = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(LlmError::Cancelled),
                answer = attempt(&inner, body, Delivery::Whole, within) => answer.map_err(|(err, _)| err)?,
            };
            let limit = inner.config.request_timeout;
            let read = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(LlmError::Cancelled),
                read = tokio::time::timeout(limit, read_bounded(answer.body, WHOLE_BODY_LIMIT)) => read,
            };
            let body = read.map_err(|_| LlmError::Timeout {
                phase: wording::WAITING_FOR_BODY,
                after: limit,
            })?;
            prompt_tokens(&body)
        })
    }

    fn learned_concurrency(&self, model: &str) -> Option<Concurrency> {
        self.inner.slots.learned(model)
    }

    fn keep_concurrency(&self, model: &str, limit: Concurrency) {
        if self.inner.slots.of(model).keep(limit) {
            tracing::info!(url = %self.inner.url, model, %limit, "{}", wording::LOG_CONCURRENCY_KEPT);
        }
    }
}

/// The state of one streamed call.
///
/// A stream that ends before its finish reason is a cut
/// ([`LlmError::StreamEnded`]), never an answer. While nothing of it has
/// reached the consumer, the request is sent again as the retry policy
/// allows (its retries shared with every other reason to retry); once
/// something has, the consumer holds half an answer that cannot be taken
/// back, so the cut is returned with that text, and the caller decides.
/// A stream that ended with no event at all is asked once more without
/// streaming: some servers (llama-cpp-python) raise a refusal after the
/// headers of a stream, and only a whole answer carries it.
struct Run {
    inner: Arc<Inner>,
    /// The requests in flight to the model asked, and their limit.
    slot: Arc<Slot>,
    /// The model asked.
    model: String,
    /// The call's place among them, from its first send to its end.
    place: Option<Place>,
    /// Whether the call already waited for its place after a cut beside
    /// another request (once; a later cut is retried as any).
    queued_after_cut: bool,
    cancel: CancellationToken,
    /// The streamed request's body.
    body: String,
    /// The same request asking for a whole answer.
    whole: String,
    /// The request to send next, if one is due.
    send: Option<Delivery>,
    /// The SSE events of the response, once it started.
    events: Option<SseStream>,
    /// When the response's body last brought bytes: a comment (a server's
    /// `: ping` while it evaluates a long prompt) is no event, but proves
    /// the server alive, so the idle timeout runs from it.
    heard_bytes: Arc<Mutex<Instant>>,
    assembler: Assembler,
    pending: VecDeque<ChatEvent>,
    /// No more items after `pending`.
    done: bool,
    sends: Sends,
    /// Whether the current stream carried any event.
    heard: bool,
    /// Whether the request was asked without streaming already.
    asked_whole: bool,
    /// Whether any event reached the consumer.
    yielded: bool,
}

/// The sends of one call: how many were made, and how many of them were
/// retries (what `max_retries` bounds, whatever made them due).
#[derive(Debug, Default)]
struct Sends {
    made: u32,
    retries: u32,
}

/// What a cut stream leads to.
enum AfterCut {
    /// Nothing was heard: ask once more without streaming.
    AskWhole,
    /// Nothing reached the consumer: send the stream again after this delay.
    Retry(Duration),
    /// Cut beside another request: send the stream again once it has a
    /// place (given up for now), with no delay and no retry spent.
    Queue,
    /// The cut is the call's end.
    Fail(LlmError),
}

impl Run {
    async fn next(mut self) -> Option<(Result<ChatEvent, LlmError>, Run)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                // The wait for a place is no part of the answer.
                self.yielded |= !matches!(event, ChatEvent::Queued(_));
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            if self.cancel.is_cancelled() {
                return self.fail(LlmError::Cancelled);
            }
            if let Some(delivery) = self.send.take() {
                if let Err(err) = self.send(delivery).await {
                    return self.fail(err);
                }
                continue;
            }
            let idle = self.inner.config.idle_timeout;
            let heard = Arc::clone(&self.heard_bytes);
            let events = self.events.as_mut()?;
            // Idle is no byte for `idle`, a comment's included.
            let next = loop {
                let left = idle.saturating_sub(lock(&heard).elapsed());
                let next = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return self.fail(LlmError::Cancelled),
                    next = tokio::time::timeout(left, events.next()) => next,
                };
                if next.is_ok() || lock(&heard).elapsed() >= idle {
                    break next;
                }
            };
            let cut = match next {
                Err(_) => {
                    return self.fail(LlmError::Timeout {
                        phase: wording::WAITING_FOR_CHUNK,
                        after: idle,
                    });
                }
                Ok(None) if self.assembler.finished() => {
                    // A finish reason arrived but [DONE] did not: accept what we have.
                    self.finish();
                    continue;
                }
                Ok(None) => StreamCut::Closed,
                Ok(Some(Err(err))) => match sse_error(err) {
                    Ok(cut) => cut,
                    Err(err) => return self.fail(err),
                },
                Ok(Some(Ok(event))) => match self.handle(event) {
                    Ok(None) => continue,
                    Ok(Some(cut)) => cut,
                    Err(err) => return self.fail(err),
                },
            };
            self.events = None;
            let after = self.after_cut(cut);
            if let Err(err) = self.again(after).await {
                return self.fail(err);
            }
        }
    }

    /// Makes the send that follows a cut due (the stream again, after its
    /// delay, or the request whole), or says the cut is the call's end.
    async fn again(&mut self, after: AfterCut) -> Result<(), LlmError> {
        match after {
            AfterCut::AskWhole => {
                tracing::warn!(url = %self.inner.url, "{}", wording::LOG_ASKING_WHOLE);
                self.asked_whole = true;
                self.send = Some(Delivery::Whole);
            }
            AfterCut::Retry(delay) => {
                tracing::warn!(url = %self.inner.url, retry = self.sends.retries, ?delay, "{}", wording::LOG_CUT_RETRYING);
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Err(LlmError::Cancelled),
                    () = tokio::time::sleep(delay) => {}
                }
                self.send = Some(Delivery::Streamed);
            }
            AfterCut::Queue => {
                tracing::info!(url = %self.inner.url, "{}", wording::LOG_CUT_QUEUED);
                self.send = Some(Delivery::Streamed);
            }
            AfterCut::Fail(err) => return Err(err),
        }
        Ok(())
    }

    /// Sends the request as `delivery` asks, once the call has a place
    /// among the requests in flight to its model (a wait for one is
    /// handed on as [`ChatEvent::Queued`]): a stream's events are then
    /// read as they come, a whole answer's at once.
    async fn send(&mut self, delivery: Delivery) -> Result<(), LlmError> {
        if self.place.is_none() {
            let (place, waited) = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(LlmError::Cancelled),
                taken = self.slot.take() => taken,
            };
            self.place = Some(place);
            if !waited.is_zero() {
                self.pending.push_back(ChatEvent::Queued(waited));
            }
        }
        let body = match delivery {
            Delivery::Streamed => self.body.clone(),
            Delivery::Whole => self.whole.clone(),
        };
        let answer = open(&self.inner, body, delivery, &self.cancel, &mut self.sends).await?;
        self.assembler = Assembler::default();
        self.heard = false;
        match delivery {
            Delivery::Streamed => {
                let heard = Arc::clone(&self.heard_bytes);
                *lock(&heard) = Instant::now();
                let body = answer.body.inspect(move |_| *lock(&heard) = Instant::now());
                self.events = Some(Box::pin(body.eventsource()));
                Ok(())
            }
            Delivery::Whole => self.take_whole(answer.body).await,
        }
    }

    /// Handles one event: `Some` cut when it ends the stream before a
    /// finish reason.
    fn handle(&mut self, event: Event) -> Result<Option<StreamCut>, LlmError> {
        let data = event.data.trim();
        if event.event == "error" {
            if let Some(refusal) = ContextRefusal::recognise(None, data) {
                return Err(LlmError::ContextLength {
                    url: self.inner.url.clone(),
                    refusal,
                });
            }
            return Err(LlmError::StreamError(error_message(data)));
        }
        if data.is_empty() {
            return Ok(None);
        }
        if data == "[DONE]" {
            tracing::debug!(url = %self.inner.url, "{}", wording::LOG_STREAM_DONE);
            if !self.assembler.finished() {
                return Ok(Some(StreamCut::Done));
            }
            self.finish();
            return Ok(None);
        }
        self.heard = true;
        self.take(data)?;
        Ok(None)
    }

    /// Takes one payload, or a whole answer's body, into the pending events.
    fn take(&mut self, data: &str) -> Result<(), LlmError> {
        let events = self.assembler.push(data).map_err(|err| match err {
            // An error object in a chunk: a refusal for length reads as one.
            LlmError::StreamError(_) => match ContextRefusal::recognise(None, data) {
                Some(refusal) => LlmError::ContextLength {
                    url: self.inner.url.clone(),
                    refusal,
                },
                None => err,
            },
            err => err,
        })?;
        self.pending.extend(events);
        Ok(())
    }

    /// Reads a whole answer (a success: a failure status was an error of
    /// [`open`]) as the events of one chunk. One without a finish reason
    /// is a cut too.
    async fn take_whole(&mut self, body: Body) -> Result<(), LlmError> {
        let limit = self.inner.config.request_timeout;
        let read = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(LlmError::Cancelled),
            read = tokio::time::timeout(limit, read_bounded(body, WHOLE_BODY_LIMIT)) => read,
        };
        let body = read.map_err(|_| LlmError::Timeout {
            phase: wording::WAITING_FOR_BODY,
            after: limit,
        })?;
        self.take(&body)?;
        if !self.assembler.finished() {
            self.pending.clear();
            return Err(self.cut(StreamCut::Closed));
        }
        self.finish();
        Ok(())
    }

    /// What follows a cut: the whole answer when the stream said nothing,
    /// a retry when nothing reached the consumer and the policy allows one,
    /// else the cut as the call's error.
    fn after_cut(&mut self, cut: StreamCut) -> AfterCut {
        self.pending.clear();
        // Another request in flight is what an interrupting server cuts a
        // stream for: one at a time from now on, and this one waits.
        let beside_others = self.slot.others_in_flight();
        if beside_others && self.slot.one_at_a_time() {
            tracing::warn!(url = %self.inner.url, "{}", wording::log_one_at_a_time(&self.inner.url, &self.model));
        }
        let queue = beside_others && !self.yielded && !self.queued_after_cut;
        if queue {
            self.queued_after_cut = true;
            self.place = None;
        }
        if !self.heard && !self.asked_whole {
            return AfterCut::AskWhole;
        }
        if queue {
            return AfterCut::Queue;
        }
        let config = &self.inner.config;
        if !self.yielded && self.sends.retries < config.max_retries {
            let delay = config.retry_delay(self.sends.retries, None);
            self.sends.retries += 1;
            return AfterCut::Retry(delay);
        }
        AfterCut::Fail(self.cut(cut))
    }

    /// The error of a call cut as `cut`. Its `partial` is left empty: the
    /// consumer holds every delta that reached it, and
    /// [`collect_response`](crate::collect_response) puts its text there, so
    /// a long answer is not kept twice while it streams.
    fn cut(&self, cut: StreamCut) -> LlmError {
        LlmError::StreamEnded {
            cut,
            attempts: self.sends.made,
            partial: String::new(),
        }
    }

    /// Ends the stream after the pending events; drops the connection and
    /// gives its place back.
    fn finish(&mut self) {
        self.done = true;
        self.events = None;
        self.place = None;
    }

    fn fail(mut self, err: LlmError) -> Option<(Result<ChatEvent, LlmError>, Run)> {
        tracing::debug!(url = %self.inner.url, error = %err, "{}", wording::LOG_STREAM_FAILED);
        self.pending.clear();
        self.finish();
        Some((Err(err), self))
    }
}

/// Sends the request, retrying what [`LlmError::is_retryable`] allows (408,
/// 409, 429, 5xx, connection errors, header timeouts) while `sends` has
/// retries left, until a 2xx response (whose body has not been read yet).
/// Any other 4xx is returned at once.
async fn open(
    inner: &Inner,
    body: String,
    delivery: Delivery,
    cancel: &CancellationToken,
    sends: &mut Sends,
) -> Result<HttpAnswer, LlmError> {
    let config = &inner.config;
    loop {
        sends.made += 1;
        tracing::debug!(url = %inner.url, attempt = sends.made, "{}", wording::LOG_SENDING);
        let (err, retry_after) = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(LlmError::Cancelled),
            result = attempt(inner, body.clone(), delivery, config.request_timeout) => match result {
                Ok(response) => return Ok(response),
                Err(failure) => failure,
            },
        };
        if !err.is_retryable() || sends.retries >= config.max_retries {
            return Err(err);
        }
        let delay = config.retry_delay(sends.retries, retry_after);
        sends.retries += 1;
        tracing::warn!(url = %inner.url, error = %err, retry = sends.retries, ?delay, "{}", wording::LOG_RETRYING);
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(LlmError::Cancelled),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// One attempt, its response headers awaited for at most `within`: a 2xx
/// response, or the error and the server's `Retry-After`.
async fn attempt(
    inner: &Inner,
    body: String,
    delivery: Delivery,
    within: Duration,
) -> Result<HttpAnswer, (LlmError, Option<Duration>)> {
    let config = &inner.config;
    let request = HttpRequest {
        url: inner.url.clone(),
        body,
        delivery,
    };
    let response = match tokio::time::timeout(within, inner.transport.send(request)).await {
        Err(_) => {
            let err = LlmError::Timeout {
                phase: wording::WAITING_FOR_HEADERS,
                after: within,
            };
            return Err((err, None));
        }
        Ok(Err(SendError::ConnectTimeout)) => {
            let err = LlmError::Timeout {
                phase: wording::CONNECTING,
                after: config.request_timeout,
            };
            return Err((err, None));
        }
        Ok(Err(SendError::Connection(message))) => {
            let err = LlmError::Connection {
                url: inner.url.clone(),
                message,
            };
            return Err((err, None));
        }
        Ok(Err(SendError::NoAnswer(message))) => return Err((LlmError::Replay(message), None)),
        Ok(Ok(response)) => response,
    };
    let status = response.status;
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let retry_after = response
        .header("retry-after")
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = tokio::time::timeout(config.request_timeout, read_bounded(response.body, ERROR_BODY_LIMIT))
        .await
        .unwrap_or_default();
    if let Some(refusal) = ContextRefusal::recognise(Some(status), &body) {
        let err = LlmError::ContextLength {
            url: inner.url.clone(),
            refusal,
        };
        return Err((err, None));
    }
    let message = if body.trim().is_empty() {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|status| status.canonical_reason())
            .unwrap_or(wording::NO_ERROR_MESSAGE)
            .to_owned()
    } else {
        error_message(&body)
    };
    let err = LlmError::Http {
        status,
        url: inner.url.clone(),
        message,
    };
    Err((err, retry_after))
}

/// The time a body last brought bytes (a poisoned lock still holds one).
fn lock(heard: &Mutex<Instant>) -> std::sync::MutexGuard<'_, Instant> {
    heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads at most `limit` bytes of a body.
async fn read_bounded(mut body: Body, limit: usize) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < limit {
        match body.next().await {
            Some(Ok(chunk)) => bytes.extend_from_slice(&chunk),
            Some(Err(_)) | None => break,
        }
    }
    bytes.truncate(limit);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A stream that failed: a broken connection is a cut; bytes that are not
/// server-sent events are an error.
fn sse_error(err: EventStreamError<BodyError>) -> Result<StreamCut, LlmError> {
    match err {
        EventStreamError::Transport(BodyError(message)) => Ok(StreamCut::Broken(message)),
        EventStreamError::Utf8(err) => Err(LlmError::MalformedEvent {
            message: wording::stream_not_utf8(&err),
            data: String::new(),
        }),
        EventStreamError::Parser(err) => Err(LlmError::MalformedEvent {
            message: wording::STREAM_NOT_SSE.into(),
            data: truncate(&err.to_string(), QUOTE_LIMIT),
        }),
    }
}
