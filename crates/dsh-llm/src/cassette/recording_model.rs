//! [`RecordingModel`]: any [`ChatModel`] recorded at the events level, a
//! model like any other.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::capture::Asked;
use super::copy_into_kept::copy_messages;
use super::error::CassetteError;
use super::error_record::RecordedError;
use super::exchange_log::ExchangeLog;
use super::format::{Level, Outcome};
use super::recorder::Recorder;
use crate::Concurrency;
use crate::error::LlmError;
use crate::message::ToolDefinition;
use crate::model::{ChatEvent, ChatModel, ChatRequest, ChatStream, PromptCount};

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
    tools: Arc<ToolSets>,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Wraps `inner`; refused if `recorder` already records the HTTP level.
    pub fn new(inner: M, recorder: &Recorder) -> Result<Self, CassetteError> {
        recorder.claim(Level::Events)?;
        Ok(RecordingModel {
            inner,
            recorder: recorder.clone(),
            tools: Arc::default(),
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
        // The request is kept as it was asked, for the writer to turn into
        // its wire JSON, scrub and write: its messages are copied, its
        // tools (most of its bytes, and the same from one call to the
        // next) shared with the requests before it that offered them.
        let mut exchange = self.recorder.begin();
        exchange.model.push_str(self.inner.model_name());
        let mut messages = std::mem::take(&mut exchange.kept);
        copy_messages(&mut messages, &mut exchange.surplus, &request.messages);
        exchange.asked = Some(Asked {
            tools: self.tools.shared(&request.tools),
            request: ChatRequest {
                messages,
                tools: Vec::new(),
                model: request.model.clone(),
                max_tokens: request.max_tokens,
                temperature: request.temperature,
            },
        });
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

    fn learned_concurrency(&self, model: &str) -> Option<Concurrency> {
        self.inner.learned_concurrency(model)
    }

    fn keep_concurrency(&self, model: &str, limit: Concurrency) {
        self.inner.keep_concurrency(model, limit);
    }
}

/// The most tool sets a [`RecordingModel`] keeps (a parent's, its
/// children's, theirs: a few, each offered again and again).
const TOOL_SETS: usize = 8;

/// The tool sets a [`RecordingModel`]'s recent requests offered, the most
/// recent first, each held once: a request's tools are compared with
/// them, which costs a fraction of copying or serialising them.
#[derive(Debug, Default)]
struct ToolSets(Mutex<Vec<Arc<[ToolDefinition]>>>);

impl ToolSets {
    /// `tools`, shared: the set held that is the same, or a copy of them
    /// held from now on; `None` when there are none.
    fn shared(&self, tools: &[ToolDefinition]) -> Option<Arc<[ToolDefinition]>> {
        if tools.is_empty() {
            return None;
        }
        let mut sets = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match sets.iter().position(|set| same_tools(set, tools)) {
            Some(0) => {}
            Some(found) => {
                let set = sets.remove(found);
                sets.insert(0, set);
            }
            None => {
                sets.insert(0, Arc::from(tools));
                sets.truncate(TOOL_SETS);
            }
        }
        sets.first().cloned()
    }
}

/// Whether two tool sets serialise the same: the same tools in the same
/// order, their schemas' keys in the same order too (unlike
/// `PartialEq`, which lets an object's keys come in any order).
fn same_tools(a: &[ToolDefinition], b: &[ToolDefinition]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.name == b.name && a.description == b.description && same_json(&a.parameters, &b.parameters))
}

/// Whether two values are written as the same JSON.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        // `0.0 == -0.0`, yet they are written differently.
        (Value::Number(a), Value::Number(b)) => {
            a.as_u64() == b.as_u64()
                && a.as_i64() == b.as_i64()
                && a.is_f64() == b.is_f64()
                && a.as_f64().map(f64::to_bits) == b.as_f64().map(f64::to_bits)
        }
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|((ka, a), (kb, b))| ka == kb && same_json(a, b))
        }
        _ => false,
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
        // The stream's end, too, is timed with the burst it came in.
        let t_ms = match this.at {
            Some(t_ms) => t_ms,
            None => *this.at.insert(this.log.t_ms()),
        };
        match &item {
            // A wait for the endpoint is the client's, not the model's answer.
            Some(Ok(ChatEvent::Queued(_))) => {}
            Some(Ok(event)) => this.log.hear(t_ms, event),
            // The caller cancelled: the model did not end this way by itself.
            Some(Err(LlmError::Cancelled)) => this.log.end_at(t_ms, Outcome::Dropped),
            Some(Err(err)) => this.log.end_at(t_ms, Outcome::Error(RecordedError::from(err))),
            None => this.log.end_at(t_ms, Outcome::Complete),
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_are_the_same_only_when_written_the_same() {
        let same = |a: Value, b: Value| same_json(&a, &b);
        assert!(same(
            json!({"a": [1, 2.5, "x", null, true], "b": {}}),
            json!({"a": [1, 2.5, "x", null, true], "b": {}})
        ));
        // Equal as values, written differently.
        assert!(!same(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1})));
        assert!(!same(json!(0.0), json!(-0.0)));
        assert!(!same(json!(1), json!(1.0)));
        assert!(!same(json!([1]), json!([1, 2])));
        assert!(!same(json!({"a": 1}), json!({"a": "1"})));
    }

    #[test]
    fn a_tool_set_offered_again_is_shared_and_a_changed_one_is_not() {
        let sets = ToolSets::default();
        let tools = |description: &str| {
            vec![ToolDefinition::new(
                "t",
                description,
                json!({"type": "object", "properties": {"x": {"type": "number"}}}),
            )]
        };
        assert!(sets.shared(&[]).is_none());
        let first = sets.shared(&tools("one")).unwrap();
        let other = sets.shared(&tools("two")).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(&*other, tools("two").as_slice());
        let again = sets.shared(&tools("one")).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let mut reordered = tools("one");
        reordered[0].parameters = json!({"properties": {"x": {"type": "number"}}, "type": "object"});
        assert!(!Arc::ptr_eq(&first, &sets.shared(&reordered).unwrap()));
        for number in 0..TOOL_SETS {
            sets.shared(&tools(&number.to_string()));
        }
        assert!(
            !Arc::ptr_eq(&first, &sets.shared(&tools("one")).unwrap()),
            "only the most recent sets are kept"
        );
    }
}
