//! The default durable child store: the agents' JSONL transcripts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use dsh_subagent_api::{ChildRecord, ChildStore, ContinuationDescriptor, RunMode, StopReason, SubagentError};
use dsh_tools::AgentId;

use crate::transcript::{INTERRUPTED, Transcript, TranscriptEntry, TranscriptError, read_transcript, transcript_path};

/// Finds continuable children in the transcripts under a data directory
/// (`<data>/agents/<id>.jsonl`): the header names the parent, the first
/// `descriptor` entry is the continuation descriptor, and a torn last line
/// or a malformed descriptor is reported as the record's diagnostic.
///
/// A parent's children are the ones its own transcript names (its `child`
/// entries, in-process or in another process), with what a resume needs of
/// each: how it was run, the task id its parent's model was given, how its
/// last run ended, and whether its parent was told its task finished. A
/// parent whose transcript names no child (an older one) has its children
/// found by their headers.
#[derive(Clone, Debug)]
pub struct JsonlChildStore {
    data_dir: PathBuf,
}

impl JsonlChildStore {
    /// A store over the transcripts under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
        }
    }

    fn record(&self, path: &Path, expected: Option<&str>) -> Result<Option<ChildRecord>, SubagentError> {
        let transcript = match read_transcript(path) {
            Ok(transcript) => transcript,
            Err(TranscriptError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(error) => {
                return Err(SubagentError::failed_with_code(
                    error.to_string(),
                    crate::ErrorCode::StoreFailed,
                ));
            }
        };
        let Some(TranscriptEntry::Header { id, parent, start, .. }) = transcript.entries.first() else {
            return Err(SubagentError::failed_with_code(
                crate::wording::transcript_without_header(path),
                crate::ErrorCode::StoreFailed,
            ));
        };
        if expected.is_some_and(|expected| expected != id.as_str()) {
            return Ok(None);
        }
        let mut diagnostics: Vec<String> = transcript.diagnostic.iter().cloned().collect();
        let descriptor = match transcript.descriptor().map(ContinuationDescriptor::fold) {
            Some(Ok(descriptor)) => descriptor,
            Some(Err(problem)) => {
                diagnostics.push(problem);
                None
            }
            None => None,
        };
        let mode = match start.as_ref().is_some_and(|start| start.background) {
            true => RunMode::Background,
            false => RunMode::Foreground,
        };
        let mut record = ChildRecord::new(id.to_string(), parent.clone())
            .with_task(mode, start.as_ref().and_then(|start| start.task_id.clone()))
            .with_ended(ended(&transcript));
        record.descriptor = descriptor;
        record.diagnostic = (!diagnostics.is_empty()).then(|| diagnostics.join("; "));
        Ok(Some(record))
    }

    /// The children a parent's transcript names, in the order they began,
    /// each once; `None` when it names none (an older transcript).
    fn named_by(&self, parent: &AgentId) -> Result<Option<Vec<ChildRecord>>, SubagentError> {
        let transcript = match read_transcript(&transcript_path(&self.data_dir, parent)) {
            Ok(transcript) => transcript,
            Err(TranscriptError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(error) => {
                return Err(SubagentError::failed_with_code(
                    error.to_string(),
                    crate::ErrorCode::StoreFailed,
                ));
            }
        };
        let delivered = transcript.turns().delivered;
        let mut seen = BTreeSet::new();
        let mut children: Vec<ChildRecord> = Vec::new();
        for entry in &transcript.entries {
            if let TranscriptEntry::ChildStart { id, start } = entry {
                if seen.insert(id.clone()) {
                    children.push(self.started(id, parent, start)?);
                }
                continue;
            }
            let TranscriptEntry::Child { id, elsewhere, .. } = entry else {
                continue;
            };
            match elsewhere {
                // Its latest record wins: the one with its end.
                Some(remote) => {
                    let record = remote_record(id, parent, remote.clone());
                    match children.iter_mut().find(|child| child.id == id.as_str()) {
                        Some(known) => *known = record,
                        None => children.push(record),
                    }
                }
                None if seen.insert(id.clone()) => {
                    match self.record(&transcript_path(&self.data_dir, id), Some(id.as_str())) {
                        Ok(Some(record)) => children.push(record),
                        Ok(None) => {
                            let missing = crate::wording::transcript_missing(&transcript_path(&self.data_dir, id));
                            children
                                .push(ChildRecord::new(id.to_string(), Some(parent.clone())).with_diagnostic(missing));
                        }
                        Err(error) => children.push(
                            ChildRecord::new(id.to_string(), Some(parent.clone())).with_diagnostic(error.to_string()),
                        ),
                    }
                }
                None => {}
            }
        }
        if children.is_empty() && !names_children(&transcript) {
            return Ok(None);
        }
        for child in &mut children {
            child.notice_delivered = child.task_id.as_ref().is_some_and(|task| delivered.contains(task));
        }
        Ok(Some(children))
    }

    /// A background child whose start its parent recorded: its own records
    /// when it has them, else what its parent recorded (it had not begun).
    fn started(
        &self,
        id: &AgentId,
        parent: &AgentId,
        start: &dsh_subagent_api::ChildStart,
    ) -> Result<ChildRecord, SubagentError> {
        let own = match self.record(&transcript_path(&self.data_dir, id), Some(id.as_str())) {
            Ok(own) => own,
            Err(error) => {
                return Ok(ChildRecord::new(id.to_string(), Some(parent.clone()))
                    .with_task(RunMode::Background, Some(start.task_id.clone()))
                    .with_diagnostic(error.to_string()));
            }
        };
        if let Some(record) = own {
            return Ok(record.with_task(RunMode::Background, Some(start.task_id.clone())));
        }
        let record = ChildRecord::new(id.to_string(), Some(parent.clone()))
            .with_task(RunMode::Background, Some(start.task_id.clone()))
            .not_begun(start.prompt.clone());
        Ok(match ContinuationDescriptor::fold(&start.descriptor) {
            Ok(Some(descriptor)) => record.with_descriptor(descriptor),
            Ok(None) => record,
            Err(problem) => record.with_diagnostic(problem),
        })
    }

    /// Every transcript whose header names `parent`, by file name.
    fn found_by_headers(&self, parent: &AgentId) -> Result<Vec<ChildRecord>, SubagentError> {
        let dir = self.data_dir.join("agents");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => {
                return Err(SubagentError::failed_with_code(
                    error.to_string(),
                    crate::ErrorCode::StoreFailed,
                ));
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
            .collect();
        paths.sort();
        let mut children = Vec::new();
        for path in paths {
            // One unreadable transcript does not hide the others.
            match self.record(&path, None) {
                Ok(Some(record)) if record.parent.as_ref() == Some(parent) => children.push(record),
                Ok(_) => {}
                Err(error) => tracing::warn!("{}", crate::wording::log_transcript_skipped(&path, &error)),
            }
        }
        Ok(children)
    }
}

/// How a transcript's last run ended, as the seam's stop reason; `None`
/// while it has not (it runs, or was interrupted).
fn ended(transcript: &Transcript) -> Option<StopReason> {
    if transcript.turns().open.is_some() {
        return None;
    }
    transcript.entries.iter().rev().find_map(|entry| match entry {
        TranscriptEntry::TurnEnd { stop, reason, .. } if stop != INTERRUPTED => {
            let stop = reason.clone().unwrap_or_else(|| crate::AgentStop::from_recorded(stop));
            Some(crate::child::stop_reason(&stop))
        }
        _ => None,
    })
}

/// A child in another process, from its parent's latest record of it.
fn remote_record(id: &AgentId, parent: &AgentId, remote: dsh_subagent_api::RemoteChild) -> ChildRecord {
    let ended = remote.ended.as_ref().map(|end| StopReason::parse(&end.stop));
    let mode = match remote.background {
        true => RunMode::Background,
        false => RunMode::Foreground,
    };
    ChildRecord::new(id.to_string(), Some(parent.clone()))
        .with_task(mode, remote.task_id.clone())
        .with_ended(ended)
        .with_remote(remote)
}

/// Whether the transcript was written by a version that names children
/// (format version 2, or a run that recorded its times): then naming none
/// means it has none. A version-2 agent whose first run never ended (a
/// crash, a resumable stop) names its children too; without the version
/// its resume read every transcript of the data directory whole to find
/// its children by their headers (a second and more in a tree of 1,000).
fn names_children(transcript: &Transcript) -> bool {
    transcript.version() >= 2
        || transcript
            .entries
            .iter()
            .any(|entry| matches!(entry, TranscriptEntry::TurnEnd { times: Some(_), .. }))
}

/// Whether `id` can name a transcript file (no path tricks).
fn plausible_id(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains(['/', '\\', '\0'])
}

impl ChildStore for JsonlChildStore {
    fn lookup(&self, child_id: &str) -> Result<Option<ChildRecord>, SubagentError> {
        if !plausible_id(child_id) {
            return Ok(None);
        }
        self.record(
            &transcript_path(&self.data_dir, &AgentId::new(child_id)),
            Some(child_id),
        )
    }

    fn children_of(&self, parent: &AgentId) -> Result<Vec<ChildRecord>, SubagentError> {
        match self.named_by(parent)? {
            Some(children) => Ok(children),
            None => self.found_by_headers(parent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transcript of `id` (a child of `parent` when given) in format
    /// `version`, whose first run never ended.
    fn open_turn(dir: &Path, id: &str, parent: Option<&str>, version: u32) {
        let parent = parent.map_or(String::new(), |parent| format!(r#","parent":"{parent}""#));
        let header = format!(
            r#"{{"type":"header","version":{version},"id":"{id}"{parent},"depth":0,"model":"m","created_at_ms":1}}"#
        );
        let task = r#"{"type":"message","message":{"role":"user","content":"go on"}}"#;
        let path = transcript_path(dir, &AgentId::new(id));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{header}\n{task}\n")).unwrap();
    }

    #[test]
    fn a_version_2_agent_whose_run_never_ended_names_its_children_and_no_header_is_scanned() {
        let dir = tempfile::tempdir().unwrap();
        open_turn(dir.path(), "parent", None, 2);
        // Named by nothing: only a scan of every header would find it.
        open_turn(dir.path(), "stray", Some("parent"), 2);
        let store = JsonlChildStore::new(dir.path());
        assert!(store.children_of(&AgentId::new("parent")).unwrap().is_empty());

        // A version-1 transcript that never ended may predate `child`
        // entries: its children are found by their headers.
        open_turn(dir.path(), "old", None, 1);
        open_turn(dir.path(), "old-child", Some("old"), 1);
        let children = store.children_of(&AgentId::new("old")).unwrap();
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].id, "old-child");
    }
}
