//! A transcript read as turns: the history of the turns that ended, and the
//! turn still open when the agent stopped without ending it (a crash, a
//! resumable stop), which a resume goes on with.
//!
//! Two things of the file's order are undone here. The results of one
//! round of tool calls are written as each call returns, so they follow in
//! the order the calls finished: a reader puts them back in the order of
//! the calls. A result the context fit cut before it was sent is written
//! whole, then replaced by a later [`TranscriptEntry::Fitted`]: a reader
//! gives the text the model was given.

use std::collections::{BTreeMap, BTreeSet};

use dsh_llm::{Message, ToolCall};
use dsh_subagent_api::RecordedChild;

use crate::INTERRUPTED;
use crate::{Transcript, TranscriptEntry};

/// What a transcript holds of its agent's conversation ([`Transcript::turns`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Turns {
    /// The turns that ended: seeded messages first.
    pub history: Vec<Message>,
    /// The turn the agent had not ended, when there is one.
    pub open: Option<OpenTurn>,
    /// The background tasks whose completion notices the agent was given.
    pub delivered: BTreeSet<String>,
}

/// A turn the agent had begun and not ended: its messages in order, the
/// round of tool calls whose results it was gathering or sending, and how
/// many model calls it had made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenTurn {
    /// Its messages, up to and including the answer whose tool calls make
    /// the round (all of them when there is no round).
    pub messages: Vec<Message>,
    /// The last answer's tool calls and their results, when it called tools.
    pub round: Option<OpenRound>,
    /// What followed the round's results (notices, steered messages) before
    /// the next model call.
    pub after: Vec<Message>,
    /// The model calls the turn had made (its assistant messages).
    pub steps: u32,
}

impl OpenTurn {
    /// Whether the turn's last answer is final (it called no tool) and
    /// nothing followed it: only the end of the run was missing.
    pub fn answered(&self) -> bool {
        self.round.is_none() && matches!(self.messages.last(), Some(Message::Assistant { .. }))
    }
}

/// The tool calls of an open turn's last answer, with the results that
/// were recorded before the agent stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenRound {
    /// The calls, in the order the model made them.
    pub calls: Vec<ToolCall>,
    /// Each call's recorded result text, `None` where none was recorded:
    /// the call is run again.
    pub results: Vec<Option<String>>,
}

impl OpenRound {
    /// The calls without a recorded result, in call order.
    pub fn pending(&self) -> impl Iterator<Item = &ToolCall> {
        self.calls
            .iter()
            .zip(&self.results)
            .filter(|(_, result)| result.is_none())
            .map(|(call, _)| call)
    }
}

impl Transcript {
    /// The conversation as turns: the ended ones, and the open one.
    ///
    /// A run that stopped `interrupted` leaves its turn open; a version-1
    /// [`TranscriptEntry::Repair`] drops the messages of the run it follows
    /// (that version abandoned an interrupted run).
    pub fn turns(&self) -> Turns {
        let legacy = self.version() < 2;
        let mut turns = Turns::default();
        let mut pending: Vec<Message> = Vec::new();
        for entry in &self.entries {
            match entry {
                TranscriptEntry::Seed { messages } => turns.history.extend(messages.iter().cloned()),
                TranscriptEntry::Message { message, notices } => {
                    pending.push(message.clone());
                    turns.delivered.extend(notices.iter().cloned());
                }
                TranscriptEntry::Fitted { results } => {
                    for fitted in results {
                        replace_result(&mut pending, &fitted.call_id, &fitted.text);
                    }
                }
                TranscriptEntry::TurnEnd { stop, .. } if stop != INTERRUPTED => {
                    turns.history.extend(in_call_order(std::mem::take(&mut pending)));
                }
                TranscriptEntry::Repair { .. } if legacy => pending.clear(),
                _ => {}
            }
        }
        if !pending.is_empty() {
            turns.open = Some(open_turn(in_call_order(pending)));
        }
        turns
    }

    /// The children the agent's records name, by the id of the tool call
    /// that started each: an in-process child's id, or what is known of a
    /// child in another process (its latest record).
    pub fn children_by_call(&self) -> BTreeMap<String, RecordedChild> {
        let mut children = BTreeMap::new();
        for entry in &self.entries {
            if let TranscriptEntry::ChildStart { id, start } = entry
                && let Some(call) = &start.call_id
            {
                let child = RecordedChild::in_process(id.as_str()).with_task_id(Some(start.task_id.clone()));
                children.insert(call.clone(), child);
                continue;
            }
            let TranscriptEntry::Child { id, call_id, elsewhere } = entry else {
                continue;
            };
            match (call_id, elsewhere) {
                (Some(call), None) => {
                    // A background child's start named its task already.
                    let known = children.get(call).is_some_and(|child| child.id == id.as_str());
                    if !known {
                        children.insert(call.clone(), RecordedChild::in_process(id.as_str()));
                    }
                }
                (_, Some(remote)) => {
                    if let Some(call) = &remote.call_id {
                        let child =
                            RecordedChild::remote(id.as_str(), remote.clone()).with_task_id(remote.task_id.clone());
                        children.insert(call.clone(), child);
                    }
                }
                (None, None) => {}
            }
        }
        children
    }
}

/// Replaces the text of the last result of `call_id` among `messages`.
fn replace_result(messages: &mut [Message], call_id: &str, text: &str) {
    let found = messages.iter_mut().rev().find_map(|message| match message {
        Message::Tool { tool_call_id, content } if tool_call_id == call_id => Some(content),
        _ => None,
    });
    if let Some(content) = found {
        text.clone_into(content);
    }
}

/// The messages with each answer's tool results in the order of its calls
/// (a result of no call of it keeps its place after them).
fn in_call_order(messages: Vec<Message>) -> Vec<Message> {
    let mut ordered = Vec::with_capacity(messages.len());
    let mut messages = messages.into_iter().peekable();
    while let Some(message) = messages.next() {
        let calls: Vec<String> = match &message {
            Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|call| call.id.clone()).collect(),
            _ => Vec::new(),
        };
        ordered.push(message);
        if calls.is_empty() {
            continue;
        }
        let mut results = Vec::new();
        while let Some(Message::Tool { .. }) = messages.peek() {
            results.extend(messages.next());
        }
        let position = |message: &Message| match message {
            Message::Tool { tool_call_id, .. } => calls.iter().position(|id| id == tool_call_id),
            _ => None,
        };
        results.sort_by_key(|result| position(result).unwrap_or(usize::MAX));
        ordered.extend(results);
    }
    ordered
}

/// The open turn of these messages (in call order).
fn open_turn(mut messages: Vec<Message>) -> OpenTurn {
    let steps = messages
        .iter()
        .filter(|message| matches!(message, Message::Assistant { .. }))
        .count();
    let steps = u32::try_from(steps).unwrap_or(u32::MAX);
    let last_answer = messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }));
    let calls = match last_answer.map(|at| &messages[at]) {
        Some(Message::Assistant { tool_calls, .. }) if !tool_calls.is_empty() => tool_calls.clone(),
        _ => {
            return OpenTurn {
                messages,
                steps,
                ..OpenTurn::default()
            };
        }
    };
    let answer = last_answer.unwrap_or_default();
    let mut rest = messages.split_off(answer + 1);
    let block = rest
        .iter()
        .take_while(|message| matches!(message, Message::Tool { .. }))
        .count();
    let after = rest.split_off(block);
    let results = calls
        .iter()
        .map(|call| {
            rest.iter().find_map(|message| match message {
                Message::Tool { tool_call_id, content } if *tool_call_id == call.id => Some(content.clone()),
                _ => None,
            })
        })
        .collect();
    OpenTurn {
        messages,
        round: Some(OpenRound { calls, results }),
        after,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FittedResult, TRANSCRIPT_VERSION};
    use dsh_subagent_api::AgentId;

    fn header(version: u32) -> TranscriptEntry {
        TranscriptEntry::Header {
            version,
            id: AgentId::new("a"),
            parent: None,
            depth: 0,
            label: None,
            model: "m".into(),
            system_prompt: None,
            created_at_ms: 0,
            start: None,
        }
    }

    fn end(stop: &str) -> TranscriptEntry {
        TranscriptEntry::TurnEnd {
            stop: stop.into(),
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

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    fn transcript(entries: Vec<TranscriptEntry>) -> Transcript {
        Transcript {
            entries,
            diagnostic: None,
            torn: None,
        }
    }

    #[test]
    fn results_read_in_call_order_and_as_the_model_was_given_them() {
        let turns = transcript(vec![
            header(TRANSCRIPT_VERSION),
            said(Message::user("go")),
            said(Message::assistant_with_tool_calls("", vec![call("a"), call("b")])),
            said(Message::tool("b", "B whole")),
            said(Message::tool("a", "A")),
            TranscriptEntry::Fitted {
                results: vec![FittedResult::new("b", "B cut")],
            },
            said(Message::assistant("done")),
            end("completed"),
        ])
        .turns();
        assert_eq!(turns.open, None);
        assert_eq!(
            turns.history[2..4],
            [Message::tool("a", "A"), Message::tool("b", "B cut")]
        );
    }

    #[test]
    fn an_interrupted_turn_stays_open_with_its_missing_results_named() {
        let turns = transcript(vec![
            header(TRANSCRIPT_VERSION),
            said(Message::user("first")),
            said(Message::assistant("one")),
            end("completed"),
            said(Message::user("second")),
            said(Message::assistant_with_tool_calls(
                "",
                vec![call("a"), call("b"), call("c")],
            )),
            said(Message::tool("c", "C")),
            end(INTERRUPTED),
            said(Message::tool("a", "A")),
        ])
        .turns();
        assert_eq!(turns.history.len(), 2);
        let open = turns.open.unwrap();
        assert_eq!(open.steps, 1);
        assert_eq!(open.messages.len(), 2);
        let round = open.round.unwrap();
        assert_eq!(round.results, [Some("A".into()), None, Some("C".into())]);
        assert_eq!(round.pending().map(|call| call.id.as_str()).collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn a_version_one_repair_abandons_the_run_and_a_version_two_one_does_not() {
        let entries = |version| {
            vec![
                header(version),
                said(Message::user("go")),
                TranscriptEntry::Repair {
                    diagnostic: "torn".into(),
                    torn: "{\"ty".into(),
                },
            ]
        };
        assert_eq!(transcript(entries(1)).turns().open, None);
        let open = transcript(entries(2)).turns().open.unwrap();
        assert_eq!(open.messages, [Message::user("go")]);
        assert!(!open.answered());
    }

    #[test]
    fn delivered_notices_and_children_by_call_are_read() {
        let remote = dsh_subagent_api::RemoteChild::new("acp", 1);
        let mut remote = remote;
        remote.call_id = Some("r".into());
        let t = transcript(vec![
            header(TRANSCRIPT_VERSION),
            TranscriptEntry::Message {
                message: Message::user("notice"),
                notices: vec!["subagent-2".into()],
            },
            TranscriptEntry::Child {
                id: AgentId::new("kid"),
                call_id: Some("c".into()),
                elsewhere: None,
            },
            TranscriptEntry::Child {
                id: AgentId::new("run-1"),
                call_id: None,
                elsewhere: Some(remote),
            },
        ]);
        assert_eq!(t.turns().delivered.into_iter().collect::<Vec<_>>(), ["subagent-2"]);
        let children = t.children_by_call();
        assert_eq!(children["c"].id, "kid");
        assert_eq!(children["r"].id, "run-1");
        assert!(children["r"].remote.is_some());
    }
}
