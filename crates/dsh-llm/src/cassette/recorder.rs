//! Writing a cassette: lines go to a writer thread through a channel that
//! never blocks the stream being recorded; the file is written as
//! `FILE.recording` and renamed to `FILE` only once its closing line is
//! on disk, so a cassette either reads as whole or is refused as
//! unfinished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use super::error::CassetteError;
use super::format::{FORMAT, Level, Line, Outcome, VERSION};
use crate::wording;

/// The suffix of a recording in progress, beside the cassette it becomes.
pub const RECORDING_SUFFIX: &str = ".recording";

/// Records model exchanges into one cassette file.
///
/// Cheap to clone; clones record into the same file. Wrap a model with
/// [`RecordingModel`](super::RecordingModel) (any [`ChatModel`](crate::ChatModel),
/// at the events level) or [`OpenAiChatModel::recorded`](crate::OpenAiChatModel::recorded)
/// (the HTTP level), run, then call [`Recorder::finish`].
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
    secrets: RwLock<Vec<String>>,
    sender: Mutex<Option<Sender<Message>>>,
    writer: Mutex<Option<JoinHandle<Result<u64, CassetteError>>>>,
}

impl Drop for Shared {
    /// The last clone is gone without [`Recorder::finish`] or
    /// [`Recorder::interrupt`]: the writer ends what it has (an unfinished
    /// `FILE.recording`, or none when no exchange was recorded) before the
    /// drop returns.
    fn drop(&mut self) {
        drop(self.sender.get_mut().unwrap_or_else(PoisonError::into_inner).take());
        if let Some(handle) = self.writer.get_mut().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = handle.join();
        }
    }
}

/// What the writer thread is sent.
enum Message {
    Header(Level),
    Exchange(Vec<Line>),
    /// The last message: how the recording ends.
    Close(Closing),
}

/// How a recording ends.
enum Closing {
    /// Its run ended: the cassette is whole.
    Finish,
    /// Its run was stopped early, for this reason: replay refuses it.
    Interrupted(String),
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
        let (sender, receiver) = channel();
        let target = (file.clone(), partial.clone());
        let writer = std::thread::Builder::new()
            .name("dsh-cassette".into())
            .spawn(move || write_all(receiver, sink, &target.0, &target.1, rename));
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
                secrets: RwLock::new(Vec::new()),
                sender: Mutex::new(Some(sender)),
                writer: Mutex::new(writer),
            }),
        }
    }

    /// The cassette's name (where it will be once finished).
    pub fn file(&self) -> &Path {
        &self.shared.file
    }

    /// Never writes `secret` (an API key, a token): every occurrence in a
    /// request, URL or answer is written as `[redacted]`. The OpenAI
    /// client's own key is added when it is recorded.
    pub fn redact(&self, secret: impl Into<String>) {
        let secret = secret.into();
        if secret.is_empty() {
            return;
        }
        let mut secrets = self.shared.secrets.write().unwrap_or_else(PoisonError::into_inner);
        if !secrets.contains(&secret) {
            secrets.push(secret);
        }
    }

    /// `text` with every secret replaced.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let secrets = self.shared.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let mut text = text.to_owned();
        for secret in secrets.iter() {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), wording::REDACTED);
            }
        }
        text
    }

    /// Fixes the cassette's level on first use; a model of the other level
    /// is refused.
    pub(crate) fn claim(&self, level: Level) -> Result<(), CassetteError> {
        let recorded = *self.shared.level.get_or_init(|| {
            self.send(Message::Header(level));
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

    /// A new exchange's id and the milliseconds since the recording began.
    pub(crate) fn begin(&self) -> (u64, u64) {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        (id, millis(self.shared.started.elapsed()))
    }

    /// Queues one whole exchange for the file; never blocks.
    pub(crate) fn exchange(&self, lines: Vec<Line>) {
        self.send(Message::Exchange(lines));
    }

    fn send(&self, message: Message) {
        let sender = self.shared.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = sender.as_ref() {
            // The writer only stops early on a failed write, which finish reports.
            let _ = sender.send(message);
        }
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

    fn close(&self, closing: Closing) -> Result<u64, CassetteError> {
        self.shared.level.get_or_init(|| {
            self.send(Message::Header(Level::Events));
            Level::Events
        });
        if let Some(sender) = self.shared.sender.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = sender.send(Message::Close(closing));
        }
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

/// The lines of one exchange while it runs; sent to the file as one block
/// when it ends, or, if it is dropped first, with a `dropped` ending.
pub(crate) struct ExchangeLog {
    recorder: Recorder,
    id: u64,
    began: Instant,
    lines: Vec<Line>,
    ended: bool,
}

impl ExchangeLog {
    /// Begins an exchange with its request line (`id` from [`Recorder::begin`]).
    pub(crate) fn begin(recorder: &Recorder, id: u64, request: Line) -> Self {
        ExchangeLog {
            recorder: recorder.clone(),
            id,
            began: Instant::now(),
            lines: vec![request],
            ended: false,
        }
    }

    /// The exchange's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Milliseconds since the exchange began.
    pub(crate) fn t_ms(&self) -> u64 {
        millis(self.began.elapsed())
    }

    /// The recorder (to scrub what is logged).
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Adds a line of the answer.
    pub(crate) fn push(&mut self, line: Line) {
        if !self.ended {
            self.lines.push(line);
        }
    }

    /// Ends the exchange and queues it for the file (once).
    pub(crate) fn end(&mut self, outcome: Outcome) {
        if self.ended {
            return;
        }
        let t_ms = self.t_ms();
        self.lines.push(Line::End {
            id: self.id,
            t_ms,
            outcome,
        });
        self.ended = true;
        self.recorder.exchange(std::mem::take(&mut self.lines));
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

/// The writer thread: every line, then the closing one, then the rename.
fn write_all(
    receiver: Receiver<Message>,
    sink: impl Write,
    file: &Path,
    partial: &Path,
    rename: bool,
) -> Result<u64, CassetteError> {
    let failed = |source| CassetteError::Unwritable {
        file: partial.to_path_buf(),
        source,
    };
    let mut out = std::io::BufWriter::new(sink);
    let mut exchanges = 0u64;
    let mut error: Option<std::io::Error> = None;
    let put = |out: &mut std::io::BufWriter<_>, line: &Line, error: &mut Option<std::io::Error>| {
        if error.is_some() {
            return;
        }
        let written = serde_json::to_writer(&mut *out, line)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        if let Err(err) = written {
            tracing::warn!(file = %partial.display(), error = %err, "{}", wording::LOG_CASSETTE_WRITE_FAILED);
            *error = Some(err);
        }
    };
    let mut closing = None;
    for message in receiver {
        match message {
            Message::Header(level) => {
                let header = Line::Header {
                    format: FORMAT.to_owned(),
                    version: VERSION,
                    level: Some(level),
                    recorded_by: concat!("dsh-llm ", env!("CARGO_PKG_VERSION")).to_owned(),
                };
                put(&mut out, &header, &mut error);
            }
            Message::Exchange(lines) => {
                exchanges += 1;
                for line in &lines {
                    put(&mut out, line, &mut error);
                }
                // Whole exchanges reach the disk as they end.
                if error.is_none()
                    && let Err(err) = out.flush()
                {
                    error = Some(err);
                }
            }
            Message::Close(how) => {
                closing = Some(how);
                break;
            }
        }
    }
    // The parts the run's other processes recorded beside it.
    let parts = if rename { parts_of(file) } else { Vec::new() };
    let last = match closing {
        Some(Closing::Finish) => Line::Finish { exchanges, parts },
        Some(Closing::Interrupted(reason)) => Line::Interrupted {
            exchanges,
            reason,
            parts,
        },
        // Dropped without an ending: the file stays unfinished, or goes
        // when it holds no exchange (nothing was recorded).
        None => {
            let _ = out.flush();
            drop(out);
            if rename && exchanges == 0 {
                let _ = std::fs::remove_file(partial);
            }
            return Ok(exchanges);
        }
    };
    put(&mut out, &last, &mut error);
    if let Some(err) = error {
        return Err(failed(err));
    }
    let sink = out.into_inner().map_err(|err| failed(err.into_error()))?;
    drop(sink);
    if rename {
        sync(partial).map_err(failed)?;
        std::fs::rename(partial, file).map_err(|source| CassetteError::Unwritable {
            file: file.to_path_buf(),
            source,
        })?;
    }
    Ok(exchanges)
}

fn sync(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn end(id: u64) -> Vec<Line> {
        vec![Line::End {
            id,
            t_ms: 0,
            outcome: Outcome::Complete,
        }]
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
            recorder.exchange(end(id));
        }
        let err = recorder.finish().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cassette.jsonl.recording"), "{text}");
        assert!(text.contains("no storage space"), "{text}");
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
    fn secrets_are_scrubbed() {
        let recorder = Recorder::start("c".into(), "c.recording".into(), Vec::new(), false);
        recorder.redact("sk-123");
        recorder.redact("");
        assert_eq!(recorder.scrub("key sk-123 and sk-123"), "key [redacted] and [redacted]");
        recorder.finish().unwrap();
    }
}
