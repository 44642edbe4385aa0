//! The default durable child store: the agents' JSONL transcripts.

use std::path::{Path, PathBuf};

use dsh_subagent_api::{ChildRecord, ChildStore, ContinuationDescriptor, SubagentError};
use dsh_tools::AgentId;

use crate::transcript::{TranscriptEntry, TranscriptError, read_transcript, transcript_path};

/// Finds continuable children in the transcripts under a data directory
/// (`<data>/agents/<id>.jsonl`): the header names the parent, the first
/// `descriptor` entry is the continuation descriptor, and a torn last line
/// or a malformed descriptor is reported as the record's diagnostic.
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
        let Some(TranscriptEntry::Header { id, parent, .. }) = transcript.entries.first() else {
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
        let mut record = ChildRecord::new(id.to_string(), parent.clone());
        record.descriptor = descriptor;
        record.diagnostic = (!diagnostics.is_empty()).then(|| diagnostics.join("; "));
        Ok(Some(record))
    }
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
