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

use dsh_llm::Message;
use dsh_subagent_api::{AgentId, RemoteChild};
use dsh_transcript::{
    INTERRUPTED, StartRecord, Transcript, TranscriptEntry, TranscriptError, TreeLock, TurnTimes, read_transcript,
    transcript_path,
};

use crate::node::{Ending, MAX_SHOWN_DEPTH, Node, Place, Problem, ResultSize, Tokens, Tree, Turn};
use crate::wording;

/// The tool that reads a background task's output: the parent's reads of
/// a task from its start are what its model read of that child's result.
const TASK_OUTPUT: &str = "task_output";

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
        headers: HashMap::new(),
        on_path: HashSet::new(),
        live: TreeLock::is_held(data_dir, &AgentId::new(top_of(data_dir, &root))),
    };
    let mut node = loader.node(data_dir, &root, None, 0);
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

/// The top-level agent of `id`'s tree: its headers followed up, as far as
/// they can be read (at most [`MAX_SHOWN_DEPTH`] levels).
fn top_of(data_dir: &Path, id: &str) -> String {
    let mut top = id.to_owned();
    for _ in 0..MAX_SHOWN_DEPTH {
        let path = transcript_path(data_dir, &AgentId::new(top.as_str()));
        match first_header(&path).and_then(|header| header.parent) {
            Some(parent) => top = parent,
            None => break,
        }
    }
    top
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

/// The reads a header is taken in: about its own line (a few hundred bytes
/// to a few kilobytes, with the system prompt), not a buffer's 8 KB of the
/// transcript behind it, which would be most of a small one.
const HEADER_READ: usize = 1024;

/// The header on a file's first line, when it has one.
fn first_header(path: &Path) -> Option<HeaderLine> {
    let mut line = String::new();
    BufReader::with_capacity(HEADER_READ, File::open(path).ok()?)
        .read_line(&mut line)
        .ok()?;
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
    /// The call's `description` argument: the child's label.
    label: Option<String>,
    background: bool,
    shown_bytes: Option<u64>,
}

/// What a parent's transcript says about its children's results: the tool
/// calls that started them, by call id, and what its model read of each
/// background task's output, by task id.
#[derive(Default)]
struct Calls {
    by_id: HashMap<String, Call>,
    /// The size of the last `task_output` read of each task from its
    /// start (no offset): the read that found it finished, when it was.
    task_reads: HashMap<String, u64>,
}

impl Calls {
    /// The result of a child started by call `call_id`, whose first answer
    /// had `full` bytes and which ran as task `task_id`, when it did.
    fn result(&self, call_id: &str, full: Option<u64>, task_id: Option<&str>) -> Option<(&Call, Option<ResultSize>)> {
        let call = self.by_id.get(call_id)?;
        let result = if call.background {
            let shown = task_id.and_then(|task| self.task_reads.get(task).copied());
            (full.is_some() || shown.is_some()).then(|| ResultSize::new(full, shown))
        } else {
            Some(ResultSize::new(full, call.shown_bytes))
        };
        Some((call, result))
    }
}

struct Loader {
    /// Every transcript's header, by parent, per data directory: read only
    /// for transcripts that do not name their children.
    headers: HashMap<PathBuf, HashMap<String, Vec<(u64, String)>>>,
    /// The transcripts from the root down to the node being read.
    on_path: HashSet<PathBuf>,
    /// Whether a process runs the tree now (holds its lock): a turn left
    /// open is then running, else interrupted.
    live: bool,
}

/// What a transcript's header says beyond the node's own fields.
struct HeaderFacts {
    parent: Option<String>,
    call_id: Option<String>,
}

/// A child as its parent's transcript names it: in process (its transcript
/// beside the parent's), or in another process, with what the parent
/// recorded of its start and end.
struct Named {
    id: String,
    /// The parent's tool call that started an in-process child, when
    /// recorded.
    call_id: Option<String>,
    elsewhere: Option<(RemoteChild, Option<RemoteChild>)>,
}

impl Loader {
    /// Reads agent `id` under `data_dir` and, below it, its children.
    /// `calls` are the tool calls of its parent's transcript.
    fn node(&mut self, data_dir: &Path, id: &str, calls: Option<&Calls>, level: usize) -> Loaded {
        let path = transcript_path(data_dir, &AgentId::new(id));
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
        node.turns = turns(&transcript, self.live);
        let full = answer_bytes(&node.turns);
        if let Some((call, result)) = facts
            .call_id
            .as_deref()
            .and_then(|call_id| calls.and_then(|calls| calls.result(call_id, full, node.task_id.as_deref())))
        {
            node.tool = node.tool.take().or_else(|| Some(call.tool.clone()));
            node.task_id = task_of(node.task_id.take(), call, result.as_ref());
            node.result = result;
        }
        self.on_path.insert(path.clone());
        self.children(data_dir, &transcript, &mut node, level);
        self.on_path.remove(&path);
        node.total();
        Loaded {
            node,
            parent: facts.parent,
        }
    }

    /// Reads the children `transcript` names (or, for an older transcript
    /// that names none, those whose headers name it).
    fn children(&mut self, data_dir: &Path, transcript: &Transcript, node: &mut Node, level: usize) {
        let mut named = named_children(data_dir, transcript);
        if named.is_empty() && !names_children(transcript) {
            named = self
                .children_by_header(data_dir, &node.id)
                .into_iter()
                .map(|id| Named {
                    id,
                    call_id: None,
                    elsewhere: None,
                })
                .collect();
        }
        if named.is_empty() {
            return;
        }
        if level >= MAX_SHOWN_DEPTH {
            node.problems.push(Problem::TooDeep { limit: MAX_SHOWN_DEPTH });
            return;
        }
        let calls = calls(transcript);
        for Named { id, call_id, elsewhere } in named {
            if let Some((start, end)) = elsewhere {
                let child = self.remote(&id, &start, end.as_ref(), node.depth, &calls, level + 1);
                node.children.push(child);
                continue;
            }
            if !valid_agent_id(&id) {
                node.problems.push(Problem::Foreign {
                    message: wording::bad_agent_id(&id),
                });
                continue;
            }
            if self
                .on_path
                .contains(&transcript_path(data_dir, &AgentId::new(id.as_str())))
            {
                node.problems.push(Problem::Cycle { child: id });
                continue;
            }
            let mut child = self.node(data_dir, &id, Some(&calls), level + 1);
            if let Some(parent) = child.parent.as_deref()
                && parent != node.id
            {
                let message = wording::other_parent(parent);
                child.node.problems.push(Problem::Foreign { message });
            }
            // A child whose own record could not be read: what its
            // parent's call says of it.
            if child.node.model.is_none()
                && let Some(call) = call_id.as_deref().and_then(|call_id| calls.by_id.get(call_id))
            {
                child.node.depth = node.depth.saturating_add(1);
                child.node.tool = Some(call.tool.clone());
                child.node.label.clone_from(&call.label);
            }
            node.children.push(child.node);
        }
    }

    /// A child that ran in another process: its own tree, read from the
    /// data directory it named when its transcript is there; otherwise
    /// what its parent recorded, marked as run elsewhere.
    fn remote(
        &mut self,
        id: &str,
        start: &RemoteChild,
        end: Option<&RemoteChild>,
        parent_depth: u64,
        calls: &Calls,
        level: usize,
    ) -> Node {
        let depth = parent_depth.saturating_add(1);
        let ended = end.and_then(|end| end.ended.as_ref());
        let recorded = match (&start.data_dir, &start.session) {
            (Some(dir), Some(session)) if valid_agent_id(session) => Some((PathBuf::from(dir), session.as_str())),
            _ => None,
        };
        let mut missing = None;
        if let Some((dir, session)) = recorded {
            let path = transcript_path(&dir, &AgentId::new(session));
            if self.on_path.contains(&path) {
                let mut node = Node::new(
                    id,
                    depth,
                    Place::Elsewhere {
                        ran: wording::ran_elsewhere(&start.provider, start.session.as_deref()),
                    },
                );
                node.problems.push(Problem::Cycle {
                    child: session.to_owned(),
                });
                return node;
            }
            if path.is_file() {
                let mut node = self.node(&dir, session, None, level).node;
                deepen(&mut node, depth);
                node.tool.clone_from(&start.tool);
                node.provider = Some(start.provider.clone());
                node.label = start.label.clone().or(node.label);
                let full = ended
                    .map(|ended| ended.answer_bytes)
                    .or_else(|| node.turns.first().and_then(|turn| turn.answer_bytes));
                (node.result, node.task_id) = remote_result(start, full, calls);
                return node;
            }
            missing = Some(path.display().to_string());
        }
        let ran = wording::ran_elsewhere(&start.provider, start.session.as_deref());
        let mut node = Node::new(id, depth, Place::Elsewhere { ran });
        node.tool.clone_from(&start.tool);
        node.label.clone_from(&start.label);
        node.provider = Some(start.provider.clone());
        node.created_at_ms = Some(start.at_ms);
        let mut turn = Turn {
            started_at_ms: Some(start.at_ms),
            ..Turn::default()
        };
        if let (Some(end), Some(ended)) = (end, ended) {
            turn.ending = Ending::from_stop(&ended.stop);
            turn.ended_at_ms = Some(end.at_ms);
            turn.answer_bytes = Some(ended.answer_bytes);
        }
        node.turns.push(turn);
        (node.result, node.task_id) = remote_result(start, ended.map(|ended| ended.answer_bytes), calls);
        if let Some(path) = missing {
            node.problems.push(Problem::Missing { path });
        }
        // The subagent sessions it announced, as recorded with its end.
        if let Some(end) = end {
            node.children = crate::announced::children(id, depth, &end.subagents);
        }
        node.total();
        node
    }

    /// The agents whose headers name `parent` under `data_dir`, oldest
    /// first (for transcripts that do not name their children).
    fn children_by_header(&mut self, data_dir: &Path, parent: &str) -> Vec<String> {
        let headers = self
            .headers
            .entry(data_dir.to_owned())
            .or_insert_with(|| index_headers(&data_dir.join("agents")));
        headers
            .get(parent)
            .map(|children| children.iter().map(|(_, id)| id.clone()).collect())
            .unwrap_or_default()
    }
}

/// The result of a child in another process, from the call that started
/// it, and its task.
fn remote_result(start: &RemoteChild, full: Option<u64>, calls: &Calls) -> (Option<ResultSize>, Option<String>) {
    let Some((call, result)) = start
        .call_id
        .as_deref()
        .and_then(|call_id| calls.result(call_id, full, start.task_id.as_deref()))
    else {
        return (None, start.task_id.clone());
    };
    let task = task_of(start.task_id.clone(), call, result.as_ref());
    (result, task)
}

/// The task a child names, as its parent's call tells: a background
/// child's, or the one that keeps a foreground child's result. A
/// foreground child records the id reserved for its result when the call
/// started, which names a task only when the result was cut.
fn task_of(task_id: Option<String>, call: &Call, result: Option<&ResultSize>) -> Option<String> {
    (call.background || result.is_some_and(|result| result.cut))
        .then_some(task_id)
        .flatten()
}

/// Places a subtree read from another process's records below a parent of
/// depth `depth - 1`: every depth there counts from its own top-level
/// agent, so each is moved down by `depth`.
fn deepen(node: &mut Node, depth: u64) {
    let mut stack = vec![node];
    while let Some(node) = stack.pop() {
        node.depth = node.depth.saturating_add(depth);
        stack.extend(node.children.iter_mut());
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
        task_id,
        ..
    } = start;
    node.tool = tool;
    node.provider = provider;
    node.task_id = task_id;
    Ok(HeaderFacts {
        parent: parent.as_ref().map(ToString::to_string),
        call_id,
    })
}

/// The turns of a transcript: one per run's end, one per run a crash
/// abandoned, and a last one still open when messages follow the last end:
/// running while a process runs the tree (`live`), else interrupted (a
/// crash, a resumable stop), to be resumed.
fn turns(transcript: &Transcript, live: bool) -> Vec<Turn> {
    let legacy = transcript.version() < 2;
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
                let ending = match stop.as_str() {
                    INTERRUPTED => Ending::Interrupted {
                        detail: wording::STOPPED_RESUMABLY.to_owned(),
                    },
                    stop => Ending::from_stop(stop),
                };
                let mut turn = Turn {
                    ending,
                    model_calls: *steps,
                    tokens: usage.as_ref().map(Tokens::from_usage),
                    cost: *cost,
                    ..Turn::default()
                };
                if let Some(times) = times {
                    apply_times(&mut turn, times);
                }
                turns.push(turn);
            }
            // A version-1 repair abandoned the run it followed; a later one
            // only cut a torn line off, and the run goes on.
            TranscriptEntry::Repair { diagnostic, .. } if legacy => {
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
        turns.push(match live {
            true => Turn::default(),
            false => Turn {
                ending: Ending::Interrupted {
                    detail: wording::NOT_RUNNING.to_owned(),
                },
                ..Turn::default()
            },
        });
    }
    turns
}

/// The size of the answer that ended a child's first activation: its first
/// turn that ended other than interrupted. A resumed child's turn ends
/// `interrupted` (answer 0 B) and its resume ends it for real, so the
/// result its caller read is that later turn's answer.
fn answer_bytes(turns: &[Turn]) -> Option<u64> {
    turns
        .iter()
        .find(|turn| !matches!(turn.ending, Ending::Interrupted { .. }))
        .and_then(|turn| turn.answer_bytes)
}

fn apply_times(turn: &mut Turn, times: &TurnTimes) {
    turn.queued_ms = times.queued_ms;
    turn.started_at_ms = Some(times.started_at_ms);
    turn.ended_at_ms = Some(times.ended_at_ms);
    turn.calls_at_ms.clone_from(&times.calls_at_ms);
    turn.answer_bytes = Some(times.answer_bytes);
}

/// The children a transcript names, each once, in the order they first
/// began; a child in another process with its first and last records.
///
/// A background child is named by its start record too, written before it
/// runs, once it keeps a transcript of its own: a process that died between
/// that record and the child's own entry left a child that ran (and that a
/// resume takes up) all the same. One that never began is not shown.
fn named_children(data_dir: &Path, transcript: &Transcript) -> Vec<Named> {
    let mut named: Vec<Named> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for entry in &transcript.entries {
        let (id, call_id, elsewhere) = match entry {
            TranscriptEntry::Child { id, call_id, elsewhere } => (id, call_id, elsewhere),
            TranscriptEntry::ChildStart { id, start } if transcript_path(data_dir, id).exists() => {
                (id, &start.call_id, &None)
            }
            _ => continue,
        };
        match seen.get(id.as_str()) {
            Some(&index) => {
                if let (Some(record), Some((_, last))) = (elsewhere, named[index].elsewhere.as_mut()) {
                    *last = Some(record.clone());
                }
            }
            None => {
                seen.insert(id.to_string(), named.len());
                named.push(Named {
                    id: id.to_string(),
                    call_id: call_id.clone(),
                    elsewhere: elsewhere.clone().map(|record| (record, None)),
                });
            }
        }
    }
    named
}

/// Whether the transcript was written by a version that names children
/// (its runs record their times): then naming none means it has none.
fn names_children(transcript: &Transcript) -> bool {
    transcript
        .entries
        .iter()
        .any(|entry| matches!(entry, TranscriptEntry::TurnEnd { times: Some(_), .. }))
}

/// The tool calls of a transcript: by id, the tool, whether it ran in the
/// background, and the size of its result; by task id, the size of the
/// last `task_output` read of each task from its start.
fn calls(transcript: &Transcript) -> Calls {
    let mut calls = Calls::default();
    // The task each `task_output` call (read from the start) asked for.
    let mut reads: HashMap<String, String> = HashMap::new();
    for message in transcript.messages() {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
                    let argument = |name: &str| arguments.as_ref().and_then(|arguments| arguments.get(name));
                    let background = argument("run_in_background")
                        .and_then(serde_json::Value::as_bool)
                        .unwrap_or(false);
                    if call.name == TASK_OUTPUT
                        && argument("offset").and_then(serde_json::Value::as_u64).unwrap_or(0) == 0
                        && let Some(task) = argument("task_id").and_then(serde_json::Value::as_str)
                    {
                        reads.insert(call.id.clone(), task.trim().to_owned());
                    }
                    let label = argument("description")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned);
                    calls.by_id.insert(
                        call.id.clone(),
                        Call {
                            tool: call.name.clone(),
                            label,
                            background,
                            shown_bytes: None,
                        },
                    );
                }
            }
            Message::Tool { tool_call_id, content } => {
                if let Some(task) = reads.get(&tool_call_id) {
                    calls.task_reads.insert(task.clone(), content.len() as u64);
                }
                if let Some(call) = calls.by_id.get_mut(&tool_call_id) {
                    call.shown_bytes = Some(content.len() as u64);
                }
            }
            _ => {}
        }
    }
    calls
}
