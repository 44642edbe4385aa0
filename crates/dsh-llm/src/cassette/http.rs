//! The HTTP level: a transport that records each exchange of the OpenAI
//! client as it passes, and one that answers from a cassette, both under
//! the client's own retry, timeout and stream code.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde_json::Value;
use tokio::time::Instant;

use super::cassette::Cassette;
use super::error::CassetteError;
use super::exchange_log::ExchangeLog;
use super::format::{Failure, Level, Line, Outcome, to_hex};
use super::recorder::Recorder;
use super::timing::Timing;
use crate::openai::transport::{Body, BodyError, HttpAnswer, HttpRequest, SendError, Transport};
use crate::openai::{CHAT_COMPLETIONS, OpenAiChatModel, OpenAiConfig};
use crate::wording;

impl OpenAiChatModel {
    /// This client, recording every HTTP exchange into `recorder`'s
    /// cassette: the request as sent, the status, the headers that matter,
    /// the streamed bytes with their timing, and how it ended. The API key
    /// is never written. Refused if `recorder` records the events level.
    pub fn recorded(&self, recorder: &Recorder) -> Result<Self, CassetteError> {
        recorder.claim(Level::Http)?;
        if let Some(key) = &self.config().api_key {
            recorder.redact(key.clone());
        }
        let transport = Arc::new(Recording {
            inner: self.transport(),
            recorder: recorder.clone(),
            model: self.config().model.clone(),
        });
        Ok(OpenAiChatModel::with_transport(
            self.config().clone(),
            self.url().to_owned(),
            transport,
        ))
    }

    /// A client answered by `cassette` (no network), as the recorded one
    /// was configured: its model and URL. At [`Timing::Fast`] it does not
    /// wait before a retry.
    pub(crate) fn replaying(cassette: Arc<Cassette>, timing: Timing, model: &str, url: Option<&str>) -> Self {
        let url = url.unwrap_or(wording::REPLAY_URL).to_owned();
        let mut config = OpenAiConfig::new()
            .with_model(model)
            .with_base_url(url.trim_end_matches(CHAT_COMPLETIONS));
        if timing == Timing::Fast {
            config = config
                .with_retry_base_delay(Duration::ZERO)
                .with_max_retry_delay(Duration::ZERO);
        }
        OpenAiChatModel::with_transport(config, url, Arc::new(Replaying { cassette, timing }))
    }
}

/// Records every exchange of the transport it wraps.
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) inner: Arc<dyn Transport>,
    pub(crate) recorder: Recorder,
    /// The client's default model name.
    pub(crate) model: String,
}

impl Transport for Recording {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpAnswer, SendError>> {
        let recorder = &self.recorder;
        let mut exchange = recorder.begin();
        exchange.model.push_str(&self.model);
        exchange.url = Some(request.url.clone());
        exchange.body.extend_from_slice(request.body.as_bytes());
        let mut log = ExchangeLog::begin(recorder, exchange);
        let sent = self.inner.send(request);
        Box::pin(async move {
            match sent.await {
                Err(err) => {
                    let failure = match &err {
                        SendError::ConnectTimeout => Some(Failure::ConnectTimeout),
                        SendError::Connection(message) => Some(Failure::Connection(message.clone())),
                        SendError::NoAnswer(_) => None,
                    };
                    match failure {
                        Some(failure) => log.end(Outcome::Failed(failure)),
                        None => log.end(Outcome::Dropped),
                    }
                    Err(err)
                }
                Ok(answer) => {
                    let headers = answer
                        .headers
                        .iter()
                        .map(|(name, value)| (name.clone(), log.recorder().scrub(value)))
                        .collect();
                    log.push(Line::Status {
                        id: log.id(),
                        t_ms: log.t_ms(),
                        status: answer.status,
                        headers,
                    });
                    Ok(HttpAnswer {
                        body: tee(answer.body, log),
                        ..answer
                    })
                }
            }
        })
    }
}

/// `body`, each chunk also logged as it passes; its end (or cut, or drop)
/// ends the exchange.
fn tee(body: Body, log: ExchangeLog) -> Body {
    Box::pin(futures::stream::unfold((body, log), |(mut body, mut log)| async move {
        let item = body.next().await;
        match &item {
            Some(Ok(bytes)) => {
                let (text, hex) = match std::str::from_utf8(bytes) {
                    Ok(text) => (Some(log.recorder().scrub(text)), None),
                    Err(_) => (None, Some(to_hex(bytes))),
                };
                log.push(Line::Chunk {
                    id: log.id(),
                    t_ms: log.t_ms(),
                    text,
                    hex,
                });
            }
            Some(Err(BodyError(message))) => log.end(Outcome::Cut(log.recorder().scrub(message))),
            None => log.end(Outcome::Complete),
        }
        item.map(|item| (item, (body, log)))
    }))
}

/// Answers every exchange from a cassette.
#[derive(Debug)]
pub(crate) struct Replaying {
    pub(crate) cassette: Arc<Cassette>,
    pub(crate) timing: Timing,
}

impl Transport for Replaying {
    fn send(&self, request: HttpRequest) -> BoxFuture<'static, Result<HttpAnswer, SendError>> {
        let body = serde_json::from_str(&request.body).unwrap_or(Value::String(request.body));
        let position = match self.cassette.take(&body) {
            Ok(position) => position,
            Err(message) => return futures::future::ready(Err(SendError::NoAnswer(message))).boxed(),
        };
        let Some(exchange) = self.cassette.exchanges().get(position) else {
            return futures::future::pending().boxed();
        };
        let answer = exchange.answer.clone();
        let end = exchange.end.clone();
        let pace = Pace::new(self.timing);
        Box::pin(async move {
            match (answer.head, end.1) {
                (_, Outcome::Failed(failure)) => {
                    pace.until(end.0).await;
                    Err(match failure {
                        Failure::ConnectTimeout => SendError::ConnectTimeout,
                        Failure::Connection(message) => SendError::Connection(message),
                    })
                }
                (Some(head), outcome) => {
                    pace.until(head.t_ms).await;
                    Ok(HttpAnswer {
                        status: head.status,
                        headers: head.headers,
                        body: replay_body(answer.chunks, outcome, pace),
                    })
                }
                // The client gave up before any answer came: so it does again.
                (None, _) => futures::future::pending().await,
            }
        })
    }
}

/// The recorded chunks, then the recorded ending: the end of the body, the
/// error that cut it, or (when the client stopped reading) nothing more.
fn replay_body(chunks: Vec<(u64, Bytes)>, outcome: Outcome, pace: Pace) -> Body {
    let ending = match outcome {
        Outcome::Cut(message) => futures::stream::iter(vec![Err(BodyError(message))]).boxed(),
        Outcome::Dropped => futures::stream::pending().boxed(),
        _ => futures::stream::empty().boxed(),
    };
    let chunks = futures::stream::iter(chunks).then(move |(t_ms, bytes)| {
        let pace = pace.clone();
        async move {
            pace.until(t_ms).await;
            Ok(bytes)
        }
    });
    Box::pin(chunks.chain(ending))
}

/// When each recorded piece is handed out: at once, or at its recorded
/// time after the exchange began.
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    began: Option<Instant>,
}

impl Pace {
    pub(crate) fn new(timing: Timing) -> Self {
        Pace {
            began: (timing == Timing::Recorded).then(Instant::now),
        }
    }

    pub(crate) async fn until(&self, t_ms: u64) {
        if let Some(began) = self.began {
            tokio::time::sleep_until(began + Duration::from_millis(t_ms)).await;
        }
    }
}
