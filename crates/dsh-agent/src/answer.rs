//! A finished run's answer, read again from its agent's transcript, so that
//! a harness that keeps a long answer for later reads (the paged reads of a
//! cut delegation result) holds none of it in memory.
//!
//! The source remembers the transcript's length right after the run ended:
//! its answer is the last non-empty assistant text of the last run that
//! ended within those bytes. Later runs of the same agent (a continued
//! child) append after them and never change them.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use dsh_llm::Message;
use dsh_subagent_api::TextSource;

use crate::transcript::TranscriptEntry;

/// Where the answer of one finished run can be read again: the run's agent's
/// transcript, up to its length when the run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptAnswer {
    path: PathBuf,
    end: u64,
}

impl TranscriptAnswer {
    /// The answer of the last run that ended within the first `end` bytes
    /// of the transcript at `path`.
    pub fn new(path: impl Into<PathBuf>, end: u64) -> Self {
        Self { path: path.into(), end }
    }

    /// The answer of the run that just ended in the transcript at `path`:
    /// its length now is where the run ended. `None` when the file cannot
    /// be read.
    pub fn of_last_run(path: &Path) -> Option<Self> {
        let end = std::fs::metadata(path).ok()?.len();
        Some(Self::new(path, end))
    }

    /// The transcript's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the answer, or `None` when the file is gone, unreadable, or
    /// holds no ended run within its first `end` bytes.
    pub fn answer(&self) -> Option<String> {
        let file = File::open(&self.path).ok()?;
        let mut reader = BufReader::new(file.take(self.end));
        let mut line = Vec::new();
        // The answer of the run being read, and of the last run that ended.
        let mut current: Option<String> = None;
        let mut answer: Option<String> = None;
        let mut legacy = false;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).ok()? == 0 {
                break;
            }
            let Ok(entry) = serde_json::from_slice::<TranscriptEntry>(&line) else {
                continue;
            };
            match entry {
                TranscriptEntry::Header { version, .. } => legacy = version < 2,
                TranscriptEntry::Message {
                    message: Message::Assistant { content, .. },
                    ..
                } if !content.is_empty() => current = Some(content),
                // An interrupted run goes on: its answer comes later.
                TranscriptEntry::TurnEnd { stop, .. } if stop != crate::transcript::INTERRUPTED => {
                    answer = Some(current.take().unwrap_or_default());
                }
                // A version-1 repair abandoned the run it followed.
                TranscriptEntry::Repair { .. } if legacy => current = None,
                _ => {}
            }
        }
        answer
    }
}

impl TextSource for TranscriptAnswer {
    fn read(&self) -> Option<String> {
        self.answer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::TranscriptWriter;

    fn end(stop: &str) -> TranscriptEntry {
        TranscriptEntry::TurnEnd {
            stop: stop.to_owned(),
            reason: None,
            steps: 1,
            usage: None,
            children_usage: None,
            cost: None,
            times: None,
        }
    }

    fn said(message: Message) -> TranscriptEntry {
        TranscriptEntry::message(message)
    }

    #[test]
    fn each_run_reads_its_own_answer_however_the_transcript_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("child.jsonl");
        let writer = TranscriptWriter::open(path.clone()).unwrap();
        writer.append(&said(Message::user("first"))).unwrap();
        writer.append(&said(Message::assistant("é first answer 語"))).unwrap();
        writer.append(&said(Message::user("a notice"))).unwrap();
        writer.append(&end("completed")).unwrap();
        writer.flush().unwrap();
        let first = TranscriptAnswer::of_last_run(&path).unwrap();
        writer.append(&said(Message::user("second"))).unwrap();
        writer.append(&said(Message::assistant("second answer"))).unwrap();
        writer.append(&said(Message::assistant(""))).unwrap();
        writer.append(&end("completed")).unwrap();
        writer.flush().unwrap();
        let second = TranscriptAnswer::of_last_run(&path).unwrap();
        // A third run still going: its text is no run's answer yet.
        writer.append(&said(Message::assistant("not yet"))).unwrap();
        writer.flush().unwrap();
        assert_eq!(first.read().as_deref(), Some("é first answer 語"));
        assert_eq!(second.read().as_deref(), Some("second answer"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(first.read(), None, "a transcript that is gone reads as gone");
    }

    #[test]
    fn a_run_without_an_answer_reads_empty_and_no_ended_run_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("child.jsonl");
        let writer = TranscriptWriter::open(path.clone()).unwrap();
        writer.append(&said(Message::user("go"))).unwrap();
        writer.flush().unwrap();
        assert_eq!(TranscriptAnswer::of_last_run(&path).unwrap().read(), None);
        writer.append(&end("cancelled")).unwrap();
        writer.flush().unwrap();
        assert_eq!(
            TranscriptAnswer::of_last_run(&path).unwrap().read().as_deref(),
            Some("")
        );
    }
}
