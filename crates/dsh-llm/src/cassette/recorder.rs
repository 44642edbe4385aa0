//! Writing a cassette: each exchange is handed, as it ends, to a writer
//! thread that turns it into lines and writes them in batches, so the
//! stream being recorded never waits on serialization or the disk; the
//! file is written as `FILE.recording` and renamed to `FILE` only once its
//! closing line is on disk, so a cassette either reads as whole or is
//! refused as unfinished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::error::CassetteError;
use super::format::{FORMAT, Level, Line, Outcome, VERSION};
use super::reuse::{copy_event, event_held, held};
use super::tape::{Entry, Tape};
use crate::message::{Message as ChatMessage, ToolDefinition};
use crate::model::{ChatEvent, ChatRequest};
use crate::openai::wire::write_streamed_request_text;
use crate::wording;

/// The suffix of a recording in progress, beside the cassette it becomes.
pub const RECORDING_SUFFIX: &str = ".recording";

/// How long the writer lets exchanges gather after the first one wakes
/// it: one wake-up and one write per batch, not per exchange, so the
/// stream pays no system call for most of the exchanges it records.
const BATCH: Duration = Duration::from_millis(2);

/// The writer's buffer: a batch reaches the file in writes of this size.
const WRITE_BUFFER: usize = 64 * 1024;

/// Records model exchanges into one cassette file.
///
/// Cheap to clone; clones record into the same file. Wrap a model with
/// [`RecordingModel`](super::RecordingModel) (any [`ChatModel`](crate::ChatModel),
/// at the events level) or [`OpenAiChatModel::recorded`](crate::OpenAiChatModel::recorded)
/// (the HTTP level), run, then call [`Recorder::finish`].
///
/// Recording never blocks the model's stream: each exchange is handed to
/// a writer thread as it ends. A write that fails, or a disk that falls
/// more than 256 MB behind, stops the recording (what was not written is
/// dropped, and the run goes on); [`Recorder::finish`] then returns the
/// error, and the cassette stays unfinished.
#[derive(Debug, Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    file: PathBuf,
    partial: PathBuf,
    started: Instant,
    next_id: AtomicU64,
    level: OnceLock<Level>,
    secrets: Secrets,
    queue: Arc<Queue>,
    writer: Mutex<Option<JoinHandle<Result<u64, CassetteError>>>>,
}

/// The secrets never written, shared with the writer thread, which takes
/// them out of each request as it writes it.
type Secrets = Arc<super::scrub::Secrets>;

impl Drop for Shared {
    /// The last clone is gone without [`Recorder::finish`] or
    /// [`Recorder::interrupt`]: the writer ends what it has (an unfinished
    /// `FILE.recording`, or none when no exchange was recorded) before the
    /// drop returns.
    fn drop(&mut self) {
        self.queue.end(Ending::Abandoned);
        if let Some(handle) = self.writer.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = handle.join();
        }
    }
}

/// What the writer thread is handed.
enum Message {
    Header(Level),
    /// Boxed, so that handing one on moves a pointer.
    Exchange(Box<Exchange>),
}

impl Message {
    /// About the bytes it holds, for [`Queue::limit`].
    fn bytes(&self) -> usize {
        match self {
            Message::Header(_) => 0,
            Message::Exchange(exchange) => exchange.bytes(),
        }
    }
}

/// One exchange: what it asked, and its answer as it was heard. Its
/// buffers are reused: the writer hands them back empty, so recording an
/// exchange allocates nothing once the recording has warmed up.
#[derive(Default)]
pub(crate) struct Exchange {
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
    /// The bytes it holds, once emptied ([`Exchange::reclaimed`]).
    held: usize,
    /// The events the model streamed (events level), in order.
    tape: Tape,
    /// Those of them that are not text deltas, in order: the first
    /// `others_used`; the rest are kept for the next exchange to copy into.
    others: Vec<ChatEvent>,
    others_used: usize,
    /// Its other lines (the HTTP level's status and chunks), then its end.
    lines: Vec<Line>,
}

/// A request as a model was asked it, its tools kept apart.
pub(crate) struct Asked {
    /// The request, its `tools` empty.
    pub(crate) request: ChatRequest,
    /// The tools it offered, shared with the other requests that offered
    /// the same ones (`None`: none).
    pub(crate) tools: Option<Arc<[ToolDefinition]>>,
}

impl Exchange {
    /// About the bytes it holds, buffers and all: what it weighs while it
    /// waits for the writer ([`Queue::limit`]) and in the pool of spare
    /// ones ([`SPARE_BYTES`]).
    fn bytes(&self) -> usize {
        let asked = self.asked.as_ref().map_or(&[][..], |asked| &asked.request.messages[..]);
        std::mem::size_of::<Exchange>()
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
    fn reclaimed(mut self: Box<Self>) -> Option<Box<Exchange>> {
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

/// The most bytes the emptied exchanges kept for reuse hold: room for
/// every exchange in flight between the stream and the writer (a batch's
/// worth, and many more), so that in a steady run none is freed on the
/// writer's thread only to be allocated again on the stream's.
const SPARE_BYTES: usize = 8 << 20;

/// How a recording ends.
enum Closing {
    /// Its run ended: the cassette is whole.
    Finish,
    /// Its run was stopped early, for this reason: replay refuses it.
    Interrupted(String),
}

/// Why the writer stops.
enum Ending {
    /// The recording was closed this way.
    Closed(Closing),
    /// The last recorder is gone without closing it.
    Abandoned,
}

/// The most bytes of ended exchanges that wait for the writer. Past it the
/// disk has fallen that far behind the model: rather than block the stream
/// or hold ever more memory, the recording stops, as on a failed write
/// (the cassette stays unfinished, and finishing it says why).
const PENDING_BYTES: usize = 256 << 20;

/// Why a recording stopped before it was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// A write failed (the writer holds its error).
    WriteFailed,
    /// More than [`Queue::limit`] bytes waited for the writer.
    FellBehind,
}

/// What the recorders hand the writer, and how it is woken.
#[derive(Debug)]
struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
    /// The most bytes that wait for the writer ([`PENDING_BYTES`]).
    limit: usize,
}

#[derive(Default)]
struct QueueState {
    pending: Vec<Message>,
    /// The bytes the exchanges in `pending` hold (about).
    pending_bytes: usize,
    ending: Option<Ending>,
    /// The writer sleeps until something arrives (a recorder wakes it).
    parked: bool,
    /// Why the recording stopped before it was closed, if it did: what
    /// arrives from then on is dropped (the error is reported when the
    /// recording is closed).
    stopped: Option<Stopped>,
    /// The bytes the exchanges in `spare` hold.
    spare_bytes: usize,
    /// Exchanges written and emptied, to be filled again.
    #[expect(
        clippy::vec_box,
        reason = "the boxes are what is handed on: reused, not allocated per exchange"
    )]
    spare: Vec<Box<Exchange>>,
}

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueState")
            .field("pending", &self.pending.len())
            .field("ended", &self.ending.is_some())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl Queue {
    fn new(limit: usize) -> Self {
        Queue {
            state: Mutex::default(),
            wake: Condvar::new(),
            limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `message` to the writer; never blocks on it, and makes a
    /// system call only when the writer sleeps with nothing to write. When
    /// it would put more than [`Queue::limit`] bytes in wait, the
    /// recording stops instead: what waits is dropped, and so is what
    /// comes after.
    fn push(&self, message: Message) {
        let bytes = message.bytes();
        let mut state = self.lock();
        if state.ending.is_some() || state.stopped.is_some() {
            return;
        }
        if state.pending_bytes.saturating_add(bytes) > self.limit {
            state.stopped = Some(Stopped::FellBehind);
            state.pending_bytes = 0;
            let dropped = std::mem::take(&mut state.pending);
            drop(state);
            drop(dropped);
            tracing::warn!(limit = self.limit, "{}", wording::LOG_CASSETTE_FELL_BEHIND);
            return;
        }
        state.pending_bytes += bytes;
        state.pending.push(message);
        let wake = std::mem::take(&mut state.parked);
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Tells the writer to end (the first ending counts).
    fn end(&self, ending: Ending) {
        let mut state = self.lock();
        if state.ending.is_none() {
            state.ending = Some(ending);
        }
        drop(state);
        self.wake.notify_one();
    }

    /// The writer's next batch, swapped into `batch` (empty, so the two
    /// vectors take turns and neither grows again): waits for a message,
    /// then lets more gather for [`BATCH`] unless the recording ends
    /// first. Returns the ending, if it came.
    fn next_batch(&self, batch: &mut Vec<Message>) -> Option<Ending> {
        let mut state = self.lock();
        while state.pending.is_empty() && state.ending.is_none() {
            state.parked = true;
            state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.parked = false;
        let deadline = Instant::now() + BATCH;
        while state.ending.is_none() {
            let Some(left) = deadline
                .checked_duration_since(Instant::now())
                .filter(|left| !left.is_zero())
            else {
                break;
            };
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        std::mem::swap(&mut state.pending, batch);
        state.pending_bytes = 0;
        state.ending.take()
    }

    /// Whether the writer fell [`Queue::limit`] bytes behind.
    fn fell_behind(&self) -> bool {
        self.lock().stopped == Some(Stopped::FellBehind)
    }

    /// An empty exchange to fill: one the writer handed back, or a new one.
    fn spare(&self) -> Box<Exchange> {
        let mut state = self.lock();
        let exchange = state.spare.pop();
        if let Some(exchange) = &exchange {
            state.spare_bytes = state.spare_bytes.saturating_sub(exchange.held);
        }
        drop(state);
        exchange.unwrap_or_default()
    }

    /// Keeps written exchanges, emptied, for reuse, up to [`SPARE_BYTES`];
    /// empties them without the lock, so a recorder never waits on it.
    fn give_back(&self, written: impl Iterator<Item = Box<Exchange>>) {
        let mut room = SPARE_BYTES.saturating_sub(self.lock().spare_bytes);
        let (mut emptied, mut bytes) = (Vec::new(), 0);
        for exchange in written.filter_map(Exchange::reclaimed) {
            if exchange.held > room {
                break;
            }
            room -= exchange.held;
            bytes += exchange.held;
            emptied.push(exchange);
        }
        let mut state = self.lock();
        state.spare_bytes += bytes;
        state.spare.append(&mut emptied);
    }

    /// A write failed: drop what arrives from now on.
    fn fail(&self) {
        let mut state = self.lock();
        state.stopped = Some(Stopped::WriteFailed);
        state.pending = Vec::new();
        state.pending_bytes = 0;
    }
}

impl Recorder {
    /// Starts recording into `file`: creates `FILE.recording` beside it
    /// (refused when it exists: another run is recording there).
    pub fn create(file: impl AsRef<Path>) -> Result<Recorder, CassetteError> {
        let file = file.as_ref().to_path_buf();
        let partial = partial_path(&file);
        let sink = match std::fs::OpenOptions::new().write(true).create_new(true).open(&partial) {
            Ok(sink) => sink,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(CassetteError::Busy { file, partial });
            }
            Err(source) => return Err(CassetteError::Unwritable { file: partial, source }),
        };
        remove_parts(&file);
        Ok(Recorder::start(file, partial, sink, true))
    }

    /// Starts recording one part of the cassette `whole`, which another
    /// process of the same run records (an ACP child of the `dsh` that
    /// records it): into the first free `FILE.part-<n>`, written as
    /// `FILE.part-<n>.recording` and renamed when finished, like any
    /// cassette. The whole one lists its parts when it finishes, and
    /// [`Cassette::load`](super::Cassette::load) of `whole` reads them with it.
    pub fn create_part(whole: impl AsRef<Path>) -> Result<Recorder, CassetteError> {
        let whole = whole.as_ref();
        for number in 1..=MAX_PARTS {
            let file = part_path(whole, number);
            if file.exists() {
                continue;
            }
            let partial = partial_path(&file);
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&partial) {
                Ok(sink) => return Ok(Recorder::start(file, partial, sink, true)),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(CassetteError::Unwritable { file: partial, source }),
            }
        }
        Err(CassetteError::Unwritable {
            file: part_path(whole, MAX_PARTS),
            source: std::io::Error::other(wording::CASSETTE_TOO_MANY_PARTS),
        })
    }

    /// Starts a recorder writing into `sink`; `rename` moves the partial
    /// file onto the cassette's name once finished.
    fn start(file: PathBuf, partial: PathBuf, sink: impl Write + Send + 'static, rename: bool) -> Recorder {
        Recorder::start_limited(file, partial, sink, rename, PENDING_BYTES)
    }

    /// [`Recorder::start`], at most `limit` bytes waiting for the writer.
    fn start_limited(
        file: PathBuf,
        partial: PathBuf,
        sink: impl Write + Send + 'static,
        rename: bool,
        limit: usize,
    ) -> Recorder {
        let queue = Arc::new(Queue::new(limit));
        let secrets = Secrets::default();
        let writer = Writer {
            queue: queue.clone(),
            secrets: secrets.clone(),
            file: file.clone(),
            partial: partial.clone(),
            rename,
        };
        let writer = std::thread::Builder::new()
            .name("dsh-cassette".into())
            .spawn(move || writer.run(sink));
        let writer = match writer {
            Ok(handle) => Some(handle),
            Err(err) => {
                tracing::warn!(file = %partial.display(), error = %err, "{}", wording::LOG_CASSETTE_WRITE_FAILED);
                None
            }
        };
        Recorder {
            shared: Arc::new(Shared {
                file,
                partial,
                started: Instant::now(),
                next_id: AtomicU64::new(1),
                level: OnceLock::new(),
                secrets,
                queue,
                writer: Mutex::new(writer),
            }),
        }
    }

    /// The cassette's name (where it will be once finished).
    pub fn file(&self) -> &Path {
        &self.shared.file
    }

    /// Never writes `secret` (an API key, a token) where a secret travels:
    /// a URL's user and password, a query value or path segment that is the
    /// secret; written as `[redacted]` instead. A key-shaped secret (16
    /// characters or more, no spaces, not only letters) is also taken out
    /// of every request body and answer; a shorter or word-like one (a
    /// local server's `x`, `none` or `EMPTY`) is not, since there it would
    /// rewrite what the model or the server wrote (and the request would
    /// no longer replay). The OpenAI client's own key is added when it is
    /// recorded.
    pub fn redact(&self, secret: impl Into<String>) {
        self.shared.secrets.add(secret.into());
    }

    /// `text` (a header's value, a chunk, an error) with every key-shaped
    /// secret replaced.
    pub(crate) fn scrub(&self, text: &str) -> String {
        self.shared.secrets.in_text(text).into_owned()
    }

    /// Fixes the cassette's level on first use; a model of the other level
    /// is refused.
    pub(crate) fn claim(&self, level: Level) -> Result<(), CassetteError> {
        let recorded = *self.shared.level.get_or_init(|| {
            self.shared.queue.push(Message::Header(level));
            level
        });
        if recorded == level {
            Ok(())
        } else {
            Err(CassetteError::MixedLevels {
                file: self.shared.file.clone(),
                recorded,
                asked: level,
            })
        }
    }

    /// A new exchange, its id set, its buffers empty (its time is set
    /// when it begins: [`ExchangeLog::begin`]).
    pub(crate) fn begin(&self) -> Box<Exchange> {
        let mut exchange = self.shared.queue.spare();
        exchange.id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        exchange
    }

    /// Ends the recording: writes the closing line after every exchange
    /// that ended, and renames the file to its cassette name. Returns how
    /// many exchanges it holds. On an error the unfinished `FILE.recording`
    /// stays for inspection (replay refuses it). Exchanges still running
    /// are not recorded; a second call returns 0.
    ///
    /// A recorder dropped without [`finish`](Self::finish) or
    /// [`interrupt`](Self::interrupt) leaves `FILE.recording` without a
    /// closing line (unfinished, refused by replay), or no file at all when
    /// it recorded no exchange.
    pub fn finish(&self) -> Result<u64, CassetteError> {
        self.close(Closing::Finish)
    }

    /// Ends a recording whose run was stopped before it ended (a signal,
    /// a run given up): like [`finish`](Self::finish), the exchanges that
    /// ended are written and the file takes its cassette name, but its
    /// closing line says it was interrupted and why, so replay refuses it
    /// with that reason ([`Cassette::inspect`](super::Cassette::inspect)
    /// still reads it). Returns how many exchanges it holds.
    pub fn interrupt(&self, reason: impl Into<String>) -> Result<u64, CassetteError> {
        self.close(Closing::Interrupted(reason.into()))
    }

    /// Waits for the writer to write everything handed to it, then the
    /// closing line.
    fn close(&self, closing: Closing) -> Result<u64, CassetteError> {
        self.shared.level.get_or_init(|| {
            self.shared.queue.push(Message::Header(Level::Events));
            Level::Events
        });
        self.shared.queue.end(Ending::Closed(closing));
        let writer = self.shared.writer.lock().unwrap_or_else(PoisonError::into_inner).take();
        match writer {
            None => Ok(0),
            Some(handle) => handle.join().unwrap_or_else(|_| {
                Err(CassetteError::Unwritable {
                    file: self.shared.partial.clone(),
                    source: std::io::Error::other(wording::CASSETTE_WRITER_PANICKED),
                })
            }),
        }
    }
}

/// One exchange while it runs; handed to the writer as one block when it
/// ends, or, if it is dropped first, with a `dropped` ending.
pub(crate) struct ExchangeLog {
    recorder: Recorder,
    began: Instant,
    exchange: Option<Box<Exchange>>,
}

impl ExchangeLog {
    /// Begins `exchange` (from [`Recorder::begin`], its request filled in)
    /// now: one reading of the clock for its time in the recording and the
    /// start of its answer's.
    pub(crate) fn begin(recorder: &Recorder, mut exchange: Box<Exchange>) -> Self {
        let began = Instant::now();
        exchange.at_ms = millis(began.saturating_duration_since(recorder.shared.started));
        ExchangeLog {
            recorder: recorder.clone(),
            began,
            exchange: Some(exchange),
        }
    }

    /// The exchange's id.
    pub(crate) fn id(&self) -> u64 {
        self.exchange.as_ref().map_or(0, |exchange| exchange.id)
    }

    /// Milliseconds since the exchange began.
    pub(crate) fn t_ms(&self) -> u64 {
        millis(self.began.elapsed())
    }

    /// The recorder (to scrub what is logged).
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Adds a line of the answer (HTTP level).
    pub(crate) fn push(&mut self, line: Line) {
        if let Some(exchange) = &mut self.exchange {
            exchange.lines.push(line);
        }
    }

    /// Adds an event the model streamed, heard `t_ms` after the exchange
    /// began (events level): a text delta's text is copied onto the
    /// exchange's tape, any other event into its others.
    pub(crate) fn hear(&mut self, t_ms: u64, event: &ChatEvent) {
        let Some(exchange) = &mut self.exchange else {
            return;
        };
        match event {
            ChatEvent::TextDelta(text) => exchange.tape.text(t_ms, text),
            other => {
                let index = exchange.others_used;
                exchange.tape.other(t_ms);
                match exchange.others.get_mut(index) {
                    Some(kept) => copy_event(kept, other),
                    None => exchange.others.push(other.clone()),
                }
                exchange.others_used += 1;
            }
        }
    }

    /// Ends the exchange and hands it to the writer (once).
    pub(crate) fn end(&mut self, outcome: Outcome) {
        if self.exchange.is_some() {
            self.end_at(self.t_ms(), outcome);
        }
    }

    /// Ends the exchange `t_ms` after it began and hands it to the writer
    /// (once).
    pub(crate) fn end_at(&mut self, t_ms: u64, outcome: Outcome) {
        let Some(mut exchange) = self.exchange.take() else {
            return;
        };
        exchange.lines.push(Line::End {
            id: exchange.id,
            t_ms,
            outcome,
        });
        self.recorder.shared.queue.push(Message::Exchange(exchange));
    }
}

impl Drop for ExchangeLog {
    fn drop(&mut self) {
        self.end(Outcome::Dropped);
    }
}

/// The most parts one cassette has.
const MAX_PARTS: usize = 10_000;

/// What a part's file name adds to its cassette's: `.part-`, then its number.
const PART_INFIX: &str = ".part-";

/// `FILE.part-<number>`.
fn part_path(whole: &Path, number: usize) -> PathBuf {
    let mut name = whole.as_os_str().to_owned();
    name.push(format!("{PART_INFIX}{number}"));
    PathBuf::from(name)
}

/// The parts beside `whole` (`FILE.part-<n>`, finished or still
/// `.recording`), by file name, in number order.
pub(crate) fn parts_of(whole: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (whole.parent(), whole.file_name().and_then(|name| name.to_str())) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{name}{PART_INFIX}");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut parts: Vec<(usize, String)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let file = entry.file_name().into_string().ok()?;
            let rest = file.strip_prefix(&prefix)?;
            let number = rest.strip_suffix(RECORDING_SUFFIX).unwrap_or(rest);
            let number: usize = number.parse().ok()?;
            Some((number, format!("{prefix}{number}")))
        })
        .collect();
    parts.sort();
    parts.dedup();
    parts.into_iter().map(|(_, name)| name).collect()
}

/// Removes the parts an earlier recording of `whole` left (the new
/// recording's children write theirs afresh).
fn remove_parts(whole: &Path) {
    let dir = whole.parent().filter(|dir| !dir.as_os_str().is_empty());
    for name in parts_of(whole) {
        let part = dir.map_or_else(|| PathBuf::from(&name), |dir| dir.join(&name));
        let _ = std::fs::remove_file(&part);
        let _ = std::fs::remove_file(partial_path(&part));
    }
}

/// `FILE.recording`.
pub(crate) fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(RECORDING_SUFFIX);
    PathBuf::from(name)
}

pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The writer thread: what the recorders hand it, turned into lines and
/// written a batch at a time; then the closing line and the rename.
struct Writer {
    queue: Arc<Queue>,
    secrets: Secrets,
    file: PathBuf,
    partial: PathBuf,
    rename: bool,
}

impl Writer {
    fn run(self, sink: impl Write) -> Result<u64, CassetteError> {
        let failed = |source| CassetteError::Unwritable {
            file: self.partial.clone(),
            source,
        };
        let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, sink);
        let mut exchanges = 0u64;
        let mut error: Option<std::io::Error> = None;
        let mut batch = Vec::new();
        let ending = loop {
            let ending = self.queue.next_batch(&mut batch);
            if error.is_none() {
                let written = batch
                    .iter_mut()
                    .try_for_each(|message| match message {
                        Message::Header(level) => write_line(&mut out, &header(*level)),
                        Message::Exchange(exchange) => {
                            exchanges += 1;
                            self.write_exchange(&mut out, exchange)
                        }
                    })
                    // Whole exchanges reach the file batch by batch.
                    .and_then(|()| out.flush());
                if let Err(err) = written {
                    tracing::warn!(file = %self.partial.display(), error = %err, "{}", wording::LOG_CASSETTE_WRITE_FAILED);
                    self.queue.fail();
                    error = Some(err);
                }
            }
            if error.is_none() && self.queue.fell_behind() {
                error = Some(std::io::Error::other(wording::cassette_fell_behind(self.queue.limit)));
            }
            self.queue
                .give_back(batch.drain(..).filter_map(|message| match message {
                    Message::Exchange(exchange) => Some(exchange),
                    Message::Header(_) => None,
                }));
            if let Some(ending) = ending {
                break ending;
            }
        };
        let closing = match ending {
            Ending::Closed(closing) => closing,
            // Abandoned: the file stays unfinished, or goes when it holds
            // no exchange (nothing was recorded).
            Ending::Abandoned => {
                let _ = out.flush();
                drop(out);
                if self.rename && exchanges == 0 {
                    let _ = std::fs::remove_file(&self.partial);
                }
                return Ok(exchanges);
            }
        };
        if let Some(err) = error {
            return Err(failed(err));
        }
        // The parts the run's other processes recorded beside it.
        let parts = if self.rename { parts_of(&self.file) } else { Vec::new() };
        let last = match closing {
            Closing::Finish => Line::Finish { exchanges, parts },
            Closing::Interrupted(reason) => Line::Interrupted {
                exchanges,
                reason,
                parts,
            },
        };
        write_line(&mut out, &last).map_err(failed)?;
        let sink = out.into_inner().map_err(|err| failed(err.into_error()))?;
        drop(sink);
        if self.rename {
            sync(&self.partial).map_err(failed)?;
            std::fs::rename(&self.partial, &self.file).map_err(|source| CassetteError::Unwritable {
                file: self.file.clone(),
                source,
            })?;
        }
        Ok(exchanges)
    }

    /// An exchange's lines: its request, then its answer's, each event
    /// written from where it was logged, without a copy.
    fn write_exchange(&self, out: &mut impl Write, exchange: &mut Exchange) -> std::io::Result<()> {
        self.write_request(out, exchange)?;
        let id = exchange.id;
        let mut t_ms = 0;
        for entry in exchange.tape.entries() {
            match entry {
                Entry::Time(at) => t_ms = at,
                Entry::Text(text) => write_line(
                    out,
                    &EventLine::Event {
                        id,
                        t_ms,
                        event: Text::TextDelta(text),
                    },
                )?,
                Entry::Other(index) => {
                    if let Some(event) = exchange.others.get(index) {
                        write_line(out, &EventLine::Event { id, t_ms, event })?;
                    }
                }
            }
        }
        exchange.lines.iter().try_for_each(|line| write_line(out, line))
    }

    /// The `request` line ([`Line::Request`]), secrets scrubbed; the body
    /// goes in as it was sent when it is one line of JSON, without being
    /// parsed into a value and written again.
    fn write_request(&self, out: &mut impl Write, exchange: &mut Exchange) -> std::io::Result<()> {
        let Exchange {
            id,
            at_ms,
            model,
            url,
            body,
            asked,
            ..
        } = exchange;
        write!(out, r#"{{"kind":"request","id":{id},"at_ms":{at_ms},"model":"#)?;
        serde_json::to_writer(&mut *out, model)?;
        if let Some(url) = url {
            out.write_all(br#","url":"#)?;
            serde_json::to_writer(&mut *out, &self.secrets.in_url(url))?;
        }
        out.write_all(br#","body":"#)?;
        if let Some(Asked { request, tools }) = asked {
            let tools = tools.as_deref().unwrap_or_default();
            if !self.secrets.any_in_text() {
                // Nothing to scrub: the wire JSON goes straight in, one line.
                write_streamed_request_text(model, request, tools, out)?;
                return out.write_all(b"}\n");
            }
            write_streamed_request_text(model, request, tools, body)?;
        }
        let body = String::from_utf8_lossy(body);
        let body = self.secrets.in_text(&body);
        if is_json_line(&body) {
            out.write_all(body.as_bytes())?;
        } else {
            match serde_json::from_str::<serde_json::Value>(&body) {
                Ok(value) => serde_json::to_writer(&mut *out, &value)?,
                Err(_) => serde_json::to_writer(&mut *out, &*body)?,
            }
        }
        out.write_all(b"}\n")
    }
}

/// An event line ([`Line::Event`]) of an event borrowed where it was
/// logged: the same JSON.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum EventLine<E> {
    Event { id: u64, t_ms: u64, event: E },
}

/// A text delta ([`ChatEvent::TextDelta`]) borrowed: the same JSON.
#[derive(Serialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
enum Text<'a> {
    TextDelta(&'a str),
}

/// Whether `text` is one JSON value on one line, to be written as it is.
fn is_json_line(text: &str) -> bool {
    !text.contains(['\n', '\r']) && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// The first line of a cassette of `level`.
fn header(level: Level) -> Line {
    Line::Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        level: Some(level),
        recorded_by: concat!("dsh-llm ", env!("CARGO_PKG_VERSION")).to_owned(),
    }
}

/// `line` as one line of JSON.
fn write_line(out: &mut impl Write, line: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

fn sync(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    /// A disk that fills up after `room` bytes.
    struct Full {
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if buf.len() > self.room {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            self.room -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A file in memory that the test reads after the writer is done.
    #[derive(Clone, Default)]
    struct Shown(Arc<Mutex<Vec<u8>>>);

    impl Write for Shown {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn asked(id: u64, body: &str) -> Exchange {
        Exchange {
            id,
            model: "m".to_owned(),
            body: body.as_bytes().to_vec(),
            ..Exchange::default()
        }
    }

    fn ended(mut exchange: Exchange) -> Message {
        exchange.lines.push(Line::End {
            id: exchange.id,
            t_ms: 0,
            outcome: Outcome::Complete,
        });
        Message::Exchange(Box::new(exchange))
    }

    #[test]
    fn a_full_disk_is_an_error_naming_the_file_and_nothing_reads_as_whole() {
        let recorder = Recorder::start(
            "cassette.jsonl".into(),
            "cassette.jsonl.recording".into(),
            Full { room: 100 },
            false,
        );
        recorder.claim(Level::Events).unwrap();
        for id in 1..50 {
            recorder.shared.queue.push(ended(asked(id, "{}")));
        }
        let err = recorder.finish().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cassette.jsonl.recording"), "{text}");
        assert!(text.contains("no storage space"), "{text}");
    }

    /// A disk so slow that the exchanges waiting for it pass the limit:
    /// the stream goes on without waiting, the recording stops, and
    /// finishing it says why.
    #[test]
    fn a_writer_too_far_behind_stops_the_recording_and_never_the_stream() {
        /// A sink whose first write waits until the test lets it go.
        struct Stuck {
            entered: std::sync::mpsc::Sender<()>,
            release: std::sync::mpsc::Receiver<()>,
        }
        impl Write for Stuck {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.entered.send(()).is_ok() {
                    let _ = self.release.recv();
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (entered, stuck) = std::sync::mpsc::channel();
        let (release, held) = std::sync::mpsc::channel();
        let sink = Stuck { entered, release: held };
        let recorder = Recorder::start_limited("c".into(), "c.recording".into(), sink, false, 64 << 10);
        recorder.claim(Level::Events).unwrap();
        // The writer is inside its first write (the header) and stays there.
        stuck.recv().unwrap();
        drop(stuck);
        let body = format!(r#"{{"messages":[],"pad":"{}"}}"#, "x".repeat(2_000));
        for id in 1..=100 {
            recorder.shared.queue.push(ended(asked(id, &body)));
        }
        assert!(recorder.shared.queue.fell_behind());
        assert!(
            recorder.shared.queue.lock().pending.is_empty(),
            "what waited is dropped"
        );
        release.send(()).unwrap();
        let err = recorder.finish().unwrap_err();
        assert!(matches!(err, CassetteError::Unwritable { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("c.recording"), "{text}");
        assert!(
            text.contains("the disk fell more than 64 KB behind the model"),
            "{text}"
        );
    }

    /// A real file descriptor whose writes fail as a full disk's do.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_write_to_a_full_device_leaves_no_cassette_and_an_unfinished_recording() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("full.jsonl");
        let partial = partial_path(&file);
        std::fs::write(&partial, "").unwrap();
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let recorder = Recorder::start(file.clone(), partial.clone(), full, true);
        recorder.claim(Level::Events).unwrap();
        recorder.shared.queue.push(ended(asked(1, r#"{"messages":[]}"#)));
        let err = recorder.finish().unwrap_err();
        assert!(matches!(err, CassetteError::Unwritable { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&*partial.to_string_lossy()), "{text}");
        assert!(text.contains("No space left on device"), "{text}");
        assert!(!file.exists());
        let refused = super::super::Cassette::load(&file).unwrap_err();
        assert!(matches!(refused, CassetteError::Unfinished { .. }), "{refused}");
    }

    #[test]
    fn a_request_line_is_written_as_the_format_says_with_secrets_scrubbed() {
        let shown = Shown::default();
        let recorder = Recorder::start("c".into(), "c.recording".into(), shown.clone(), false);
        recorder.redact("sk-1234567890abcdef");
        recorder.claim(Level::Http).unwrap();
        let body = r#"{"model":"m","messages":[{"role":"user","content":"key sk-1234567890abcdef \"quoted\"\n"}],"stream":true}"#;
        let mut http = asked(1, body);
        http.url = Some("https://user:pw@example.com/v1/chat/completions?token=sk-1234567890abcdef".to_owned());
        recorder.shared.queue.push(ended(http));
        // Bodies that are not one line of JSON: parsed and written on one
        // line, or written as a string.
        recorder.shared.queue.push(ended(asked(2, "{\n  \"a\": 1\n}")));
        recorder.shared.queue.push(ended(asked(3, "not json\n")));
        assert_eq!(recorder.finish().unwrap(), 3);
        let text = String::from_utf8(shown.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8, "{text}");
        let scrubbed = body.replace("sk-1234567890abcdef", "[redacted]");
        let expected = Line::Request {
            id: 1,
            at_ms: 0,
            model: "m".to_owned(),
            url: Some("https://example.com/v1/chat/completions?token=%5Bredacted%5D".to_owned()),
            body: serde_json::from_str(&scrubbed).unwrap(),
        };
        assert_eq!(lines[1], serde_json::to_string(&expected).unwrap());
        assert_eq!(
            lines[3],
            r#"{"kind":"request","id":2,"at_ms":0,"model":"m","body":{"a":1}}"#
        );
        assert_eq!(
            lines[5],
            r#"{"kind":"request","id":3,"at_ms":0,"model":"m","body":"not json\n"}"#
        );
        for line in &lines {
            serde_json::from_str::<Line>(line).unwrap();
        }
    }

    #[test]
    fn an_event_written_borrowed_is_the_line_the_format_says() {
        let text = "a \"delta\"\n\u{1F600}\\";
        let expected = Line::Event {
            id: 3,
            t_ms: 7,
            event: ChatEvent::TextDelta(text.to_owned()),
        };
        let borrowed = EventLine::Event {
            id: 3,
            t_ms: 7,
            event: Text::TextDelta(text),
        };
        assert_eq!(
            serde_json::to_string(&borrowed).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
        let usage = ChatEvent::Usage(crate::model::Usage::reported(5, 2));
        let expected = Line::Event {
            id: 3,
            t_ms: 7,
            event: usage.clone(),
        };
        let borrowed = EventLine::Event {
            id: 3,
            t_ms: 7,
            event: &usage,
        };
        assert_eq!(
            serde_json::to_string(&borrowed).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }

    /// Events logged by two exchanges in turn (the second reusing the
    /// first's buffers): text deltas short and long, times that change,
    /// and other events between them.
    #[test]
    fn logged_events_are_written_as_they_were_heard() {
        let shown = Shown::default();
        let recorder = Recorder::start("c".into(), "c.recording".into(), shown.clone(), false);
        recorder.claim(Level::Events).unwrap();
        let call = |id: &str, arguments: &str| ChatEvent::ToolCall(ToolCall::new(id, "t", arguments));
        let text = |text: &str| ChatEvent::TextDelta(text.to_owned());
        let long = "é".repeat(200);
        let heard: [Vec<(u64, ChatEvent)>; 2] = [
            vec![
                (0, text("")),
                (0, text(&"x".repeat(252))),
                (0, call("c1", r#"{"a":1}"#)),
                (3, text(&"y".repeat(253))),
                (3, text(&long)),
                (9, ChatEvent::Usage(crate::model::Usage::reported(5, 2))),
                (9, ChatEvent::Finish(crate::model::FinishReason::ToolCalls)),
            ],
            vec![
                (7, call("c2", "{}")),
                (7, text("a \"quoted\" word\n")),
                (u64::MAX - 1, text("late")),
            ],
        ];
        for events in &heard {
            let mut log = ExchangeLog::begin(&recorder, recorder.begin());
            for (t_ms, event) in events {
                log.hear(*t_ms, event);
            }
            log.end_at(10, Outcome::Complete);
            // The writer empties it and hands it back for the next one.
            while recorder.shared.queue.lock().spare.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(recorder.finish().unwrap(), 2);
        let written = String::from_utf8(shown.0.lock().unwrap().clone()).unwrap();
        let events: Vec<Line> = written
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .filter(|line| matches!(line, Line::Event { .. }))
            .collect();
        let expected: Vec<Line> = heard
            .iter()
            .zip(1..)
            .flat_map(|(events, id)| {
                events.iter().map(move |(t_ms, event)| Line::Event {
                    id,
                    t_ms: *t_ms,
                    event: event.clone(),
                })
            })
            .collect();
        assert_eq!(events, expected);
    }

    #[test]
    fn one_level_per_cassette() {
        let recorder = Recorder::start("c".into(), "c.recording".into(), Vec::new(), false);
        recorder.claim(Level::Http).unwrap();
        let err = recorder.claim(Level::Events).unwrap_err();
        assert!(matches!(err, CassetteError::MixedLevels { .. }), "{err}");
        assert_eq!(recorder.finish().unwrap(), 0);
        assert_eq!(recorder.finish().unwrap(), 0);
    }

    #[test]
    fn key_shaped_secrets_are_scrubbed_and_short_ones_left_in_text() {
        let recorder = Recorder::start("c".into(), "c.recording".into(), Vec::new(), false);
        recorder.redact("sk-1234567890abcdef");
        recorder.redact("x");
        recorder.redact("");
        assert_eq!(
            recorder.scrub("key sk-1234567890abcdef and sk-1234567890abcdef in context"),
            "key [redacted] and [redacted] in context"
        );
        recorder.finish().unwrap();
    }
}
