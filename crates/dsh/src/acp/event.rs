//! What a running prompt reports to its ACP client ([`Event`]), and what a
//! `subagent_update` says of an announced child ([`Change`], [`Ending`]):
//! the values the stream, the subagent sessions and the updates share.

use dsh_subagent::RunEndInfo;
use dsh_subagent_acp::Status;
use dsh_subagent_api::StopReason;

/// One thing a prompt reports to its ACP client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A piece of the session agent's answer.
    Text(String),
    /// The session agent started a tool call.
    ToolStarted {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments (a JSON text).
        arguments: String,
        /// Whether it delegates (a `subagent`-kind tool).
        delegation: bool,
    },
    /// A tool call of the session agent ended.
    ToolFinished {
        /// The call's id.
        id: String,
        /// What the model reads.
        text: String,
        /// Whether it failed.
        failed: bool,
        /// How the result was cut to its budget, when it was.
        cut: Option<Box<dsh_tools::Cut>>,
    },
    /// A delegation call's own child waits for a slot of its tree: the
    /// call is pending.
    CallWaits {
        /// The delegation call's id.
        call: String,
    },
    /// That child got its slot: the call is in progress again.
    CallAdmitted {
        /// The delegation call's id.
        call: String,
    },
    /// The children working under a delegation call, one line each.
    ChildProgress {
        /// The delegation call's id.
        call: String,
        /// The lines, in start order.
        lines: Vec<String>,
    },
    /// A piece of an ACP child's thinking (its own session's only).
    Thought(String),
    /// An ACP child's plan, whole (its own session's only).
    Plan(Vec<(String, Status)>),
    /// An ACP child started a tool call (its own session's only).
    RemoteToolCall {
        /// The call's id, as the child gave it.
        id: String,
        /// Its title.
        title: String,
        /// Where it is.
        status: Status,
    },
    /// One of an ACP child's tool calls changed (its own session's only).
    RemoteToolUpdate {
        /// The call's id.
        id: String,
        /// A new title.
        title: Option<String>,
        /// A new status.
        status: Option<Status>,
    },
    /// A child announced or ended, on its immediate parent's session
    /// ([`subagents`](super::subagents)).
    Subagent {
        /// The parent's session id.
        parent: String,
        /// The child's session id.
        child: String,
        /// What is said of it.
        change: Change,
    },
    /// An announced child's own event, for its own session.
    InSession {
        /// The child's session id.
        session: String,
        /// What happened (never another `InSession` or `Subagent`).
        event: Box<Event>,
    },
}

/// How an announced child ended: its terminal state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It gave its answer (`end_turn`).
    EndTurn,
    /// A token budget ran out (`max_tokens`).
    MaxTokens,
    /// It refused (`refusal`).
    Refusal,
    /// It was cancelled (`cancelled`).
    Cancelled,
    /// It failed (`error`), and why.
    Failed(String),
    /// Its end is not known: its process or its record is gone
    /// (`_disconnected`).
    Disconnected,
}

impl Ending {
    /// How a run that settled so ended.
    pub(crate) fn of_run(end: &RunEndInfo) -> Self {
        match &end.stop_reason {
            StopReason::Completed => Self::EndTurn,
            StopReason::MaxTokens => Self::MaxTokens,
            StopReason::Refusal => Self::Refusal,
            StopReason::Aborted => Self::Cancelled,
            other => Self::Failed(match &end.diagnostic {
                Some(diagnostic) => format!("{}: {diagnostic}", other.as_str()),
                None => other.as_str().to_owned(),
            }),
        }
    }

    /// How a run whose transcript ends with this stop (`completed`,
    /// `cancelled`, `error: …`, `max-turns (16)`, …) ended, as
    /// [`Ending::of_run`] reads the same run live.
    pub(crate) fn of_stop(stop: &str) -> Self {
        match stop {
            "completed" => Self::EndTurn,
            "cancelled" => Self::Cancelled,
            "refusal" => Self::Refusal,
            "max-tokens" => Self::MaxTokens,
            _ if stop.starts_with("token budget") || stop.starts_with("cost budget") => Self::MaxTokens,
            other => Self::Failed(other.to_owned()),
        }
    }
}

/// What a `subagent_update` on a parent's session says of a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The child is announced, running.
    Started {
        /// Its title: the delegation's `description`.
        title: Option<String>,
        /// Its task: the start of its prompt.
        task: Option<String>,
        /// Whether `session/cancel` with its id cancels it.
        cancel: bool,
    },
    /// Its terminal state.
    Ended(Ending),
}
