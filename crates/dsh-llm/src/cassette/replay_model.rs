//! [`ReplayModel`]: a model that answers from a cassette of either level,
//! a model like any other.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::cassette::Cassette;
use super::format::{Level, Outcome};
use super::http::Pace;
use super::timing::Timing;
use crate::error::LlmError;
use crate::model::{ChatModel, ChatRequest, ChatStream, PromptCount};
use crate::openai::OpenAiChatModel;
use crate::openai::wire::{Delivery, request_text};

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
