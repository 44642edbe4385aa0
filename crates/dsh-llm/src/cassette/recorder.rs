//! Recording a cassette: a [`Recorder`] hands each exchange, as it ends,
//! to a writer thread ([`writer`](super::writer)) through a queue
//! ([`queue`](super::queue)), so the stream being recorded never waits on
//! serialization or the disk; the file is written as `FILE.recording` and
//! renamed to `FILE` only once its closing line is on disk, so a cassette
//! either reads as whole or is refused as unfinished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::capture::Capture;
use super::error::CassetteError;
use super::file_names::{MAX_PARTS, part_path, partial_path, remove_parts};
use super::format::Level;
use super::queue::{Closing, Ending, Message, PENDING_BYTES, Queue};
use super::writer::Writer;
use crate::wording;

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
    /// when it begins: [`ExchangeLog::begin`](super::exchange_log::ExchangeLog::begin)).
    pub(crate) fn begin(&self) -> Box<Capture> {
        let mut exchange = self.shared.queue.spare();
        exchange.id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        exchange
    }

    /// When the recording began, which its exchanges' times count from.
    pub(super) fn started(&self) -> Instant {
        self.shared.started
    }

    /// Hands an ended exchange to the writer.
    pub(super) fn hand_over(&self, exchange: Box<Capture>) {
        self.shared.queue.push(Message::Exchange(exchange));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cassette::exchange_log::ExchangeLog;
    use crate::cassette::format::{Line, Outcome};
    use crate::message::ToolCall;
    use crate::model::ChatEvent;

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

    fn asked(id: u64, body: &str) -> Capture {
        Capture {
            id,
            model: "m".to_owned(),
            body: body.as_bytes().to_vec(),
            ..Capture::default()
        }
    }

    fn ended(mut exchange: Capture) -> Message {
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

    /// A writer that found nothing for a while sleeps until woken, and the
    /// next exchange wakes it: written, not left waiting for the end.
    #[test]
    fn an_idle_writer_sleeps_and_the_next_exchange_wakes_it() {
        let shown = Shown::default();
        let recorder = Recorder::start("c".into(), "c.recording".into(), shown.clone(), false);
        recorder.claim(Level::Events).unwrap();
        while !recorder.shared.queue.parked() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut log = ExchangeLog::begin(&recorder, recorder.begin());
        log.hear(0, &ChatEvent::TextDelta("woken".to_owned()));
        log.end_at(1, Outcome::Complete);
        while recorder.shared.queue.lock().spare.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let written = String::from_utf8(shown.0.lock().unwrap().clone()).unwrap();
        assert!(written.contains(r#""data":"woken""#), "{written}");
        assert_eq!(recorder.finish().unwrap(), 1);
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
