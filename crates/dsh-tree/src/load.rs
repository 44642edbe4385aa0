//! A tree built from the transcripts in a data directory.
//!
//! A parent's transcript names each in-process child as it begins a run
//! (a `child` entry), so loading follows those entries from the root and
//! reads only the transcripts of the tree it shows. Transcripts written
//! before children were named that way are found by their headers instead:
//! only then is every transcript's first line read.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use dsh_agent::transcript::{
    StartRecord, Transcript, TranscriptEntry, TranscriptError, TurnTimes, read_transcript, transcript_path,
};
use dsh_llm::Message;
use dsh_subagent_api::AgentId;

use crate::node::{Cost, Ending, Node, Place, Problem, ResultSize, Tokens, Tree, Turn};
use crate::wording;

/// How many levels below the root are shown; deeper children are reported
/// as a [`Problem::TooDeep`] on the node where showing stopped.
pub const MAX_SHOWN_DEPTH: usize = 256;

/// Why no tree could be loaded. A problem with one node's record never
/// stops the rest: it is marked on that node ([`Problem`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No top-level agent has a transcript in the data directory.
    #[error("{}", wording::no_agents(dir))]
    NoAgents {
        /// The transcripts' directory.
        dir: PathBuf,
    },
    /// The agent asked for has no transcript.
    #[error("{}", wording::unknown_agent(id, dir))]
    UnknownAgent {
        /// The id asked for.
        id: String,
        /// The transcripts' directory.
        dir: PathBuf,
    },
    /// The id asked for cannot name a transcript file.
    #[error("{}", wording::bad_agent_id(id))]
    BadAgentId {
        /// The id asked for.
        id: String,
    },
    /// The transcripts' directory could not be listed (to find the most
    /// recent top-level agent).
    #[error("{}", wording::unlistable(dir, source))]
    Unlistable {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Whether `id` can name a transcript file: not empty, no path separator,
/// not starting with a dot.
pub fn valid_agent_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Loads the tree of agent `root` from the transcripts under `data_dir`
/// (`<data_dir>/agents/<id>.jsonl`); without `root`, the tree of the most
/// recent top-level agent there.
pub fn load(data_dir: &Path, root: Option<&str>) -> Result<Tree, LoadError> {
    let dir = data_dir.join("agents");
    let root = match root {
        Some(id) if !valid_agent_id(id) => return Err(LoadError::BadAgentId { id: id.to_owned() }),
        Some(id) => {
            if !transcript_path(data_dir, &AgentId::new(id)).is_file() {
                return Err(LoadError::UnknownAgent { id: id.to_owned(), dir });
            }
            id.to_owned()
        }
        None => latest_top_level(&dir)?.ok_or(LoadError::NoAgents { dir: dir.clone() })?,
    };
    let mut loader = Loader {
        data_dir,
        headers: None,
        on_path: HashSet::new(),
    };
    let mut node = loader.node(&root, None, 0);
    if let Some(parent) = node.parent.as_deref()
        && !transcript_path(data_dir, &AgentId::new(parent)).is_file()
    {
        node.node.problems.insert(
            0,
            Problem::ParentMissing {
                parent: parent.to_owned(),
            },
        );
    }
    Ok(Tree::new(node.node))
}

/// The id of the top-level agent whose transcript changed last, reading
/// headers newest file first until one has no parent.
fn latest_top_level(dir: &Path) -> Result<Option<String>, LoadError> {
    let entries = std::fs::read_dir(dir).map_err(|source| LoadError::Unlistable {
        dir: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<(SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(files
        .iter()
        .filter_map(|(_, path)| first_header(path))
        .find(|header| header.parent.is_none())
        .map(|header| header.id))
}

/// What a header says about where an agent sits.
struct HeaderLine {
    id: String,
    parent: Option<String>,
    created_at_ms: u64,
}

/// The header on a file's first line, when it has one.
fn first_header(path: &Path) -> Option<HeaderLine> {
    let mut line = String::new();
    BufReader::new(File::open(path).ok()?).read_line(&mut line).ok()?;
    match serde_json::from_str::<TranscriptEntry>(line.trim_end()).ok()? {
        TranscriptEntry::Header {
            id,
            parent,
            created_at_ms,
            ..
        } => Some(HeaderLine {
            id: id.to_string(),
            parent: parent.map(|parent| parent.to_string()),
            created_at_ms,
        }),
        _ => None,
    }
}

/// A node as read, with what its parent needs to know of it.
struct Loaded {
    node: Node,
    /// The parent its header names.
    parent: Option<String>,
}

/// What a parent's transcript says about the tool call that started a
/// child: the tool, and the size of the result its model read.
struct Call {
    tool: String,
    background: bool,
    shown_bytes: Option<u64>,
}

struct Loader<'a> {
    data_dir: &'a Path,
    /// Every transcript's header, by parent: read only for transcripts
    /// that do not name their children.
    headers: Option<HashMap<String, Vec<(u64, String)>>>,
    /// The agents from the root down to the node being read.
    on_path: HashSet<String>,
}

/// What a transcript's header says beyond the node's own fields.
struct HeaderFacts {
    parent: Option<String>,
    call_id: Option<String>,
}

impl Loader<'_> {
    /// Reads agent `id` and, below it, its children. `calls` are the tool
    /// calls of its parent's transcript, by id.
    fn node(&mut self, id: &str, calls: Option<&HashMap<String, Call>>, level: usize) -> Loaded {
        let path = transcript_path(self.data_dir, &AgentId::new(id));
        let mut node = Node::new(
            id,
            0,
            Place::Transcript {
                path: path.display().to_string(),
            },
        );
        let transcript = match read_transcript(&path) {
            Ok(transcript) => transcript,
            Err(TranscriptError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                node.problems.push(Problem::Missing {
                    path: path.display().to_string(),
                });
                return Loaded { node, parent: None };
            }
            Err(error) => {
                node.problems.push(Problem::Unreadable {
                    message: error.to_string(),
                });
                return Loaded { node, parent: None };
            }
        };
        if let Some(message) = &transcript.diagnostic {
            node.problems.push(Problem::Torn {
                message: message.clone(),
            });
        }
        let facts = match read_header(&transcript, id, &mut node) {
            Ok(facts) => facts,
            Err(problem) => {
                node.problems.push(problem);
                return Loaded { node, parent: None };
            }
        };
        node.turns = turns(&transcript);
        if let Some(call) = facts
            .call_id
            .as_deref()
            .and_then(|call_id| calls.and_then(|calls| calls.get(call_id)))
        {
            node.tool = node.tool.take().or_else(|| Some(call.tool.clone()));
            if !call.background {
                let full = node.turns.first().and_then(|turn| turn.answer_bytes);
                node.result = Some(ResultSize::new(full, call.shown_bytes));
            }
        }
        self.children(&transcript, &mut node, level);
        node.total();
        Loaded {
            node,
            parent: facts.parent,
        }
    }

    /// Reads the children `transcript` names (or, for an older transcript
    /// that names none, those whose headers name it).
    fn children(&mut self, transcript: &Transcript, node: &mut Node, level: usize) {
        let mut ids = named_children(transcript);
        if ids.is_empty() && !names_children(transcript) {
            ids = self.children_by_header(&node.id);
        }
        if ids.is_empty() {
            return;
        }
        if level >= MAX_SHOWN_DEPTH {
            node.problems.push(Problem::TooDeep { limit: MAX_SHOWN_DEPTH });
            return;
        }
        let calls = calls(transcript);
        self.on_path.insert(node.id.clone());
        for id in ids {
            if self.on_path.contains(&id) {
                node.problems.push(Problem::Cycle { child: id });
                continue;
            }
            if !valid_agent_id(&id) {
                node.problems.push(Problem::Foreign {
                    message: wording::bad_agent_id(&id),
                });
                continue;
            }
            let mut child = self.node(&id, Some(&calls), level + 1);
            if let Some(parent) = child.parent.as_deref()
                && parent != node.id
            {
                let message = wording::other_parent(parent);
                child.node.problems.push(Problem::Foreign { message });
            }
            node.children.push(child.node);
        }
        self.on_path.remove(&node.id);
    }

    /// The agents whose headers name `parent`, oldest first (for
    /// transcripts that do not name their children).
    fn children_by_header(&mut self, parent: &str) -> Vec<String> {
        let data_dir = self.data_dir;
        let headers = self
            .headers
            .get_or_insert_with(|| index_headers(&data_dir.join("agents")));
        headers
            .get(parent)
            .map(|children| children.iter().map(|(_, id)| id.clone()).collect())
            .unwrap_or_default()
    }
}

/// Every readable header under `dir`, by parent, each parent's children
/// oldest first.
fn index_headers(dir: &Path) -> HashMap<String, Vec<(u64, String)>> {
    let mut by_parent: HashMap<String, Vec<(u64, String)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return by_parent;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|ext| ext != "jsonl") {
            continue;
        }
        if let Some(header) = first_header(&path)
            && let Some(parent) = header.parent
        {
            by_parent
                .entry(parent)
                .or_default()
                .push((header.created_at_ms, header.id));
        }
    }
    for children in by_parent.values_mut() {
        children.sort();
    }
    by_parent
}

/// Fills the node's own fields from the transcript's header; a file with
/// no header, or another agent's, is a [`Problem::Foreign`].
fn read_header(transcript: &Transcript, id: &str, node: &mut Node) -> Result<HeaderFacts, Problem> {
    let Some(TranscriptEntry::Header {
        id: recorded,
        parent,
        depth,
        label,
        model,
        created_at_ms,
        start,
        ..
    }) = transcript.entries.first()
    else {
        return Err(Problem::Foreign {
            message: wording::NO_HEADER.to_owned(),
        });
    };
    if recorded.as_str() != id {
        return Err(Problem::Foreign {
            message: wording::other_agent(recorded.as_str()),
        });
    }
    node.depth = *depth;
    node.label.clone_from(label);
    node.model = Some(model.clone());
    node.created_at_ms = Some(*created_at_ms);
    let start = start.clone().unwrap_or_default();
    let StartRecord {
        tool,
        call_id,
        provider,
        ..
    } = start;
    node.tool = tool;
    node.provider = provider;
    Ok(HeaderFacts {
        parent: parent.as_ref().map(ToString::to_string),
        call_id,
    })
}

/// The turns of a transcript: one per run's end, one per run a crash
/// abandoned, and a last one still running when messages follow the last
/// end.
fn turns(transcript: &Transcript) -> Vec<Turn> {
    let mut turns = Vec::new();
    let mut open = false;
    for entry in &transcript.entries {
        match entry {
            TranscriptEntry::Message { .. } => open = true,
            TranscriptEntry::TurnEnd {
                stop,
                steps,
                usage,
                cost,
                times,
                ..
            } => {
                open = false;
                let mut turn = Turn {
                    ending: Ending::from_stop(stop),
                    model_calls: *steps,
                    tokens: usage.as_ref().map(Tokens::from_usage),
                    cost: cost.map(Cost::from),
                    ..Turn::default()
                };
                if let Some(times) = times {
                    apply_times(&mut turn, times);
                }
                turns.push(turn);
            }
            TranscriptEntry::Repair { diagnostic, .. } => {
                if open {
                    turns.push(Turn {
                        ending: Ending::Interrupted {
                            detail: diagnostic.clone(),
                        },
                        ..Turn::default()
                    });
                }
                open = false;
            }
            _ => {}
        }
    }
    if open {
        turns.push(Turn::default());
    }
    turns
}

fn apply_times(turn: &mut Turn, times: &TurnTimes) {
    turn.queued_ms = times.queued_ms;
    turn.started_at_ms = Some(times.started_at_ms);
    turn.ended_at_ms = Some(times.ended_at_ms);
    turn.calls_at_ms.clone_from(&times.calls_at_ms);
    turn.answer_bytes = Some(times.answer_bytes);
}

/// The children a transcript names, each once, in the order they first
/// began.
fn named_children(transcript: &Transcript) -> Vec<String> {
    let mut seen = HashSet::new();
    transcript
        .entries
        .iter()
        .filter_map(|entry| match entry {
            TranscriptEntry::Child { id } => Some(id.to_string()),
            _ => None,
        })
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Whether the transcript was written by a version that names children
/// (its runs record their times): then naming none means it has none.
fn names_children(transcript: &Transcript) -> bool {
    transcript
        .entries
        .iter()
        .any(|entry| matches!(entry, TranscriptEntry::TurnEnd { times: Some(_), .. }))
}

/// The tool calls of a transcript, by id: the tool, whether it ran in the
/// background, and the size of its result.
fn calls(transcript: &Transcript) -> HashMap<String, Call> {
    let mut calls = HashMap::new();
    for message in transcript.messages() {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    let background = serde_json::from_str::<serde_json::Value>(&call.arguments)
                        .ok()
                        .and_then(|arguments| arguments.get("run_in_background")?.as_bool())
                        .unwrap_or(false);
                    calls.insert(
                        call.id.clone(),
                        Call {
                            tool: call.name.clone(),
                            background,
                            shown_bytes: None,
                        },
                    );
                }
            }
            Message::Tool { tool_call_id, content } => {
                if let Some(call) = calls.get_mut(&tool_call_id) {
                    call.shown_bytes = Some(content.len() as u64);
                }
            }
            _ => {}
        }
    }
    calls
}
