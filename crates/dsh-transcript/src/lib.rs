#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use dsh_llm::{Message, Usage};
use dsh_subagent_api::{AgentId, ChildStart, RemoteChild};
use serde::{Deserialize, Serialize};

mod context_stop;
mod lock;
pub mod owner_only;
mod repair;
mod stop;
mod turns;
pub mod wording;

pub use context_stop::{ContextStop, CountedBy, FoundBy};
pub use lock::{TreeLock, TreeLockError, lock_path};
pub use repair::{repair_for_resume, repair_torn_tail};
pub use stop::{AgentStop, DISCONNECTED, INTERRUPTED};
pub use turns::{OpenRound, OpenTurn, Turns};

/// The format version written in every header. Version 2 keeps an
/// interrupted turn (a crash, a resumable stop) to be resumed, where version
/// 1 abandoned it: a [`TranscriptEntry::Repair`] in a version-1 transcript
/// drops the messages of the run it follows, in a version-2 one it only
/// records the torn bytes it cut off.
pub const TRANSCRIPT_VERSION: u32 = 2;

/// Bytes of a transcript line written at once: a shorter line is one write.
const LINE_BUFFER: usize = 64 * 1024;

/// A [`TranscriptEntry::Message`] line over a borrowed message: the same
/// JSON, without a copy of the message.
#[derive(Serialize)]
#[serde(tag = "type", rename = "message")]
struct MessageLine<'a> {
    message: &'a Message,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notices: &'a [String],
}

/// One line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TranscriptEntry {
    /// The first line: who the agent is.
    Header {
        /// [`TRANSCRIPT_VERSION`].
        version: u32,
        /// The agent's id.
        id: AgentId,
        /// Its parent, for a child.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<AgentId>,
        /// Its delegation depth.
        depth: u64,
        /// Its display label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The model it uses.
        model: String,
        /// Its system prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_prompt: Option<String>,
        /// Milliseconds since the Unix epoch.
        created_at_ms: u64,
        /// How a child came about (the tool that asked, the provider that
        /// runs it); absent for a top-level agent and in older transcripts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start: Option<StartRecord>,
    },
    /// Messages the agent was seeded with (a fork's inherited turns).
    Seed {
        /// The inherited messages.
        messages: Vec<Message>,
    },
    /// One message of the conversation, as it happened. A tool result is
    /// written as soon as its call returns (so the results of one round
    /// follow in the order they finished; a reader puts them back in the
    /// order of the calls), with the full text the tool gave.
    Message {
        /// The message.
        message: Message,
        /// The background tasks whose completion notices this message
        /// delivers (so that, across a crash, each is delivered once).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notices: Vec<String>,
    },
    /// The texts of tool results as the model was given them, when the
    /// context fit cut them before the request that carried them: each
    /// replaces the text of the result of its call recorded earlier in the
    /// same turn.
    Fitted {
        /// The cut results.
        results: Vec<FittedResult>,
    },
    /// A continuable child's descriptor, recorded once before its first turn
    /// (a `dsh_subagent_api::ContinuationDescriptor` as JSON; kept raw so a
    /// reader can report an unknown or malformed one).
    Descriptor {
        /// The descriptor object.
        descriptor: serde_json::Value,
    },
    /// A resume found a torn last line (a crash mid-write) and repaired the
    /// file: the torn bytes were cut off and are kept here. In a version-1
    /// transcript it also abandoned the messages of the interrupted run
    /// before it; in version 2 that run is kept and resumed.
    Repair {
        /// What was found, as [`read_transcript`] reported it.
        diagnostic: String,
        /// The torn bytes (lossy UTF-8).
        torn: String,
    },
    /// A child of this agent began a run (its first, or a continuation):
    /// an in-process child's transcript is `<id>.jsonl` beside this one. A
    /// tree view follows these entries instead of reading every transcript.
    ///
    /// A child in another process (an ACP agent) keeps no transcript here:
    /// its entries carry what is known of it instead ([`RemoteChild`]), one
    /// when its run is published and one when it ended.
    Child {
        /// The child's id (for a child in another process, its run's id).
        id: AgentId,
        /// The id of this agent's tool call that started an in-process
        /// child, on its first entry: what a tree view shows of the child
        /// when its own transcript cannot be read. Absent in older
        /// transcripts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// What is known of a child in another process; absent for an
        /// in-process child.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elsewhere: Option<RemoteChild>,
    },
    /// A background child this agent started, recorded before the child
    /// runs (and so before it keeps records of its own): what a resume
    /// needs to start it again, under the same ids, if the process ended
    /// first.
    ChildStart {
        /// The child's id (the one the model was told).
        id: AgentId,
        /// Its task, descriptor, prompt and call.
        start: ChildStart,
    },
    /// A run ended. One that stopped `interrupted` (a resumable stop) leaves
    /// its turn open: a resume goes on with it.
    TurnEnd {
        /// Why it stopped (`completed`, `cancelled`, `interrupted`, …).
        stop: String,
        /// The same stop as a value, so that a child recovered after a
        /// crash hands back the very result its run gave; absent in older
        /// transcripts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<crate::AgentStop>,
        /// Model calls made.
        steps: u32,
        /// Tokens the run's own model calls spent (`"counted":"estimated"`
        /// when some count is the loop's estimate); absent when it made none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Tokens its children spent during the run; absent when none was reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        children_usage: Option<Usage>,
        /// What the run's own model calls cost, when every one of them was
        /// priced (`"counted":"estimated"` when priced from estimated
        /// tokens); absent without a price, or in older transcripts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<dsh_llm::Cost>,
        /// When the run waited, began, called its model and ended, and how
        /// long its answer was; absent in older transcripts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        times: Option<TurnTimes>,
    },
}

impl TranscriptEntry {
    /// A [`TranscriptEntry::Message`] that delivers no notice.
    pub fn message(message: Message) -> Self {
        Self::Message {
            message,
            notices: Vec::new(),
        }
    }
}

/// How a child came about, as its transcript's header records it (from the
/// start request's `Provenance`). Every field is optional: a harness may
/// start a child without a tool, and older writers recorded none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StartRecord {
    /// The tool whose call asked for the child (`subagent`, `subagent_fork`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The id the model gave that call: the parent's transcript holds the
    /// call and its result under this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The registered name of the provider that ran the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The task of the child's first run (the id `task_output` takes): the
    /// background task that ran it, or, for a foreground child, the id
    /// reserved for its result when the call started, which names the
    /// task that keeps the result if it was cut (unused otherwise). Absent
    /// in older transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Whether the parent went on while the child ran (a background task).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

impl StartRecord {
    /// A record of these three facts.
    pub fn new(tool: Option<String>, call_id: Option<String>, provider: Option<String>) -> Self {
        Self {
            tool,
            call_id,
            provider,
            task_id: None,
            background: false,
        }
    }

    /// Sets the task of the child's first run ([`StartRecord::task_id`]).
    #[must_use]
    pub fn with_task_id(mut self, task_id: Option<String>) -> Self {
        self.task_id = task_id;
        self
    }

    /// Records that the parent went on while the child ran.
    #[must_use]
    pub fn in_background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.tool.is_none() && self.call_id.is_none() && self.provider.is_none() && self.task_id.is_none()
    }
}

/// A tool result's text as the context fit cut it ([`TranscriptEntry::Fitted`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FittedResult {
    /// The call the result answers.
    pub call_id: String,
    /// The text the model was given.
    pub text: String,
}

impl FittedResult {
    /// The cut text of `call_id`'s result.
    pub fn new(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            call_id: call_id.into(),
            text: text.into(),
        }
    }
}

/// The times of one run, in milliseconds since the Unix epoch, and the size
/// of its answer, as its [`TranscriptEntry::TurnEnd`] records them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnTimes {
    /// How long the run waited, when it did: its start for a slot of its
    /// tree, and its model calls for a turn at their endpoint
    /// ([`TurnTimes::add_queued`]); a view draws it before the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// When the run began.
    pub started_at_ms: u64,
    /// When each of its model calls ended, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls_at_ms: Vec<u64>,
    /// When the run ended.
    pub ended_at_ms: u64,
    /// The size of its final answer, in bytes.
    pub answer_bytes: u64,
}

impl TurnTimes {
    /// Adds `waited` to the run's queued time: a model call that waited
    /// for a place among its endpoint's requests in flight waited in a
    /// queue as a start held by its tree's limits does.
    pub fn add_queued(&mut self, waited: std::time::Duration) {
        if waited.is_zero() {
            return;
        }
        let waited = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        self.queued_ms = Some(self.queued_ms.unwrap_or(0).saturating_add(waited));
    }
}

/// Now, in milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
}

/// The path of an agent's transcript under a data directory.
pub fn transcript_path(data_dir: &Path, id: &AgentId) -> PathBuf {
    data_dir.join("agents").join(format!("{id}.jsonl"))
}

/// Appends entries to one transcript file.
#[derive(Debug)]
pub struct TranscriptWriter {
    path: PathBuf,
    file: Mutex<File>,
}

impl TranscriptWriter {
    /// Creates (or appends to) the file, making its directory if needed.
    ///
    /// A transcript holds every prompt and answer, so it is private: the
    /// file is made 0600 and every directory made for it 0700, whatever the
    /// umask; its own directory and the file are tightened to those modes if
    /// they were found looser (written by an older version, or by hand). A
    /// directory above that already existed keeps its mode.
    pub fn open(path: PathBuf) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            crate::owner_only::dir(dir)?;
        }
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        crate::owner_only::file_options(&mut options);
        let file = options.open(&path)?;
        crate::owner_only::tighten_file(&file)?;
        Ok(Self {
            path,
            file: Mutex::new(file),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one entry as one line: in a single write when the line is
    /// under 64 KiB (`LINE_BUFFER`), as nearly every line is; a longer one
    /// (a long answer) goes out as it is serialized, so it is never held
    /// whole beside the entry. A crash in the middle of one tears only that
    /// last line, which [`read_transcript`] reports and a resume repairs.
    pub fn append(&self, entry: &TranscriptEntry) -> std::io::Result<()> {
        self.append_line(entry)
    }

    /// [`TranscriptWriter::append`] of a [`TranscriptEntry::Message`] that
    /// borrows its message, so the message is not copied to be recorded.
    pub fn append_message(&self, message: &Message, notices: &[String]) -> std::io::Result<()> {
        self.append_line(&MessageLine { message, notices })
    }

    fn append_line(&self, entry: &impl Serialize) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let mut line = BufWriter::with_capacity(LINE_BUFFER, &mut *file);
        serde_json::to_writer(&mut line, entry).map_err(std::io::Error::other)?;
        line.write_all(b"\n")?;
        line.flush()
    }

    /// Flushes the file to the operating system.
    pub fn flush(&self) -> std::io::Result<()> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).flush()
    }
}

/// A transcript as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// Every complete entry, in order.
    pub entries: Vec<TranscriptEntry>,
    /// Set when the last line was torn (a crash mid-write); earlier entries are intact.
    pub diagnostic: Option<String>,
    /// The torn last line's bytes, when there is one.
    pub torn: Option<Vec<u8>>,
}

impl Transcript {
    /// The format version its header names (1 for a transcript without one).
    pub fn version(&self) -> u32 {
        match self.entries.first() {
            Some(TranscriptEntry::Header { version, .. }) => *version,
            _ => 1,
        }
    }

    /// The conversation: seeded messages, then every message, in order.
    pub fn messages(&self) -> Vec<Message> {
        let mut messages = Vec::new();
        for entry in &self.entries {
            match entry {
                TranscriptEntry::Seed { messages: seed } => messages.extend(seed.iter().cloned()),
                TranscriptEntry::Message { message, .. } => messages.push(message.clone()),
                _ => {}
            }
        }
        messages
    }

    /// The conversation of ended turns only: seeded messages, then the
    /// messages of every run that reached its [`TranscriptEntry::TurnEnd`]
    /// (an `interrupted` end excepted), tool results in the order of their
    /// calls and as the model was given them. The turn still open is
    /// [`Transcript::turns`]' other half.
    pub fn committed_messages(&self) -> Vec<Message> {
        self.turns().history
    }

    /// The first (authoritative) descriptor, raw.
    pub fn descriptor(&self) -> Option<&serde_json::Value> {
        self.entries.iter().find_map(|entry| match entry {
            TranscriptEntry::Descriptor { descriptor } => Some(descriptor),
            _ => None,
        })
    }
}

/// Why a transcript could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The file could not be read.
    #[error("{}", crate::wording::transcript_unreadable(path, source))]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A complete line in the middle of the file is not a transcript entry.
    #[error("{}", crate::wording::transcript_corrupt(path, *line, message))]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The transcript was written by a newer version of the format than
    /// this one reads ([`TRANSCRIPT_VERSION`]).
    #[error("{}", crate::wording::transcript_version(path, *found, TRANSCRIPT_VERSION))]
    Version {
        /// The file.
        path: PathBuf,
        /// The version its header names.
        found: u32,
    },
}

/// Reads a transcript. A torn last line (no newline, not valid JSON) is
/// reported in [`Transcript::diagnostic`], not dropped silently; a corrupt
/// line anywhere else is an error, and so is a header of a newer version
/// than this one reads.
pub fn read_transcript(path: &Path) -> Result<Transcript, TranscriptError> {
    let io = |source| TranscriptError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io)?);
    let mut entries = Vec::new();
    let mut diagnostic = None;
    let mut torn = None;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        number += 1;
        let complete = line.last() == Some(&b'\n');
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<TranscriptEntry>(text.trim_end()) {
            Ok(TranscriptEntry::Header { version, .. }) if entries.is_empty() && version > TRANSCRIPT_VERSION => {
                return Err(TranscriptError::Version {
                    path: path.to_owned(),
                    found: version,
                });
            }
            Ok(entry) => entries.push(entry),
            Err(_) if !complete => {
                diagnostic = Some(crate::wording::transcript_torn(path, number, line.len(), entries.len()));
                torn = Some(line.clone());
            }
            Err(error) => {
                return Err(TranscriptError::Corrupt {
                    path: path.to_owned(),
                    line: number,
                    message: error.to_string(),
                });
            }
        }
    }
    Ok(Transcript {
        entries,
        diagnostic,
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_message_line_is_the_entrys_line() {
        let message = Message::assistant("an \"answer\"\nover two lines");
        let borrowed = serde_json::to_string(&MessageLine {
            message: &message,
            notices: &[],
        })
        .unwrap();
        let owned = serde_json::to_string(&TranscriptEntry::message(message)).unwrap();
        assert_eq!(borrowed, owned);
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_written_whole_between_its_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.jsonl");
        let writer = TranscriptWriter::open(path.clone()).unwrap();
        let long = "é long answer line\n".repeat(3 * LINE_BUFFER / 10);
        for message in [
            Message::user("short"),
            Message::assistant(long.clone()),
            Message::user("after"),
        ] {
            writer.append_message(&message, &[]).unwrap();
        }
        writer.flush().unwrap();
        let transcript = read_transcript(&path).unwrap();
        assert!(transcript.diagnostic.is_none(), "{:?}", transcript.diagnostic);
        assert_eq!(
            transcript.messages(),
            [Message::user("short"), Message::assistant(long), Message::user("after")]
        );
    }
}
