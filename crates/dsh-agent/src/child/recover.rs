//! An in-process child found again after an interruption, from its own
//! transcript: a child whose last run ended hands back the result that run
//! gave (no model call is made again); one whose turn is open goes on with
//! it; one whose records cannot be read is disconnected, and says what is
//! known of it.

use std::path::Path;

use dsh_llm::Message;
use dsh_subagent_api::{ContentBlock, StopReason, SubagentResult};
use dsh_tools::AgentId;
use serde_json::Value;

use crate::answer::TranscriptAnswer;
use crate::transcript::{
    INTERRUPTED, Transcript, TranscriptEntry, read_transcript, repair_for_resume, transcript_path,
};
use crate::{AgentStop, RunOutcome, wording};

/// What a child's records say, for its recovery.
pub(super) enum Found {
    /// Its last run ended: the result it gave.
    Ended(SubagentResult),
    /// Its turn is open (or it never ran one): it goes on from these
    /// records, repaired to be appended to.
    Open(Box<Transcript>),
    /// It cannot go on: the result that says why, with what is known.
    Disconnected(SubagentResult),
}

/// Reads the records of `child`, a child of `parent`, under `data_dir`.
pub(super) fn find(data_dir: &Path, child: &AgentId, parent: &AgentId, task_id: Option<&str>) -> Found {
    let path = transcript_path(data_dir, child);
    let disconnected =
        |why: String, partial: String| Found::Disconnected(disconnected(child.as_str(), task_id, &why, partial));
    let transcript = match read_transcript(&path) {
        Ok(transcript) => transcript,
        Err(error) => return disconnected(error.to_string(), String::new()),
    };
    match transcript.entries.first() {
        Some(TranscriptEntry::Header {
            id, parent: recorded, ..
        }) if id == child && recorded.as_ref() == Some(parent) => {}
        _ => {
            return disconnected(
                wording::transcript_not_of(&path, child.as_str()),
                last_text(&transcript),
            );
        }
    }
    if let Err(error) = repair_for_resume(&path, &transcript) {
        return disconnected(wording::transcript_not_repaired(&path, &error), last_text(&transcript));
    }
    let ended = transcript.turns().open.is_none() && last_end(&transcript).is_some();
    match last_end(&transcript) {
        Some(stop) if ended => Found::Ended(ended_result(&path, &transcript, stop)),
        _ => Found::Open(Box::new(transcript)),
    }
}

/// How the last run ended, when it ended (not `interrupted`).
fn last_end(transcript: &Transcript) -> Option<AgentStop> {
    transcript.entries.iter().rev().find_map(|entry| match entry {
        TranscriptEntry::TurnEnd { stop, reason, .. } if stop != INTERRUPTED => {
            Some(reason.clone().unwrap_or_else(|| AgentStop::from_recorded(stop)))
        }
        _ => None,
    })
}

/// The result the ended run gave, as its child handed it over: its stop,
/// its answer (read again from the transcript), its structured answer.
fn ended_result(path: &Path, transcript: &Transcript, stop: AgentStop) -> SubagentResult {
    let source = TranscriptAnswer::of_last_run(path);
    let text = source.as_ref().and_then(TranscriptAnswer::answer).unwrap_or_default();
    let outcome = RunOutcome {
        stop,
        text,
        steps: 0,
        usage: None,
        cost: crate::Priced::Nothing,
    };
    let completed = outcome.stop == AgentStop::Completed;
    let mut result = super::result_of(outcome);
    if let Some(value) = structured_answer(&transcript.messages()) {
        result = result.with_structured(value);
    }
    match source {
        Some(source) if completed => result.with_text_source(std::sync::Arc::new(source)),
        _ => result,
    }
}

/// The value a child reported through its structured-output tool, when a
/// call of it was acknowledged.
pub(super) fn structured_answer(messages: &[Message]) -> Option<Value> {
    let acknowledged = messages.iter().rev().find_map(|message| match message {
        Message::Tool { tool_call_id, content } if content == wording::STRUCTURED_OUTPUT_ACK => Some(tool_call_id),
        _ => None,
    })?;
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|call| &call.id == acknowledged && call.name == wording::STRUCTURED_OUTPUT_TOOL)
            .and_then(|call| serde_json::from_str(&call.arguments).ok()),
        _ => None,
    })
}

/// The last text the child's model wrote, or nothing.
fn last_text(transcript: &Transcript) -> String {
    transcript
        .messages()
        .into_iter()
        .rev()
        .find_map(|message| match message {
            Message::Assistant { content, .. } if !content.is_empty() => Some(content),
            _ => None,
        })
        .unwrap_or_default()
}

/// The result of a child that cannot go on: why, its task id where it had
/// one, and its last text as partial output.
pub(super) fn disconnected(child: &str, task_id: Option<&str>, why: &str, partial: String) -> SubagentResult {
    let output = if partial.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(partial)]
    };
    SubagentResult::new(StopReason::Disconnected, output)
        .with_diagnostic(wording::child_disconnected(child, task_id, why))
}
