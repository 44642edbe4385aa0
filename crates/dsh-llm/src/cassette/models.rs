//! The models a harness author takes: [`RecordingModel`] records any
//! [`ChatModel`] at the events level, and [`ReplayModel`] answers from a
//! cassette of either level, a model like any other.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::CassetteError;
use super::error_record::RecordedError;
use super::format::{Level, Outcome};
use super::http::Pace;
use super::recorder::{ExchangeLog, Recorder};
use super::replay::{Cassette, Timing};
use crate::error::LlmError;
use crate::model::{ChatEvent, ChatModel, ChatRequest, ChatStream, PromptCount};
use crate::openai::OpenAiChatModel;
use crate::openai::wire::{Delivery, request_text, write_request_text};

/// Records every call of the model it wraps into a cassette, at the events
/// level: the request (as the OpenAI wire JSON, so both levels share one
/// key) and each event the model streamed, with its time.
///
/// Recording never blocks the stream: each exchange is handed, as it
/// ends, to the recorder's writer thread, which writes it.
#[derive(Debug, Clone)]
pub struct RecordingModel<M> {
    inner: M,
    recorder: Recorder,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Wraps `inner`; refused if `recorder` already records the HTTP level.
    pub fn new(inner: M, recorder: &Recorder) -> Result<Self, CassetteError> {
        recorder.claim(Level::Events)?;
        Ok(RecordingModel {
            inner,
            recorder: recorder.clone(),
        })
    }
}

impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        // The request's wire JSON is the one copy made here, into a buffer
        // the writer handed back; the writer scrubs and writes it.
        let mut exchange = self.recorder.begin();
        let model = self.inner.model_name();
        exchange.model.push_str(model);
        write_request_text(model, &request, Delivery::Streamed, &mut exchange.body);
        let log = ExchangeLog::begin(&self.recorder, exchange);
        Box::pin(Heard {
            inner: self.inner.stream_chat(request, cancel),
            log,
            at: None,
        })
    }

    /// The wrapped model's count, not recorded: the events level records
    /// answers, and a count is none.
    fn count_prompt(&self, request: ChatRequest, cancel: CancellationToken) -> PromptCount {
        self.inner.count_prompt(request, cancel)
    }
}

/// A model's stream, each item logged as it passes.
struct Heard {
    inner: ChatStream,
    log: ExchangeLog,
    /// When the stream last had to wait for an item (milliseconds since
    /// the exchange began): the time of every item ready at once after it,
    /// so a burst of events shares one reading of the clock.
    at: Option<u64>,
}

impl Stream for Heard {
    type Item = Result<ChatEvent, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Poll::Ready(item) = this.inner.as_mut().poll_next(cx) else {
            this.at = None;
            return Poll::Pending;
        };
        match &item {
            Some(Ok(event)) => {
                let t_ms = match this.at {
                    Some(t_ms) => t_ms,
                    None => *this.at.insert(this.log.t_ms()),
                };
                this.log.hear(t_ms, event);
            }
            // The caller cancelled: the model did not end this way by itself.
            Some(Err(LlmError::Cancelled)) => this.log.end(Outcome::Dropped),
            Some(Err(err)) => this.log.end(Outcome::Error(RecordedError::from(err))),
            None => this.log.end(Outcome::Complete),
        }
        Poll::Ready(item)
    }
}

/// A model that answers every request from a cassette, with no network.
///
/// A cassette of the HTTP level answers through the OpenAI client's own
/// code (so a cut stream, a refusal or a retry replays as it happened); one
/// of the events level yields the recorded events. A request the cassette
/// does not hold fails with [`LlmError::Replay`], naming the closest
/// recorded request and the first field where they differ.
#[derive(Debug, Clone)]
pub struct ReplayModel {
    cassette: Arc<Cassette>,
    timing: Timing,
    model: String,
    via: Via,
}

#[derive(Debug, Clone)]
enum Via {
    /// The OpenAI client over a transport that answers from the cassette.
    Http(OpenAiChatModel),
    /// The recorded events themselves.
    Events,
}

impl ReplayModel {
    /// A model answering from `cassette` at `timing`'s pace.
    pub fn new(cassette: Arc<Cassette>, timing: Timing) -> Self {
        let (model, url) = cassette.recorded_model();
        let via = match cassette.level() {
            Level::Http => Via::Http(OpenAiChatModel::replaying(
                Arc::clone(&cassette),
                timing,
                &model,
                url.as_deref(),
            )),
            Level::Events => Via::Events,
        };
        ReplayModel {
            cassette,
            timing,
            model,
            via,
        }
    }

    /// The cassette it answers from.
    pub fn cassette(&self) -> &Arc<Cassette> {
        &self.cassette
    }
}

impl ChatModel for ReplayModel {
    fn model_name(&self) -> &str {
        &self.model
    }

    fn provider_name(&self) -> &str {
        match &self.via {
            Via::Http(client) => client.provider_name(),
            Via::Events => "_OTHER",
        }
    }

    /// A cassette of the HTTP level answers the count as it was recorded;
    /// one of the events level counts nothing.
    fn count_prompt(&self, request: ChatRequest, cancel: CancellationToken) -> PromptCount {
        match &self.via {
            Via::Http(client) => client.count_prompt(request, cancel),
            Via::Events => Box::pin(std::future::ready(Ok(None))),
        }
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        if let Via::Http(client) = &self.via {
            return client.stream_chat(request, cancel);
        }
        let text = request_text(&self.model, &request, Delivery::Streamed);
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let position = match self.cassette.take(&body) {
            Ok(position) => position,
            Err(message) => return Box::pin(futures::stream::iter([Err(LlmError::Replay(message))])),
        };
        let Some(exchange) = self.cassette.exchanges().get(position) else {
            return Box::pin(futures::stream::empty());
        };
        let pace = Pace::new(self.timing);
        let events = exchange.answer.events.clone();
        let ending = match exchange.end.1.clone() {
            Outcome::Error(error) => futures::stream::iter([Err(LlmError::from(error))]).boxed(),
            Outcome::Dropped => futures::stream::pending().boxed(),
            _ => futures::stream::empty().boxed(),
        };
        let events = futures::stream::iter(events).then(move |(t_ms, event)| {
            let pace = pace.clone();
            async move {
                pace.until(t_ms).await;
                Ok(event)
            }
        });
        let answer = events.chain(ending);
        Box::pin(
            answer.take_until(cancel.clone().cancelled_owned()).chain(
                futures::stream::once(async move {
                    if cancel.is_cancelled() {
                        Some(Err(LlmError::Cancelled))
                    } else {
                        None
                    }
                })
                .filter_map(futures::future::ready),
            ),
        )
    }
}
