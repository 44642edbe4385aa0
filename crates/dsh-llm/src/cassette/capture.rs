//! One exchange while it is recorded, from its request to its end: what
//! the stream fills in and the writer writes. Its buffers are kept for the
//! next exchange once it is written, so that recording allocates nothing
//! once a recording has warmed up.

use std::sync::Arc;

use super::copy_into_kept::{event_held, held};
use super::format::Line;
use super::tape::Tape;
use crate::message::{Message as ChatMessage, ToolDefinition};
use crate::model::{ChatEvent, ChatRequest};

/// One exchange as it is captured: what it asked, and its answer as it
/// was heard. Its
/// buffers are reused: the writer hands them back empty, so recording an
/// exchange allocates nothing once the recording has warmed up.
#[derive(Default)]
pub(crate) struct Capture {
    pub(crate) id: u64,
    /// Milliseconds since the recording began.
    pub(crate) at_ms: u64,
    /// The recorded model's default model name.
    pub(crate) model: String,
    /// The endpoint (HTTP level), credentials still in it: the writer
    /// takes them out.
    pub(crate) url: Option<String>,
    /// The request body as sent (the OpenAI wire JSON), secrets still in
    /// it: the writer scrubs it.
    pub(crate) body: Vec<u8>,
    /// The request as the model was asked it (events level), for the
    /// writer to write as the body: the stream pays for a copy of its
    /// messages, not for its JSON.
    pub(crate) asked: Option<Asked>,
    /// The messages of the request this exchange last held, kept so that
    /// the next one's are copied into their strings.
    pub(crate) kept: Vec<ChatMessage>,
    /// Messages beyond those a request asked, kept for a longer one.
    pub(crate) surplus: Vec<ChatMessage>,
    /// The bytes it holds, once emptied ([`Capture::reclaimed`]).
    pub(super) held: usize,
    /// The events the model streamed (events level), in order.
    pub(super) tape: Tape,
    /// Those of them that are not text deltas, in order: the first
    /// `others_used`; the rest are kept for the next exchange to copy into.
    pub(super) others: Vec<ChatEvent>,
    pub(super) others_used: usize,
    /// Its other lines (the HTTP level's status and chunks), then its end.
    pub(super) lines: Vec<Line>,
}

/// A request as a model was asked it, its tools kept apart.
pub(crate) struct Asked {
    /// The request, its `tools` empty.
    pub(crate) request: ChatRequest,
    /// The tools it offered, shared with the other requests that offered
    /// the same ones (`None`: none).
    pub(crate) tools: Option<Arc<[ToolDefinition]>>,
}

impl Capture {
    /// About the bytes it holds, buffers and all: what it weighs while it
    /// waits for the writer ([`Queue::push`](super::queue::Queue::push)) and
    /// in the pool of spare ones ([`Queue::give_back`](super::queue::Queue::give_back)).
    pub(super) fn bytes(&self) -> usize {
        let asked = self.asked.as_ref().map_or(&[][..], |asked| &asked.request.messages[..]);
        std::mem::size_of::<Capture>()
            + self.model.capacity()
            + self.url.as_ref().map_or(0, String::capacity)
            + self.body.capacity()
            + self.tape.capacity()
            + asked
                .iter()
                .chain(&self.kept)
                .chain(&self.surplus)
                .map(held)
                .sum::<usize>()
            + self.others.iter().map(event_held).sum::<usize>()
            + self.lines.capacity() * std::mem::size_of::<Line>()
            + self.lines.iter().map(line_heap).sum::<usize>()
    }

    /// Empties it for another exchange; `None` when its buffers grew too
    /// large to keep.
    pub(super) fn reclaimed(mut self: Box<Self>) -> Option<Box<Capture>> {
        const KEPT: usize = 1 << 20;
        if let Some(asked) = self.asked.take() {
            self.kept = asked.request.messages;
        }
        self.others_used = 0;
        self.model.clear();
        self.url = None;
        self.body.clear();
        self.tape.clear();
        self.lines.clear();
        self.held = self.bytes();
        (self.held <= KEPT).then_some(self)
    }
}

/// The bytes `line` holds beside itself (the HTTP level's headers and
/// chunks).
fn line_heap(line: &Line) -> usize {
    match line {
        Line::Status { headers, .. } => headers
            .iter()
            .map(|(name, value)| name.capacity() + value.capacity())
            .sum(),
        Line::Chunk { text, hex, .. } => {
            text.as_ref().map_or(0, String::capacity) + hex.as_ref().map_or(0, String::capacity)
        }
        _ => 0,
    }
}
