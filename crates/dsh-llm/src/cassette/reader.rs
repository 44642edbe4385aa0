//! Reading a cassette file: every line checked, every exchange whole, the
//! closing line present; any fault is an error naming the file and line.
//! The parts a cassette lists are read with it, as one.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use serde_json::Value;

use super::contents::Contents;
use super::error::CassetteError;
use super::exchange::{Answer, Exchange, Head};
use super::file_names::{part_beside, partial_path};
use super::format::{FORMAT, Level, Line, Outcome, VERSION, from_hex};
use crate::model::ChatEvent;
use crate::wording;

/// Reads and checks `file` and every part it lists, as one cassette: the
/// parts' exchanges follow its own, each numbered after the last.
pub(crate) fn load_whole(file: &Path) -> Result<Contents, CassetteError> {
    let mut whole = load(file)?;
    for name in std::mem::take(&mut whole.parts) {
        let part = part_beside(file, &name);
        if !part.exists() && !partial_path(&part).exists() {
            return Err(CassetteError::Unfinished {
                file: file.to_path_buf(),
                reason: wording::cassette_part_missing(&part),
            });
        }
        // A part its process closed as interrupted (stopped by the run that
        // recorded the whole) holds what it did before: part of the run.
        let contents = load(&part)?;
        if contents.level != whole.level && !contents.exchanges.is_empty() {
            return Err(CassetteError::BadPart {
                file: file.to_path_buf(),
                reason: wording::cassette_part_level(&part, contents.level.as_str(), whole.level.as_str()),
            });
        }
        let offset = whole.exchanges.iter().map(|exchange| exchange.id).max().unwrap_or(0);
        whole
            .exchanges
            .extend(contents.exchanges.into_iter().map(|mut exchange| {
                exchange.id += offset;
                exchange.part = Some(part.clone());
                exchange
            }));
    }
    Ok(whole)
}

/// Reads and checks `file`: its text, its header, then each line in turn,
/// and last that it was closed.
pub(crate) fn load(file: &Path) -> Result<Contents, CassetteError> {
    let text = read_text(file)?;
    let ends_whole = text.is_empty() || text.ends_with('\n');
    let lines: Vec<&str> = text.strip_suffix('\n').unwrap_or(&text).split('\n').collect();
    let last = lines.len();
    // The last line of a file that does not end with a newline was being
    // written when the file was cut.
    let torn = |number: usize| !ends_whole && number == last;
    let header = lines.first().copied().unwrap_or_default();
    let mut reader = Reader::new(file, read_header(file, header, torn(1))?);
    for (index, text) in lines.iter().enumerate().skip(1) {
        let number = index + 1;
        reader.read_line(number, text, torn(number))?;
    }
    reader.contents()
}

/// The file's text: an unreadable file is an error, told apart from a
/// recording still unfinished; text that is not UTF-8 is one naming its
/// line.
fn read_text(file: &Path) -> Result<String, CassetteError> {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(source) => {
            let partial = partial_path(file);
            if source.kind() == std::io::ErrorKind::NotFound && partial.exists() {
                return Err(CassetteError::Unfinished {
                    file: file.to_path_buf(),
                    reason: wording::cassette_only_partial(&partial),
                });
            }
            return Err(CassetteError::Unreadable {
                file: file.to_path_buf(),
                source,
            });
        }
    };
    String::from_utf8(bytes).map_err(|err| {
        let line = err.as_bytes()[..err.utf8_error().valid_up_to()]
            .iter()
            .filter(|byte| **byte == b'\n')
            .count()
            + 1;
        CassetteError::Corrupt {
            file: file.to_path_buf(),
            line,
            message: wording::CASSETTE_NOT_UTF8.to_owned(),
        }
    })
}

/// A cassette file being read, line after line: the exchanges still open
/// and those that ended, until its closing line.
struct Reader<'a> {
    file: &'a Path,
    level: Level,
    open: HashMap<u64, Exchange>,
    done: Vec<Exchange>,
    /// Its closing line was read.
    finished: bool,
    interrupted: Option<String>,
    parts: Vec<String>,
}

impl<'a> Reader<'a> {
    fn new(file: &'a Path, level: Level) -> Self {
        Reader {
            file,
            level,
            open: HashMap::new(),
            done: Vec::new(),
            finished: false,
            interrupted: None,
            parts: Vec::new(),
        }
    }

    /// A fault of line `number`.
    fn corrupt(&self, line: usize, message: String) -> CassetteError {
        corrupt(self.file, line, message)
    }

    /// Reads line `number` (`torn`: the last line of a file cut short).
    fn read_line(&mut self, number: usize, text: &str, torn: bool) -> Result<(), CassetteError> {
        if self.finished {
            return Err(self.corrupt(number, wording::CASSETTE_AFTER_FINISH.to_owned()));
        }
        let line: Line = match serde_json::from_str(text) {
            Ok(line) => line,
            Err(_) if torn => {
                return Err(CassetteError::Torn {
                    file: self.file.to_path_buf(),
                    line: number,
                });
            }
            Err(err) => return Err(self.corrupt(number, json_error(&err))),
        };
        match line {
            Line::Header { .. } => Err(self.corrupt(number, wording::CASSETTE_SECOND_HEADER.to_owned())),
            Line::Request {
                id,
                at_ms: _,
                model,
                url,
                body,
            } => self.request(number, id, model, url, body),
            Line::Status {
                id,
                t_ms,
                status,
                headers,
            } => {
                self.expect_level(number, Level::Http, "status")?;
                self.exchange(number, id)?.answer.head = Some(Head { t_ms, status, headers });
                Ok(())
            }
            Line::Chunk { id, t_ms, text, hex } => self.chunk(number, id, t_ms, text, hex),
            Line::Event { id, t_ms, event } => self.event(number, id, t_ms, event),
            Line::End { id, t_ms, outcome } => {
                let mut whole = self.open.remove(&id).ok_or_else(|| self.no_request(number, id))?;
                whole.end = (t_ms, outcome);
                self.done.push(whole);
                Ok(())
            }
            closing @ (Line::Finish { .. } | Line::Interrupted { .. }) => self.close(number, closing),
        }
    }

    /// An exchange begins: its request.
    fn request(
        &mut self,
        number: usize,
        id: u64,
        model: String,
        url: Option<String>,
        body: Value,
    ) -> Result<(), CassetteError> {
        if self.open.contains_key(&id) || self.done.iter().any(|exchange| exchange.id == id) {
            return Err(self.corrupt(number, wording::cassette_duplicate_id(id)));
        }
        self.open.insert(
            id,
            Exchange {
                id,
                part: None,
                line: number,
                model,
                url,
                body,
                answer: Answer::default(),
                end: (0, Outcome::Dropped),
            },
        );
        Ok(())
    }

    /// A piece of an HTTP answer's body, as text or hex.
    fn chunk(
        &mut self,
        number: usize,
        id: u64,
        t_ms: u64,
        text: Option<String>,
        hex: Option<String>,
    ) -> Result<(), CassetteError> {
        self.expect_level(number, Level::Http, "chunk")?;
        let bytes = match (text, hex) {
            (Some(text), None) => Bytes::from(text),
            (None, Some(hex)) => {
                Bytes::from(from_hex(&hex).ok_or_else(|| self.corrupt(number, wording::CASSETTE_BAD_HEX.to_owned()))?)
            }
            _ => return Err(self.corrupt(number, wording::CASSETTE_CHUNK_SHAPE.to_owned())),
        };
        self.exchange(number, id)?.answer.chunks.push((t_ms, bytes));
        Ok(())
    }

    /// An event a model streamed.
    fn event(&mut self, number: usize, id: u64, t_ms: u64, event: ChatEvent) -> Result<(), CassetteError> {
        self.expect_level(number, Level::Events, "event")?;
        self.exchange(number, id)?.answer.events.push((t_ms, event));
        Ok(())
    }

    /// The closing line (`Finish` or `Interrupted`): every exchange ended,
    /// and as many as it counts.
    fn close(&mut self, number: usize, closing: Line) -> Result<(), CassetteError> {
        if let Some(id) = self.open.keys().min() {
            return Err(self.corrupt(number, wording::cassette_open_exchange(*id)));
        }
        let (exchanges, interrupted, parts) = match closing {
            Line::Finish { exchanges, parts } => (exchanges, None, parts),
            Line::Interrupted {
                exchanges,
                reason,
                parts,
            } => (exchanges, Some(reason), parts),
            _ => return Ok(()),
        };
        if exchanges != self.done.len() as u64 {
            return Err(self.corrupt(number, wording::cassette_count(exchanges, self.done.len())));
        }
        self.interrupted = interrupted;
        self.parts = parts;
        self.finished = true;
        Ok(())
    }

    /// A line of this kind is one of `level`'s.
    fn expect_level(&self, number: usize, level: Level, kind: &str) -> Result<(), CassetteError> {
        if self.level == level {
            Ok(())
        } else {
            Err(self.corrupt(number, wording::cassette_wrong_level(kind, self.level.as_str())))
        }
    }

    /// The open exchange `id`, which line `number` answers.
    fn exchange(&mut self, number: usize, id: u64) -> Result<&mut Exchange, CassetteError> {
        let file = self.file;
        self.open
            .get_mut(&id)
            .ok_or_else(|| corrupt(file, number, wording::cassette_no_request(id)))
    }

    fn no_request(&self, number: usize, id: u64) -> CassetteError {
        self.corrupt(number, wording::cassette_no_request(id))
    }

    /// What was read, once the closing line was.
    fn contents(self) -> Result<Contents, CassetteError> {
        if !self.finished {
            return Err(CassetteError::Unfinished {
                file: self.file.to_path_buf(),
                reason: wording::CASSETTE_NO_FINISH.to_owned(),
            });
        }
        let mut exchanges = self.done;
        exchanges.sort_by_key(|exchange| exchange.id);
        Ok(Contents {
            level: self.level,
            exchanges,
            interrupted: self.interrupted,
            parts: self.parts,
        })
    }
}

/// A fault of `file`'s line `line`.
fn corrupt(file: &Path, line: usize, message: String) -> CassetteError {
    CassetteError::Corrupt {
        file: file.to_path_buf(),
        line,
        message,
    }
}

/// The level the header names, after checking format and version.
fn read_header(file: &Path, text: &str, torn: bool) -> Result<Level, CassetteError> {
    let not_a_cassette = || CassetteError::NotACassette {
        file: file.to_path_buf(),
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) if torn && text.starts_with('{') => {
            return Err(CassetteError::Torn {
                file: file.to_path_buf(),
                line: 1,
            });
        }
        Err(_) => return Err(not_a_cassette()),
    };
    if value.get("kind").and_then(Value::as_str) != Some("header")
        || value.get("format").and_then(Value::as_str) != Some(FORMAT)
    {
        return Err(not_a_cassette());
    }
    let version = value.get("version").and_then(Value::as_u64).unwrap_or(0);
    if version != u64::from(VERSION) {
        return Err(CassetteError::Version {
            file: file.to_path_buf(),
            found: version,
        });
    }
    match serde_json::from_value::<Line>(value) {
        Ok(Line::Header { level, .. }) => Ok(level.unwrap_or(Level::Events)),
        Ok(_) => Err(not_a_cassette()),
        Err(err) => Err(CassetteError::Corrupt {
            file: file.to_path_buf(),
            line: 1,
            message: json_error(&err),
        }),
    }
}

/// serde's message, with its position given as a column of the line (the
/// line is the cassette's own, named apart).
fn json_error(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&suffix) {
        Some(message) => wording::cassette_json_error(message, err.column()),
        None => text,
    }
}
