//! What a parent records of a child that runs in another process (an ACP
//! agent): such a child keeps no transcript beside its parent's, so its
//! provider tells the parent's records what it knows ([`ChildLog`]).

use serde::{Deserialize, Serialize};

/// Where an agent records the children that run outside its process; an
/// agent loop that keeps transcripts attaches one to its [`AgentRef`]
/// ([`AgentRef::with_child_log`]), and a provider whose children run
/// elsewhere calls it when a child starts and when it ends.
///
/// [`AgentRef`]: crate::AgentRef
/// [`AgentRef::with_child_log`]: crate::AgentRef::with_child_log
pub trait ChildLog: Send + Sync {
    /// Records what is known of the child `id` (its run handle's id): once
    /// when its run is published, once more, with [`RemoteChild::ended`]
    /// set, when it has ended.
    fn remote_child(&self, id: &str, child: &RemoteChild);

    /// Records, before it runs, a background child the agent started
    /// (`id`, the id its model was told): what it takes to start it again
    /// if the process ends before the child keeps records of its own. The
    /// default keeps nothing.
    fn child_starting(&self, id: &str, start: &ChildStart) {
        let _ = (id, start);
    }
}

/// A background child as its parent records it when it starts it, before
/// the child has records of its own ([`ChildLog::child_starting`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChildStart {
    /// The task that runs it (the id its parent's model was given).
    pub task_id: String,
    /// How it is run again: its continuation descriptor (its provider,
    /// label, model, persona and filter), as the JSON object that is
    /// persisted (`ContinuationDescriptor::to_value`; read back with
    /// `ContinuationDescriptor::fold`).
    pub descriptor: serde_json::Value,
    /// The prompt it was started with.
    pub prompt: String,
    /// The id the model gave the call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

impl ChildStart {
    /// A start of task `task_id`, described by `descriptor`, with `prompt`.
    pub fn new(task_id: impl Into<String>, descriptor: serde_json::Value, prompt: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            descriptor,
            prompt: prompt.into(),
            call_id: None,
        }
    }
}

/// What a parent's records keep of a child in another process: how it came
/// about, where its own records are, and how its run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RemoteChild {
    /// The registered name of the provider that ran it.
    pub provider: String,
    /// The tool whose call asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The id the model gave that call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Its display label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its task (the id `task_output` takes): the background task that
    /// runs it, or the id reserved for its foreground result, which names
    /// the task that keeps the result if it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Whether its caller went on while it ran (a background task).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// Its session's id in the other process (for `dsh acp`, the id of the
    /// agent that ran it there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The data directory where the other process keeps its transcripts,
    /// when it said (an absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
    /// When this was recorded: its start, or its end once it ended, in
    /// milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// How its run ended; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<RemoteEnd>,
    /// The subagent sessions it announced (an ACP agent with subagents of
    /// its own), at every depth, in the order announced; recorded with its
    /// end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<RemoteSubagent>,
}

/// A subagent session a child in another process announced: who it is,
/// under whom, what it was asked, and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RemoteSubagent {
    /// Its session id, as the child named it.
    pub session: String,
    /// The session that announced it; absent when the child itself did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What it was asked, as the child described it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// How it ended (`completed`, `cancelled`, `error: …`, `disconnected`,
    /// …); absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
}

impl RemoteSubagent {
    /// A session `session` announced on `parent` (`None`: by the child itself).
    pub fn new(session: impl Into<String>, parent: Option<String>) -> Self {
        Self {
            session: session.into(),
            parent,
            ..Self::default()
        }
    }
}

impl RemoteChild {
    /// A child of `provider`, recorded at `at_ms`, nothing else known yet.
    pub fn new(provider: impl Into<String>, at_ms: u64) -> Self {
        Self {
            provider: provider.into(),
            at_ms,
            ..Self::default()
        }
    }
}

/// How a child in another process ended its run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RemoteEnd {
    /// Its stop reason ([`StopReason::as_str`](crate::StopReason::as_str)).
    pub stop: String,
    /// The size of the answer it gave, in bytes.
    pub answer_bytes: u64,
}

impl RemoteEnd {
    /// An end with this stop reason and answer size.
    pub fn new(stop: impl Into<String>, answer_bytes: u64) -> Self {
        Self {
            stop: stop.into(),
            answer_bytes,
        }
    }
}
