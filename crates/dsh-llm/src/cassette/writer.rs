//! The writer thread: what the recorders hand it, turned into lines and
//! written a batch at a time, the stream never waiting on serialization or
//! the disk; then the closing line, and the rename of `FILE.recording` to
//! `FILE` once that line is on disk.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::capture::{Asked, Capture};
use super::error::CassetteError;
use super::file_names::parts_of;
use super::format::{Line, header};
use super::queue::{Closing, Ending, Message, Queue};
use super::scrub::Secrets;
use super::tape::Entry;
use crate::openai::wire::write_streamed_request_text;
use crate::wording;

/// The writer's buffer: a batch reaches the file in writes of this size.
const WRITE_BUFFER: usize = 64 * 1024;

/// The writer thread: what the recorders hand it, turned into lines and
/// written a batch at a time; then the closing line and the rename.
pub(super) struct Writer {
    pub(super) queue: Arc<Queue>,
    pub(super) secrets: Arc<Secrets>,
    pub(super) file: PathBuf,
    pub(super) partial: PathBuf,
    pub(super) rename: bool,
}

/// What the writer has written so far: its exchanges, and the error that
/// stopped it, if one did (what comes after is dropped).
#[derive(Default)]
struct Written {
    exchanges: u64,
    error: Option<std::io::Error>,
}

impl Writer {
    /// Writes what the recorders hand it until the recording ends, then
    /// closes the file as it ended. Returns how many exchanges it wrote.
    pub(super) fn run(self, sink: impl Write) -> Result<u64, CassetteError> {
        let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, sink);
        let mut written = Written::default();
        let mut batch = Vec::new();
        let ending = loop {
            let ending = self.queue.next_batch(&mut batch);
            self.write_batch(&mut out, &mut batch, &mut written);
            if let Some(ending) = ending {
                break ending;
            }
        };
        match ending {
            Ending::Closed(closing) => self.close(out, closing, written),
            Ending::Abandoned => Ok(self.abandon(out, written.exchanges)),
        }
    }

    /// Writes one batch (unless a write failed before), then hands its
    /// exchanges back to the queue, emptied.
    fn write_batch(&self, out: &mut impl Write, batch: &mut Vec<Message>, written: &mut Written) {
        if written.error.is_none() {
            let result = batch
                .iter_mut()
                .try_for_each(|message| match message {
                    Message::Header(level) => write_line(out, &header(*level)),
                    Message::Exchange(exchange) => {
                        written.exchanges += 1;
                        self.write_exchange(out, exchange)
                    }
                })
                // Whole exchanges reach the file batch by batch.
                .and_then(|()| out.flush());
            if let Err(err) = result {
                tracing::warn!(file = %self.partial.display(), error = %err, "{}", wording::LOG_CASSETTE_WRITE_FAILED);
                self.queue.fail();
                written.error = Some(err);
            }
        }
        if written.error.is_none() && self.queue.fell_behind() {
            written.error = Some(std::io::Error::other(wording::cassette_fell_behind(self.queue.limit)));
        }
        self.queue
            .give_back(batch.drain(..).filter_map(|message| match message {
                Message::Exchange(exchange) => Some(exchange),
                Message::Header(_) => None,
            }));
    }

    /// The last recorder is gone without closing the recording: the file
    /// stays unfinished, or goes when it holds no exchange (nothing was
    /// recorded).
    fn abandon(&self, mut out: impl Write, exchanges: u64) -> u64 {
        let _ = out.flush();
        drop(out);
        if self.rename && exchanges == 0 {
            let _ = std::fs::remove_file(&self.partial);
        }
        exchanges
    }

    /// Writes the closing line (naming the parts the run's other processes
    /// recorded beside it) and renames the file to its cassette name.
    fn close<W: Write>(
        &self,
        mut out: std::io::BufWriter<W>,
        closing: Closing,
        written: Written,
    ) -> Result<u64, CassetteError> {
        let failed = |source| CassetteError::Unwritable {
            file: self.partial.clone(),
            source,
        };
        let Written { exchanges, error } = written;
        if let Some(err) = error {
            return Err(failed(err));
        }
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
    fn write_exchange(&self, out: &mut impl Write, exchange: &mut Capture) -> std::io::Result<()> {
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
    fn write_request(&self, out: &mut impl Write, exchange: &mut Capture) -> std::io::Result<()> {
        let Capture {
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
pub(super) enum EventLine<E> {
    Event { id: u64, t_ms: u64, event: E },
}

/// A text delta ([`ChatEvent::TextDelta`]) borrowed: the same JSON.
#[derive(Serialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub(super) enum Text<'a> {
    TextDelta(&'a str),
}

/// Whether `text` is one JSON value on one line, to be written as it is.
fn is_json_line(text: &str) -> bool {
    !text.contains(['\n', '\r']) && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
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
    use crate::model::ChatEvent;

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
}
