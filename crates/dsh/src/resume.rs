//! Finding an earlier parent to continue (`dsh run --resume`, ACP
//! `session/load`): its transcript, repaired after a crash.

use std::path::{Path, PathBuf};

use dsh_agent::Agent;
use dsh_agent::transcript::{
    INTERRUPTED, Transcript, TranscriptEntry, TreeLock, read_transcript, repair_for_resume, transcript_path,
};
use dsh_tools::AgentId;

use crate::failure::Failure;
use crate::wording;

/// What a parent's transcript says about it.
pub(crate) struct SavedParent {
    pub(crate) id: AgentId,
    pub(crate) label: Option<String>,
    pub(crate) model: String,
    pub(crate) system_prompt: Option<String>,
    /// Where its transcript is.
    pub(crate) path: PathBuf,
    /// Its transcript, repaired: the ended turns and the open one.
    pub(crate) transcript: Transcript,
    /// What was repaired (a torn tail, an interrupted turn), one line each.
    pub(crate) repairs: Vec<String>,
}

/// Whether `id` is shaped like an agent id (no path tricks).
pub(crate) fn plausible_id(id: &str) -> bool {
    !id.is_empty()
        && !id.contains("..")
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The header of a transcript, when it is readable and has one.
fn header(path: &Path) -> Option<(AgentId, Option<AgentId>)> {
    let transcript = read_transcript(path).ok()?;
    match transcript.entries.first()? {
        TranscriptEntry::Header { id, parent, .. } => Some((id.clone(), parent.clone())),
        _ => None,
    }
}

/// Whether `id` is shaped like an agent id and has a transcript under
/// `data_dir`: a parent's (or a child's, which a resume refuses).
pub(crate) fn is_parent_id(data_dir: &Path, id: &str) -> bool {
    plausible_id(id) && transcript_path(data_dir, &AgentId::new(id)).is_file() && !is_child(data_dir, id)
}

/// Whether `id` is a child's id under `data_dir`: its transcript's header
/// names a parent.
pub(crate) fn is_child(data_dir: &Path, id: &str) -> bool {
    use std::io::BufRead;
    if !plausible_id(id) {
        return false;
    }
    let Ok(file) = std::fs::File::open(transcript_path(data_dir, &AgentId::new(id))) else {
        return false;
    };
    // The header is the first line: only it is read.
    let mut first = String::new();
    if std::io::BufReader::new(file).read_line(&mut first).is_err() {
        return false;
    }
    matches!(
        serde_json::from_str::<TranscriptEntry>(&first),
        Ok(TranscriptEntry::Header { parent: Some(_), .. })
    )
}

/// The ids of the top-level agents (parents) with a transcript under `data_dir`, sorted.
pub(crate) fn resumable_parents(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("agents")) else {
        return Vec::new();
    };
    let mut parents: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|path| header(&path))
        .filter(|(_, parent)| parent.is_none())
        .map(|(id, _)| id.to_string())
        .collect();
    parents.sort();
    parents
}

/// Why a parent could not be resumed.
pub(crate) enum ResumeError {
    /// No parent has this id here (an unknown id, or a child's). The failure
    /// lists the parents that can be resumed and names the data directory:
    /// for the person who owns it (`dsh run --resume`), never for a client
    /// of a server (`session/load`), who gets only [`wording::unknown_session`].
    Unknown(Failure),
    /// The parent is there but cannot be continued (an unreadable or
    /// unrepairable transcript, no data directory).
    Failed(Failure),
}

impl From<ResumeError> for Failure {
    fn from(error: ResumeError) -> Self {
        match error {
            ResumeError::Unknown(failure) | ResumeError::Failed(failure) => failure,
        }
    }
}

/// Reads parent `id` from `data_dir` and repairs its transcript for
/// appending. An unknown id, or a child's, is bad input (exit 2) and the
/// error lists the parents that can be resumed.
pub(crate) fn load_parent(data_dir: &Path, id: &str) -> Result<SavedParent, ResumeError> {
    let unknown = || {
        ResumeError::Unknown(Failure::usage(wording::unknown_parent(
            id,
            &data_dir.join("agents"),
            &resumable_parents(data_dir),
        )))
    };
    if !plausible_id(id) {
        return Err(unknown());
    }
    let agent = AgentId::new(id);
    let path = transcript_path(data_dir, &agent);
    if !path.is_file() {
        return Err(unknown());
    }
    let transcript: Transcript = read_transcript(&path)
        .map_err(|error| ResumeError::Failed(Failure::failed(wording::cannot_resume(id, &error))))?;
    let Some(TranscriptEntry::Header {
        id: recorded,
        parent,
        label,
        model,
        system_prompt,
        ..
    }) = transcript.entries.first().cloned()
    else {
        return Err(unknown());
    };
    if recorded != agent || parent.is_some() {
        return Err(unknown());
    }
    let repairs = repair_for_resume(&path, &transcript)
        .map_err(|error| ResumeError::Failed(Failure::failed(wording::cannot_repair(&path, &error))))?;
    Ok(SavedParent {
        id: agent,
        label,
        model,
        system_prompt,
        path,
        transcript,
        repairs,
    })
}

/// A parent continued from its transcript ([`crate::runtime::SharedRuntime::resume`]).
pub(crate) struct Resumed {
    /// The parent, its open turn to go on with.
    pub(crate) agent: Agent,
    /// What was repaired (a torn tail), one line each.
    pub(crate) repairs: Vec<String>,
    /// The tools its open turn's calls still need.
    pub(crate) pending: PendingCalls,
    /// Whether its tree was interrupted: its turn, or the run of a child
    /// its records name, was left open.
    pub(crate) interrupted: bool,
}

/// The tools a resumed turn still needs: those of its last answer's calls
/// with no recorded result, which the resume runs again.
pub(crate) struct PendingCalls {
    transcript: PathBuf,
    tools: Vec<String>,
}

impl PendingCalls {
    /// The pending calls of `saved`'s open turn, when it has one.
    pub(crate) fn of(saved: &SavedParent) -> Self {
        let mut tools: Vec<String> = saved
            .transcript
            .turns()
            .open
            .and_then(|open| open.round)
            .map(|round| round.pending().map(|call| call.name.clone()).collect())
            .unwrap_or_default();
        tools.sort();
        tools.dedup();
        Self {
            transcript: saved.path.clone(),
            tools,
        }
    }

    /// Refuses, before any request is sent, a resume whose pending calls
    /// need a tool `agent` is no longer offered (a `[[subagents]]` entry
    /// removed from `dsh.toml`, an MCP server no longer mounted): running
    /// them again would hand the model an unknown tool's error for work it
    /// had asked for. Call it once every tool is mounted.
    pub(crate) fn check(&self, agent: &Agent) -> Result<(), Failure> {
        let offered: Vec<String> = agent.tools().definitions().into_iter().map(|tool| tool.name).collect();
        let missing: Vec<&str> = self
            .tools
            .iter()
            .filter(|tool| !offered.contains(tool))
            .map(String::as_str)
            .collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(Failure::usage(wording::pending_tool_gone(
                &self.transcript,
                &missing,
                &offered,
            ))),
        }
    }
}

/// The most recent top-level run under `data_dir` that was interrupted and
/// can be resumed: no process runs it now, and its parent's turn, or the
/// run of a child it started, was left open. Newest first by the time its
/// transcript was last written; `None` when there is none.
pub(crate) fn most_recent_interrupted(data_dir: &Path) -> Option<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("agents")) else {
        return None;
    };
    let mut parents: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    parents.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    parents.into_iter().find_map(|(_, path)| {
        let transcript = read_transcript(&path).ok()?;
        let Some(TranscriptEntry::Header { id, parent: None, .. }) = transcript.entries.first() else {
            return None;
        };
        let interrupted = !TreeLock::is_held(data_dir, id) && tree_unfinished(data_dir, &transcript);
        interrupted.then(|| id.to_string())
    })
}

/// The most recent top-level agent labelled `label` (an MCP session's
/// calling agent) whose process ended without ending it cleanly: its lock
/// file was left behind ([`TreeLock::left_behind`]).
pub(crate) fn interrupted_session(data_dir: &Path, label: &str) -> Option<String> {
    let entries = std::fs::read_dir(data_dir.join("agents")).ok()?;
    let mut found: Vec<(std::time::SystemTime, String)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|entry| {
            let modified = entry.metadata().ok()?.modified().ok()?;
            let transcript = read_transcript(&entry.path()).ok()?;
            let Some(TranscriptEntry::Header {
                id,
                parent: None,
                label: Some(named),
                ..
            }) = transcript.entries.first()
            else {
                return None;
            };
            (named == label && TreeLock::left_behind(data_dir, id)).then(|| (modified, id.to_string()))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, id)| id)
}

/// Whether an agent's turn, or a run of a child its records name, was left
/// open (followed down the tree).
pub(crate) fn tree_unfinished(data_dir: &Path, transcript: &Transcript) -> bool {
    if open(transcript) {
        return true;
    }
    transcript.entries.iter().any(|entry| match entry {
        TranscriptEntry::Child {
            id, elsewhere: None, ..
        } => read_transcript(&transcript_path(data_dir, id)).is_ok_and(|child| tree_unfinished(data_dir, &child)),
        _ => false,
    })
}

/// Whether the agent's last turn was left open: messages after its last
/// end, or an end that says it was interrupted.
fn open(transcript: &Transcript) -> bool {
    for entry in transcript.entries.iter().rev() {
        match entry {
            TranscriptEntry::TurnEnd { stop, .. } => return stop == INTERRUPTED,
            TranscriptEntry::Message { .. } => return true,
            _ => {}
        }
    }
    false
}
