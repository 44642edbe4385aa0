//! Finding an earlier parent to continue (`dsh run --resume`, ACP
//! `session/load`): its transcript, repaired after a crash.

use std::path::Path;

use dsh_agent::transcript::{Transcript, TranscriptEntry, read_transcript, repair_for_resume, transcript_path};
use dsh_llm::Message;
use dsh_tools::AgentId;

use crate::failure::Failure;
use crate::wording;

/// What a parent's transcript says about it.
pub(crate) struct SavedParent {
    pub(crate) id: AgentId,
    pub(crate) label: Option<String>,
    pub(crate) model: String,
    pub(crate) system_prompt: Option<String>,
    /// The committed turns.
    pub(crate) history: Vec<Message>,
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
    let transcript: Transcript =
        read_transcript(&path).map_err(|error| ResumeError::Failed(Failure::failed(wording::failed(&error))))?;
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
        history: transcript.committed_messages(),
        repairs,
    })
}
