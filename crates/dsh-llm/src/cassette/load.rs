//! Reading a cassette file: every line checked, every exchange whole, the
//! closing line present; any fault is an error naming the file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;

use super::error::CassetteError;
use super::format::{FORMAT, Level, Line, Outcome, VERSION, from_hex};
use super::recorder::partial_path;
use crate::model::ChatEvent;
use crate::wording;

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

/// A whole cassette's contents.
pub(crate) struct Contents {
    pub(crate) level: Level,
    pub(crate) exchanges: Vec<Exchange>,
    /// Why its run was stopped before it ended, when it was
    /// ([`Recorder::interrupt`](super::Recorder::interrupt)).
    pub(crate) interrupted: Option<String>,
    /// The parts its closing line lists (file names beside it).
    pub(crate) parts: Vec<String>,
}

/// Reads and checks `file` and every part it lists, as one cassette: the
/// parts' exchanges follow its own, each numbered after the last.
pub(crate) fn load_whole(file: &Path) -> Result<Contents, CassetteError> {
    let mut whole = load(file)?;
    let dir = file.parent().filter(|dir| !dir.as_os_str().is_empty());
    for name in std::mem::take(&mut whole.parts) {
        let part = dir.map_or_else(|| PathBuf::from(&name), |dir| dir.join(&name));
        if !part.exists() && !super::recorder::partial_path(&part).exists() {
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

/// Reads and checks `file`.
pub(crate) fn load(file: &Path) -> Result<Contents, CassetteError> {
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
    let corrupt = |line: usize, message: String| CassetteError::Corrupt {
        file: file.to_path_buf(),
        line,
        message,
    };
    let text = String::from_utf8(bytes).map_err(|err| {
        let line = err.as_bytes()[..err.utf8_error().valid_up_to()]
            .iter()
            .filter(|byte| **byte == b'\n')
            .count()
            + 1;
        corrupt(line, wording::CASSETTE_NOT_UTF8.to_owned())
    })?;
    let ends_whole = text.is_empty() || text.ends_with('\n');
    let lines: Vec<&str> = text.strip_suffix('\n').unwrap_or(&text).split('\n').collect();
    let last = lines.len();
    let torn = |number: usize| !ends_whole && number == last;

    let header = lines.first().copied().unwrap_or_default();
    let level = read_header(file, header, torn(1))?;
    let mut open: HashMap<u64, Exchange> = HashMap::new();
    let mut done: Vec<Exchange> = Vec::new();
    let mut finished = false;
    let mut interrupted = None;
    let mut parts = Vec::new();
    for (index, text) in lines.iter().enumerate().skip(1) {
        let number = index + 1;
        if finished {
            return Err(corrupt(number, wording::CASSETTE_AFTER_FINISH.to_owned()));
        }
        let line: Line = match serde_json::from_str(text) {
            Ok(line) => line,
            Err(_) if torn(number) => {
                return Err(CassetteError::Torn {
                    file: file.to_path_buf(),
                    line: number,
                });
            }
            Err(err) => return Err(corrupt(number, json_error(&err))),
        };
        let no_request = |id: u64| corrupt(number, wording::cassette_no_request(id));
        match line {
            Line::Header { .. } => return Err(corrupt(number, wording::CASSETTE_SECOND_HEADER.to_owned())),
            Line::Request {
                id,
                at_ms: _,
                model,
                url,
                body,
            } => {
                if open.contains_key(&id) || done.iter().any(|exchange| exchange.id == id) {
                    return Err(corrupt(number, wording::cassette_duplicate_id(id)));
                }
                open.insert(
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
            }
            Line::Status {
                id,
                t_ms,
                status,
                headers,
            } => {
                if level != Level::Http {
                    return Err(corrupt(number, wording::cassette_wrong_level("status", level.as_str())));
                }
                open.get_mut(&id).ok_or_else(|| no_request(id))?.answer.head = Some(Head { t_ms, status, headers });
            }
            Line::Chunk { id, t_ms, text, hex } => {
                if level != Level::Http {
                    return Err(corrupt(number, wording::cassette_wrong_level("chunk", level.as_str())));
                }
                let bytes = match (text, hex) {
                    (Some(text), None) => Bytes::from(text),
                    (None, Some(hex)) => Bytes::from(
                        from_hex(&hex).ok_or_else(|| corrupt(number, wording::CASSETTE_BAD_HEX.to_owned()))?,
                    ),
                    _ => return Err(corrupt(number, wording::CASSETTE_CHUNK_SHAPE.to_owned())),
                };
                open.get_mut(&id)
                    .ok_or_else(|| no_request(id))?
                    .answer
                    .chunks
                    .push((t_ms, bytes));
            }
            Line::Event { id, t_ms, event } => {
                if level != Level::Events {
                    return Err(corrupt(number, wording::cassette_wrong_level("event", level.as_str())));
                }
                open.get_mut(&id)
                    .ok_or_else(|| no_request(id))?
                    .answer
                    .events
                    .push((t_ms, event));
            }
            Line::End { id, t_ms, outcome } => {
                let mut whole = open.remove(&id).ok_or_else(|| no_request(id))?;
                whole.end = (t_ms, outcome);
                done.push(whole);
            }
            Line::Finish { exchanges, .. } | Line::Interrupted { exchanges, .. } => {
                if let Some(id) = open.keys().min() {
                    return Err(corrupt(number, wording::cassette_open_exchange(*id)));
                }
                if exchanges != done.len() as u64 {
                    return Err(corrupt(number, wording::cassette_count(exchanges, done.len())));
                }
                match line {
                    Line::Interrupted {
                        reason, parts: listed, ..
                    } => {
                        interrupted = Some(reason);
                        parts = listed;
                    }
                    Line::Finish { parts: listed, .. } => parts = listed,
                    _ => {}
                }
                finished = true;
            }
        }
    }
    if !finished {
        return Err(CassetteError::Unfinished {
            file: file.to_path_buf(),
            reason: wording::CASSETTE_NO_FINISH.to_owned(),
        });
    }
    done.sort_by_key(|exchange| exchange.id);
    Ok(Contents {
        level,
        exchanges: done,
        interrupted,
        parts,
    })
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
