//! One recorded exchange as a cassette is read: its request, where it
//! was read from, and its answer (an HTTP head and chunks, or events).

use std::path::PathBuf;

use bytes::Bytes;
use serde_json::Value;

use super::format::Outcome;
use crate::model::ChatEvent;

/// One recorded exchange, as read.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub(crate) id: u64,
    /// The part it was read from, when not the cassette itself.
    pub(crate) part: Option<PathBuf>,
    /// The line of its request (1-based), in its file.
    pub(crate) line: usize,
    pub(crate) model: String,
    pub(crate) url: Option<String>,
    pub(crate) body: Value,
    pub(crate) answer: Answer,
    /// When it ended, in milliseconds after it began, and how.
    pub(crate) end: (u64, Outcome),
}

/// What came back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer {
    /// HTTP level: the response's head.
    pub(crate) head: Option<Head>,
    /// HTTP level: the body's chunks with their times.
    pub(crate) chunks: Vec<(u64, Bytes)>,
    /// Events level: the events with their times.
    pub(crate) events: Vec<(u64, ChatEvent)>,
}

/// A recorded response head.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub(crate) t_ms: u64,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
}
