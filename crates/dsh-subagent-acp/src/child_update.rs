//! What an ACP child reports while it works: its `session/update`s, in this
//! crate's own terms and cut to bounded sizes, handed to the watcher set
//! with [`AcpProvider::with_progress`](crate::AcpProvider::with_progress).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, PlanEntryStatus, SessionUpdate, ToolCallStatus as AcpToolStatus,
};

use crate::printable::printable;

/// The most characters of a title or a plan step forwarded.
const MAX_LABEL_CHARS: usize = 200;

/// The most characters of one text chunk forwarded.
const MAX_TEXT_CHARS: usize = 1024;

/// The most plan steps forwarded.
const MAX_PLAN_STEPS: usize = 16;

/// One report of an ACP child while it works, from one of its
/// `session/update` notifications. Every text is the child's choice, made
/// printable (escape sequences and control characters removed) and cut:
/// titles and steps to 200 characters, a text or thought chunk to 1024
/// (kept as written), a plan to its first 16 steps. Updates of other kinds
/// (commands, modes, usage) are not forwarded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChildUpdate {
    /// A piece of the child's answer (`agent_message_chunk`).
    Text(String),
    /// A piece of the child's thinking (`agent_thought_chunk`).
    Thought(String),
    /// The child started a tool call (`tool_call`).
    ToolCall {
        /// The call's id, as the child gave it.
        id: String,
        /// What the child calls it.
        title: String,
        /// Where it is.
        status: Status,
    },
    /// One of the child's tool calls changed (`tool_call_update`): only what
    /// changed is set.
    ToolCallUpdate {
        /// The call's id.
        id: String,
        /// A new title.
        title: Option<String>,
        /// A new status.
        status: Option<Status>,
    },
    /// The child's plan, whole (`plan`): each step and its status.
    Plan(Vec<(String, Status)>),
    /// The child announced a subagent session (`subagent_update`, the
    /// Subagents RFD), or one that ended runs again.
    Subagent {
        /// Its session id, as the child named it.
        session: String,
        /// The session that announced it; `None` when the child itself did.
        parent: Option<String>,
        /// Its title.
        title: Option<String>,
        /// What it was asked, as the child described it.
        task: Option<String>,
    },
    /// A subagent session ended: its terminal state, in dsh's words
    /// (`completed`, `cancelled`, `error: …`, `disconnected` when it was
    /// still running as its child's run ended, …).
    SubagentEnded {
        /// Its session id.
        session: String,
        /// How it ended.
        stop: String,
    },
}

/// Where a tool call or a plan step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Not started.
    Pending,
    /// Running, or being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Failed (tool calls only).
    Failed,
}

/// Receives the reports of every child of a provider: the run's id (the
/// [`SubagentRun`](dsh_subagent_api::SubagentRun)'s, the same as in the
/// service's run events) and the update. It is called on the child's
/// connection task, in the order the child sent them, from the moment its
/// session exists until its run ends; keep it quick and never block in it.
pub type ProgressSink = Arc<dyn Fn(&str, &ChildUpdate) + Send + Sync>;

pub(crate) fn label(text: &str) -> String {
    printable(text, MAX_LABEL_CHARS)
}

fn tool_status(status: AcpToolStatus) -> Status {
    match status {
        AcpToolStatus::Pending => Status::Pending,
        AcpToolStatus::InProgress => Status::InProgress,
        AcpToolStatus::Completed => Status::Completed,
        // `failed` and anything a later schema adds.
        _ => Status::Failed,
    }
}

fn step_status(status: &PlanEntryStatus) -> Status {
    match status {
        PlanEntryStatus::Pending => Status::Pending,
        PlanEntryStatus::InProgress => Status::InProgress,
        // `completed` and anything a later schema adds.
        _ => Status::Completed,
    }
}

/// The report for one `session/update`, when it is of a kind we forward.
pub(crate) fn child_update(update: &SessionUpdate) -> Option<ChildUpdate> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
            ContentBlock::Text(text) => ChildUpdate::Text(text.text.chars().take(MAX_TEXT_CHARS).collect()),
            _ => return None,
        },
        SessionUpdate::AgentThoughtChunk(chunk) => match &chunk.content {
            ContentBlock::Text(text) => ChildUpdate::Thought(text.text.chars().take(MAX_TEXT_CHARS).collect()),
            _ => return None,
        },
        SessionUpdate::ToolCall(call) => ChildUpdate::ToolCall {
            id: label(&call.tool_call_id.to_string()),
            title: label(&call.title),
            status: tool_status(call.status),
        },
        SessionUpdate::ToolCallUpdate(update) => ChildUpdate::ToolCallUpdate {
            id: label(&update.tool_call_id.to_string()),
            title: update.fields.title.as_deref().map(label),
            status: update.fields.status.map(tool_status),
        },
        SessionUpdate::Plan(plan) => ChildUpdate::Plan(
            plan.entries
                .iter()
                .take(MAX_PLAN_STEPS)
                .map(|entry| (label(&entry.content), step_status(&entry.status)))
                .collect(),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn update(json: serde_json::Value) -> Option<ChildUpdate> {
        child_update(&serde_json::from_value(json).unwrap())
    }

    #[test]
    fn tool_calls_plans_and_text_are_forwarded_bounded() {
        assert_eq!(
            update(serde_json::json!({"sessionUpdate": "tool_call", "toolCallId": "c1",
                "title": "Read \u{1b}[31mfile\u{1b}[0m\nnow", "status": "in_progress"})),
            Some(ChildUpdate::ToolCall {
                id: "c1".into(),
                title: "Read file now".into(),
                status: Status::InProgress
            })
        );
        assert_eq!(
            update(
                serde_json::json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                "status": "failed"})
            ),
            Some(ChildUpdate::ToolCallUpdate {
                id: "c1".into(),
                title: None,
                status: Some(Status::Failed)
            })
        );
        let steps: Vec<_> = (0..40)
            .map(|i| serde_json::json!({"content": format!("step {i}"), "priority": "low", "status": "pending"}))
            .collect();
        let Some(ChildUpdate::Plan(plan)) = update(serde_json::json!({"sessionUpdate": "plan", "entries": steps}))
        else {
            panic!("a plan")
        };
        assert_eq!(plan.len(), MAX_PLAN_STEPS);
        assert_eq!(plan[0], ("step 0".to_owned(), Status::Pending));
        let long = "x".repeat(5000);
        let Some(ChildUpdate::Text(text)) = update(serde_json::json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": long}}))
        else {
            panic!("text")
        };
        assert_eq!(text.len(), MAX_TEXT_CHARS);
        let title = "t".repeat(500);
        let Some(ChildUpdate::ToolCall { title, .. }) =
            update(serde_json::json!({"sessionUpdate": "tool_call", "toolCallId": "c2", "title": title}))
        else {
            panic!("a call")
        };
        assert_eq!(title.chars().count(), MAX_LABEL_CHARS + 1, "cut, with an ellipsis");
        assert_eq!(
            update(serde_json::json!({"sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "hmm"}})),
            Some(ChildUpdate::Thought("hmm".into()))
        );
        assert_eq!(
            update(serde_json::json!({"sessionUpdate": "available_commands_update", "availableCommands": []})),
            None
        );
    }
}
