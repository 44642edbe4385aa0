//! `session/update`s: what an ACP client sees of a running prompt
//! ([`live`]) and of a loaded session's history ([`replay`]).

use acp::schema::MaybeUndefined;
use acp::v1::schema::{
    Content, ContentBlock, ContentChunk, ErrorStopReason, IdleStateUpdate, IdleStopReason, Meta, OtherStopReason, Plan,
    PlanEntry, PlanEntryPriority, PlanEntryStatus, RunningStateUpdate, SessionCancelCapabilities, SessionUpdate,
    StateUpdate, SubagentSessionCapabilities, SubagentUpdate, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use agent_client_protocol as acp;
use dsh_llm::Message;
use dsh_tasks::wording::{TASK_LIST, TASK_OUTPUT};
use dsh_tools::Cut;
use dsh_tools::budget::CUT_META_KEY;
use serde_json::Value;

use dsh_subagent_acp::Status;

use super::event::{Change, Ending, Event};

fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text.into()))
}

fn content(body: impl Into<String>) -> Vec<ToolCallContent> {
    vec![ToolCallContent::Content(Content::new(text(body)))]
}

/// The `tool_call` that announces a call: a delegation's title is its task
/// `description`, any other call's is the tool's name; the raw input is the
/// arguments (as JSON when they parse).
fn announce(id: &str, name: &str, arguments: &str, delegation: bool) -> ToolCall {
    let input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()));
    let title = delegation
        .then(|| input.get("description").and_then(Value::as_str).map(str::to_owned))
        .flatten()
        .unwrap_or_else(|| name.to_owned());
    ToolCall::new(id.to_owned(), title)
        .name(name.to_owned())
        .kind(kind(name, delegation))
        .status(ToolCallStatus::Pending)
        .raw_input(input)
}

/// The kind of a dsh tool, for the client's icon.
fn kind(name: &str, delegation: bool) -> ToolKind {
    match name {
        _ if delegation => ToolKind::Think,
        TASK_OUTPUT | TASK_LIST => ToolKind::Read,
        _ => ToolKind::Other,
    }
}

fn status(id: &str, status: ToolCallStatus) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    ))
}

/// The update that ends a call: its status and what the model read; a
/// result cut to its budget says how in `_meta` (`dsh/resultCut`: the full
/// size, the size shown, the task that keeps the rest).
fn finished(id: &str, result: &str, failed: bool, cut: Option<&Cut>) -> SessionUpdate {
    let status = if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let update = ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new().status(status).content(content(result)),
    );
    SessionUpdate::ToolCallUpdate(match cut {
        Some(cut) => update.meta(Meta::from_iter([(CUT_META_KEY.to_owned(), cut.summary())])),
        None => update,
    })
}

/// The updates for one event of a running prompt: a chunk per text delta; a
/// `tool_call` then `in_progress` when a call starts; `completed` or
/// `failed` with the result when it ends; `pending` while a delegation's
/// child waits for a slot, `in_progress` again once it has one; the
/// children's lines as the content of their delegation call while it runs.
pub(crate) fn live(event: Event) -> Vec<SessionUpdate> {
    match event {
        Event::Text(delta) => vec![SessionUpdate::AgentMessageChunk(ContentChunk::new(text(delta)))],
        Event::ToolStarted {
            id,
            name,
            arguments,
            delegation,
        } => vec![
            SessionUpdate::ToolCall(announce(&id, &name, &arguments, delegation)),
            status(&id, ToolCallStatus::InProgress),
        ],
        Event::ToolFinished { id, text, failed, cut } => vec![finished(&id, &text, failed, cut.as_deref())],
        // A delegation whose child waits for a slot has not started its work.
        Event::CallWaits { call } => vec![status(&call, ToolCallStatus::Pending)],
        Event::CallAdmitted { call } => vec![status(&call, ToolCallStatus::InProgress)],
        Event::ChildProgress { call, lines } => vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call,
            ToolCallUpdateFields::new().content(content(lines.join("\n"))),
        ))],
        Event::Thought(delta) => vec![SessionUpdate::AgentThoughtChunk(ContentChunk::new(text(delta)))],
        Event::Plan(steps) => vec![plan(&steps)],
        Event::RemoteToolCall { id, title, status } => vec![SessionUpdate::ToolCall(
            ToolCall::new(id, title).status(tool_status(status)),
        )],
        Event::RemoteToolUpdate { id, title, status } => {
            let mut fields = ToolCallUpdateFields::new();
            fields.title = title;
            fields.status = status.map(tool_status);
            vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields))]
        }
        Event::Subagent { child, change, .. } => vec![subagent(&child, &change)],
        Event::InSession { event, .. } => live(*event),
    }
}

/// The updates for one event of a running prompt, each with the session it
/// goes to: `None` for the prompt's own session, a child's id for its own
/// updates, the immediate parent's id for a child's `subagent_update`.
pub(crate) fn routed(event: Event) -> Vec<(Option<String>, SessionUpdate)> {
    let session = match &event {
        Event::Subagent { parent, .. } => Some(parent.clone()),
        Event::InSession { session, .. } => Some(session.clone()),
        _ => None,
    };
    live(event)
        .into_iter()
        .map(|update| (session.clone(), update))
        .collect()
}

/// An ACP child's tool call status, as ACP says it.
fn tool_status(status: Status) -> ToolCallStatus {
    match status {
        Status::Pending => ToolCallStatus::Pending,
        Status::InProgress => ToolCallStatus::InProgress,
        Status::Completed => ToolCallStatus::Completed,
        _ => ToolCallStatus::Failed,
    }
}

/// An ACP child's plan, as ACP says it (its priorities are not forwarded:
/// each step is `medium`).
fn plan(steps: &[(String, Status)]) -> SessionUpdate {
    let entries = steps
        .iter()
        .map(|(step, status)| {
            let status = match status {
                Status::Pending => PlanEntryStatus::Pending,
                Status::InProgress => PlanEntryStatus::InProgress,
                _ => PlanEntryStatus::Completed,
            };
            PlanEntry::new(step.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// Sets a patch field when there is a value; leaves it out otherwise.
fn given(value: Option<String>) -> MaybeUndefined<String> {
    value.map_or(MaybeUndefined::Undefined, MaybeUndefined::Value)
}

/// The `subagent_update` that announces `child` (its title, task, cancel
/// capability and `running` state) or gives its terminal state: an `idle`
/// state with its stop reason, and no capability left.
pub(crate) fn subagent(child: &str, change: &Change) -> SessionUpdate {
    let update = SubagentUpdate::new(child.to_owned());
    SessionUpdate::SubagentUpdate(match change {
        Change::Started { title, task, cancel } => {
            let capabilities = SubagentSessionCapabilities::new().cancel(cancel.then(SessionCancelCapabilities::new));
            update
                .title(given(title.clone()))
                .description(given(task.clone()))
                .capabilities(capabilities)
                .state(StateUpdate::Running(RunningStateUpdate::new()))
        }
        Change::Ended(ending) => update
            .capabilities(SubagentSessionCapabilities::new())
            .state(StateUpdate::Idle(
                IdleStateUpdate::new().stop_reason(stop_reason(ending)),
            )),
    })
}

/// The stop reason of a child's `idle` terminal state.
fn stop_reason(ending: &Ending) -> IdleStopReason {
    match ending {
        Ending::EndTurn => IdleStopReason::EndTurn,
        Ending::MaxTokens => IdleStopReason::MaxTokens,
        Ending::Refusal => IdleStopReason::Refusal,
        Ending::Cancelled => IdleStopReason::Cancelled,
        Ending::Failed(message) => IdleStopReason::Error(ErrorStopReason::new().error(acp::v1::schema::Error::new(
            i32::from(acp::ErrorCode::INTERNAL_ERROR),
            message.clone(),
        ))),
        Ending::Disconnected => IdleStopReason::Other(OtherStopReason::new(
            super::subagents::DISCONNECTED_STOP,
            Default::default(),
        )),
    }
}

/// The end of a replayed tool call whose result was never recorded (its
/// run was interrupted): failed, saying so.
pub(crate) fn interrupted_call(id: &str) -> SessionUpdate {
    finished(id, crate::wording::ACP_CALL_INTERRUPTED, true, None)
}

/// A loaded session's history as the updates a client would have seen:
/// user messages, the agent's text, and each tool call with its result.
/// System messages are not shown.
pub(crate) fn replay(history: &[Message], delegation_tools: &[String]) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for message in history {
        match message {
            Message::System { .. } => {}
            Message::User { content } => {
                updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(text(
                    content.clone(),
                ))));
            }
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    updates.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(text(
                        content.clone(),
                    ))));
                }
                for call in tool_calls {
                    let delegation = delegation_tools.contains(&call.name);
                    updates.push(SessionUpdate::ToolCall(announce(
                        &call.id,
                        &call.name,
                        &call.arguments,
                        delegation,
                    )));
                }
            }
            Message::Tool { tool_call_id, content } => {
                let failed = content.starts_with(dsh_tools::wording::ERROR_PREFIX);
                updates.push(finished(tool_call_id, content, failed, None));
            }
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_llm::ToolCall as ModelToolCall;

    use super::*;

    fn json(updates: &[SessionUpdate]) -> Value {
        serde_json::to_value(updates).unwrap()
    }

    /// The start of a delegation call `id` whose task is "read the docs".
    fn delegation(id: &str) -> Event {
        Event::ToolStarted {
            id: id.into(),
            name: "subagent".into(),
            arguments: r#"{"description":"read the docs","prompt":"Read them."}"#.into(),
            delegation: true,
        }
    }

    #[test]
    fn a_delegation_is_announced_with_its_description_then_runs_then_completes() {
        let mut updates = live(delegation("call_1_0"));
        updates.extend(live(Event::ChildProgress {
            call: "call_1_0".into(),
            lines: vec!["read the docs: started (m)".into()],
        }));
        updates.extend(live(Event::ToolFinished {
            id: "call_1_0".into(),
            text: "done".into(),
            failed: false,
            cut: None,
        }));
        insta::assert_json_snapshot!(json(&updates));
    }

    #[test]
    fn a_cut_result_says_how_it_was_cut_in_the_meta_of_its_last_update() {
        let answer = "a".repeat(3_000);
        let read = dsh_tools::PagedRead::new(TASK_OUTPUT, "subagent-3");
        let excerpt = dsh_tools::budget::head_and_tail(&answer, 1_024, Some(read)).unwrap();
        let updates = live(Event::ToolFinished {
            id: "call_1_2".into(),
            text: excerpt.text.clone(),
            failed: false,
            cut: Some(Box::new(excerpt.cut)),
        });
        let json = json(&updates);
        insta::assert_json_snapshot!(json[0]["_meta"].clone(), @r#"
        {
          "dsh/resultCut": {
            "fullBytes": 3000,
            "fullChars": 3000,
            "shownBytes": 854,
            "shownChars": 854,
            "taskId": "subagent-3"
          }
        }
        "#);
        assert_eq!(json[0]["content"][0]["content"]["text"], excerpt.text.as_str());
    }

    #[test]
    fn a_delegation_whose_child_waits_for_a_slot_is_pending_then_in_progress() {
        let mut updates = live(delegation("call_1_3"));
        updates.extend(live(Event::CallWaits {
            call: "call_1_3".into(),
        }));
        updates.extend(live(Event::ChildProgress {
            call: "call_1_3".into(),
            lines: vec!["read the docs: queued (2 ahead)".into()],
        }));
        updates.extend(live(Event::CallAdmitted {
            call: "call_1_3".into(),
        }));
        insta::assert_json_snapshot!(json(&updates));
    }

    #[test]
    fn a_history_replays_as_user_agent_and_tool_updates() {
        let history = vec![
            Message::system("You are dsh."),
            Message::user("Summarize."),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ModelToolCall {
                    id: "call_1_0".into(),
                    name: "task_list".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::tool("call_1_0", "Error: no tasks"),
            Message::assistant("Nothing to summarize."),
        ];
        insta::assert_json_snapshot!(json(&replay(&history, &["subagent".to_owned()])));
    }
}
