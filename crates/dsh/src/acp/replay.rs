//! `session/load` for a client that advertised `subagents`: the session's
//! transcript replayed whole, in order, and each child it names announced
//! where its parent's record names it, then replayed under its own session
//! id (the same id it was announced with live), then closed with its
//! terminal state, at every depth.
//!
//! - A child whose record ends before its run did (its process died, or
//!   its transcript is missing, unreadable or torn) is closed as
//!   `_disconnected`, after its own descendants: descendants before
//!   parents. Nothing is run or revived, and nothing is written, so a
//!   repeated load replays the same updates.
//! - Except when the session's next prompt resumes its tree (the load
//!   found it interrupted): an in-process child whose run was left open
//!   (or ended `interrupted`) is announced and left running, with no
//!   terminal state, since it goes on at that prompt and its end comes
//!   then. A child in another process is still closed as disconnected: it
//!   cannot be taken up again.
//! - A tool call whose result was never recorded (a run interrupted by a
//!   crash) is closed as failed, so a client shows no call running.
//! - What a child's record lacks is logged once per child; the parent's
//!   own history is replayed whatever its children's records hold.
//! - Background children are announced as foreground ones are, as live: a
//!   delegation whose call asked `run_in_background`, and a continuable
//!   child (its record holds a continuation descriptor).
//!
//! A child that a later run resumes is a new run of the same id: live, its
//! start announces it again (a `subagent_update` with a `running` state for
//! an id already announced); here its record's last run gives its state.

use std::collections::HashSet;
use std::path::Path;

use acp::v1::schema::SessionUpdate;
use agent_client_protocol as acp;
use dsh_agent::transcript::{INTERRUPTED, Transcript, TranscriptEntry, read_transcript, transcript_path};
use dsh_llm::Message;
use dsh_subagent_api::{RemoteChild, StopReason};
use dsh_tools::AgentId;

use super::event::{Change, Ending};
use super::updates;
use crate::wording;

/// One replayed update and the session it goes to.
pub(crate) type Replayed = (String, SessionUpdate);

/// What a replay walks: where transcripts are, the delegation tools, and
/// the children already announced (each once).
struct Walk<'a> {
    data_dir: &'a Path,
    delegation_tools: &'a [String],
    /// The loaded session's id, for the log lines.
    session: &'a str,
    /// Whether the session's next prompt resumes its tree: an in-process
    /// child whose run was left open then goes on, and is not closed.
    resumes: bool,
    announced: HashSet<String>,
    out: Vec<Replayed>,
}

/// The updates that replay session `root` (whose transcript `transcript`
/// is) with its children, each with its session.
pub(crate) fn replay(
    data_dir: &Path,
    root: &AgentId,
    transcript: &Transcript,
    delegation_tools: &[String],
    resumes: bool,
) -> Vec<Replayed> {
    let mut walk = Walk {
        data_dir,
        delegation_tools,
        session: root.as_str(),
        resumes,
        announced: HashSet::from([root.to_string()]),
        out: Vec::new(),
    };
    walk.agent(root.as_str(), transcript, 0);
    walk.out
}

impl Walk<'_> {
    /// Replays one agent's record on its session `id`; returns whether its
    /// last run reached its end, and with which stop.
    fn agent(&mut self, id: &str, transcript: &Transcript, depth: usize) -> Option<String> {
        let mut open_calls: Vec<String> = Vec::new();
        let mut remote: Vec<String> = Vec::new();
        let mut stop = None;
        for entry in &transcript.entries {
            match entry {
                TranscriptEntry::Message { message, .. } => {
                    stop = None;
                    self.message(id, message, &mut open_calls);
                }
                TranscriptEntry::TurnEnd { stop: ended, .. } => {
                    self.close_calls(id, &mut open_calls);
                    stop = Some(ended.clone());
                }
                TranscriptEntry::Repair { .. } => {
                    self.close_calls(id, &mut open_calls);
                    stop = None;
                }
                TranscriptEntry::Child {
                    id: child,
                    elsewhere: Some(record),
                    ..
                } => self.remote_child(id, child.as_str(), record, &mut remote),
                TranscriptEntry::Child {
                    id: child,
                    elsewhere: None,
                    ..
                } => self.child(id, child.as_str(), depth),
                _ => {}
            }
        }
        self.close_calls(id, &mut open_calls);
        for child in remote {
            self.end(id, &child, Ending::Disconnected);
        }
        stop
    }

    /// One message on session `id`, as its client saw it; tool calls stay
    /// open until their result.
    fn message(&mut self, id: &str, message: &Message, open_calls: &mut Vec<String>) {
        match message {
            Message::Assistant { tool_calls, .. } => open_calls.extend(tool_calls.iter().map(|call| call.id.clone())),
            Message::Tool { tool_call_id, .. } => open_calls.retain(|call| call != tool_call_id),
            _ => {}
        }
        let replayed = updates::replay(std::slice::from_ref(message), self.delegation_tools);
        self.out
            .extend(replayed.into_iter().map(|update| (id.to_owned(), update)));
    }

    /// Closes the tool calls of session `id` whose result was never
    /// recorded: failed, interrupted.
    fn close_calls(&mut self, id: &str, open_calls: &mut Vec<String>) {
        for call in open_calls.drain(..) {
            let update = updates::interrupted_call(&call);
            self.out.push((id.to_owned(), update));
        }
    }

    /// An in-process child that parent `parent` started: announced, its
    /// record replayed on its own session, then its terminal state.
    fn child(&mut self, parent: &str, child: &str, depth: usize) {
        if !self.announced.insert(child.to_owned()) || depth >= dsh_tree::MAX_SHOWN_DEPTH {
            // A continuation of a child already replayed (its record holds
            // every run), or a tree too deep to show.
            return;
        }
        let agent = AgentId::new(child);
        let read = if dsh_tree::valid_agent_id(child) {
            read_transcript(&transcript_path(self.data_dir, &agent)).map_err(|error| error.to_string())
        } else {
            Err(wording::unknown_session(&child))
        };
        let (title, task) = match &read {
            Ok(transcript) => about(transcript),
            Err(_) => (None, None),
        };
        self.announce(parent, child, title, task);
        let ending = match &read {
            Ok(transcript) => {
                let stop = self.agent(child, transcript, depth + 1);
                match (stop, &transcript.diagnostic) {
                    // Left open: the next prompt resumes it, and its end
                    // comes then.
                    (None, None) if self.resumes => return,
                    (Some(stop), None) if self.resumes && stop == INTERRUPTED => return,
                    (Some(stop), None) => Ending::of_stop(&stop),
                    (_, Some(torn)) => self.lost(child, torn),
                    (None, None) => Ending::Disconnected,
                }
            }
            Err(error) => self.lost(child, error),
        };
        self.end(parent, child, ending);
    }

    /// A child in another process: announced at its first record, ended at
    /// the record of its end; `remote` keeps those not ended yet.
    fn remote_child(&mut self, parent: &str, child: &str, record: &RemoteChild, remote: &mut Vec<String>) {
        if self.announced.insert(child.to_owned()) {
            self.announce(parent, child, record.label.clone(), None);
            remote.push(child.to_owned());
        }
        let Some(ended) = &record.ended else { return };
        if let Some(at) = remote.iter().position(|open| open == child) {
            remote.remove(at);
            let ending = match StopReason::parse(&ended.stop) {
                StopReason::Completed => Ending::EndTurn,
                StopReason::MaxTokens => Ending::MaxTokens,
                StopReason::Refusal => Ending::Refusal,
                StopReason::Aborted => Ending::Cancelled,
                other => Ending::Failed(other.as_str().to_owned()),
            };
            self.end(parent, child, ending);
        }
    }

    fn announce(&mut self, parent: &str, child: &str, title: Option<String>, task: Option<String>) {
        let change = Change::Started {
            title,
            task,
            cancel: false,
        };
        self.out.push((parent.to_owned(), updates::subagent(child, &change)));
    }

    fn end(&mut self, parent: &str, child: &str, ending: Ending) {
        self.out
            .push((parent.to_owned(), updates::subagent(child, &Change::Ended(ending))));
    }

    /// A child whose record is not whole: logged, closed as disconnected.
    fn lost(&self, child: &str, why: &dyn std::fmt::Display) -> Ending {
        tracing::warn!("{}", wording::subagent_record_torn(&self.session, &child, why));
        Ending::Disconnected
    }
}

/// What a child's transcript says of it: its label and the start of its
/// first prompt.
fn about(transcript: &Transcript) -> (Option<String>, Option<String>) {
    let label = match transcript.entries.first() {
        Some(TranscriptEntry::Header { label, .. }) => label.clone(),
        _ => None,
    };
    let task = transcript.entries.iter().find_map(|entry| match entry {
        TranscriptEntry::Message {
            message: Message::User { content },
            ..
        } => dsh_subagent::task_preview_text(content),
        _ => None,
    });
    (label, task)
}

#[cfg(test)]
mod tests;
