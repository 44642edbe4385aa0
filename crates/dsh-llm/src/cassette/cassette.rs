//! A loaded cassette and its index: each request is answered by the next
//! unused recorded exchange with the same canonical key, found in a hash
//! map (the cost does not grow with the cassette), or refused with where
//! the closest recorded request differs.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::error::CassetteError;
use super::exchange::Exchange;
use super::format::Level;
use super::key::{Key, canonical, closeness, first_difference};
use super::reader::load_whole;
use super::spot::spot;
use crate::wording;

/// A recording, loaded and checked, ready to answer requests.
///
/// Build a model from it with [`ReplayModel::new`](super::ReplayModel::new); one cassette answers
/// every agent of a tree (shared through the `Arc`).
#[derive(Debug)]
pub struct Cassette {
    file: PathBuf,
    level: Level,
    exchanges: Vec<Exchange>,
    /// Why its run was stopped before it ended, if it was.
    interrupted: Option<String>,
    /// Each exchange's agent and request number within that agent.
    places: Vec<(usize, usize)>,
    /// Each exchange's canonical request.
    keys: Vec<Value>,
    /// The unused exchanges of each key, in recorded order.
    index: Mutex<HashMap<Key, VecDeque<usize>>>,
}

impl Cassette {
    /// Reads `file` to replay it; any fault (unreadable, torn, corrupt,
    /// unknown version, unfinished, interrupted) is an error naming the
    /// file and line.
    pub fn load(file: impl AsRef<Path>) -> Result<Arc<Cassette>, CassetteError> {
        let cassette = Cassette::inspect(file)?;
        match &cassette.interrupted {
            Some(reason) => Err(CassetteError::Unfinished {
                file: cassette.file.clone(),
                reason: wording::cassette_interrupted(reason, cassette.len()),
            }),
            None => Ok(cassette),
        }
    }

    /// Reads `file` to look at it ([`summary`](Self::summary),
    /// [`diff`](Self::diff)): like [`load`](Self::load), but a recording
    /// whose run was interrupted ([`Recorder::interrupt`](super::Recorder::interrupt))
    /// is read too, with what ended before ([`interrupted`](Self::interrupted)
    /// says why). Replay takes only what [`load`](Self::load) gives.
    pub fn inspect(file: impl AsRef<Path>) -> Result<Arc<Cassette>, CassetteError> {
        let file = file.as_ref().to_path_buf();
        let contents = load_whole(&file)?;
        let keys: Vec<Value> = contents
            .exchanges
            .iter()
            .map(|exchange| canonical(&exchange.body))
            .collect();
        let mut index: HashMap<Key, VecDeque<usize>> = HashMap::with_capacity(keys.len());
        for (position, key) in keys.iter().enumerate() {
            index.entry(Key::from_canonical(key)).or_default().push_back(position);
        }
        let places = places(&keys);
        Ok(Arc::new(Cassette {
            file,
            level: contents.level,
            exchanges: contents.exchanges,
            interrupted: contents.interrupted,
            places,
            keys,
            index: Mutex::new(index),
        }))
    }

    /// Why the run that recorded it was stopped before it ended, if it was
    /// (only a cassette read with [`inspect`](Self::inspect) can say so).
    pub fn interrupted(&self) -> Option<&str> {
        self.interrupted.as_deref()
    }

    /// The file it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Where its exchanges were taken.
    pub fn level(&self) -> Level {
        self.level
    }

    /// How many exchanges it holds.
    pub fn len(&self) -> usize {
        self.exchanges.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.exchanges.is_empty()
    }

    pub(crate) fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// The agent (1-based, by first appearance) and its request number of
    /// exchange `position`.
    pub(crate) fn place(&self, position: usize) -> (usize, usize) {
        self.places.get(position).copied().unwrap_or_default()
    }

    /// The canonical request of exchange `position`.
    pub(crate) fn key_at(&self, position: usize) -> &Value {
        static NONE: Value = Value::Null;
        self.keys.get(position).unwrap_or(&NONE)
    }

    /// The recorded model's default model name, and (HTTP level) its URL.
    pub(crate) fn recorded_model(&self) -> (String, Option<String>) {
        self.exchanges
            .first()
            .map(|exchange| (exchange.model.clone(), exchange.url.clone()))
            .unwrap_or_default()
    }

    /// The position of the next unused exchange answering `body`, or why
    /// there is none.
    pub(crate) fn take(&self, body: &Value) -> Result<usize, String> {
        let asked = canonical(body);
        let key = Key::from_canonical(&asked);
        let found = {
            let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
            index.get_mut(&key).map(|queue| queue.pop_front())
        };
        match found {
            Some(Some(position)) => Ok(position),
            Some(None) => {
                let recorded = self.keys.iter().filter(|recorded| **recorded == asked).count();
                Err(wording::replay_used_up(&self.file, recorded))
            }
            None => Err(self.miss(&asked)),
        }
    }

    /// The closest recorded request and where it differs from `asked`:
    /// the field, the character offset in it, and the text around it.
    fn miss(&self, asked: &Value) -> String {
        let closest = self
            .keys
            .iter()
            .enumerate()
            .max_by(|(a_at, a), (b_at, b)| closeness(a, asked).cmp(&closeness(b, asked)).then(b_at.cmp(a_at)));
        let Some((position, recorded)) = closest else {
            return wording::replay_empty(&self.file);
        };
        let (agent, request) = self.place(position);
        let exchange = self.exchanges.get(position);
        let line = exchange.map_or(0, |exchange| exchange.line);
        let part = exchange.and_then(|exchange| exchange.part.as_deref());
        match first_difference(recorded, asked) {
            Some(difference) => {
                let found = spot(difference.recorded.as_ref(), difference.asked.as_ref());
                wording::replay_miss(
                    &self.file,
                    (part, line),
                    (agent, request),
                    (&difference.path, found.offset),
                    found.recorded.as_deref(),
                    found.asked.as_deref(),
                )
            }
            None => wording::replay_used_up(&self.file, 1),
        }
    }
}

/// Agents are told apart by how their conversation begins (the messages up
/// to and including the first user message); each gets a number by first
/// appearance, and its requests are counted.
pub(crate) fn places(keys: &[Value]) -> Vec<(usize, usize)> {
    let mut agents: HashMap<String, (usize, usize)> = HashMap::new();
    keys.iter()
        .map(|key| {
            let opening = opening(key);
            let next = agents.len() + 1;
            let entry = agents.entry(opening).or_insert((next, 0));
            entry.1 += 1;
            *entry
        })
        .collect()
}

/// The start of a conversation: its messages up to the first user message.
pub(crate) fn opening(key: &Value) -> String {
    let messages = key
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let end = messages
        .iter()
        .position(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .map_or(messages.len(), |at| at + 1);
    Value::Array(messages.into_iter().take(end).collect()).to_string()
}
