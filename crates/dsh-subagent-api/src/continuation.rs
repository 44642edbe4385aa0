//! Continuable children: the durable descriptor, the provider capability to
//! start and resume them, and the store that finds them again.
//!
//! A *continuable* child outlives its first run. Its transcript records a
//! [`ContinuationDescriptor`] before its first turn; a later message resumes
//! the same child (same id, same history) through
//! [`ContinuableProvider::resume`], even after a restart. A provider offers
//! this by returning `Some` from
//! [`SubagentProvider::continuation`](crate::SubagentProvider::continuation).

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{
    AgentId, AgentRef, CancellationToken, ContentBlock, StartRequest, SubagentError, SubagentRun, ToolFilter, wording,
};

/// The descriptor version this crate writes (docs/contract.md, "Continuation descriptors").
pub const DESCRIPTOR_VERSION: u64 = 1;

/// What a continuable child needs to be resumed: recorded once, before its
/// first turn (docs/contract.md, "Continuation descriptors": version 1, plus the display label).
///
/// Absent optional fields are omitted, never `null`. Deliberately excluded:
/// the depth (the transcript header is its floor), the output schema and the
/// token budget (per activation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct ContinuationDescriptor {
    /// [`DESCRIPTOR_VERSION`].
    pub version: u64,
    /// The subagent provider that owns the child.
    pub provider: String,
    /// The display label (the tool's `description`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The child's model provider (backend), when not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_provider: Option<String>,
    /// The child's model, when not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
    /// The persona that replaced the child's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    /// The child's tool filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<ToolFilter>,
}

impl ContinuationDescriptor {
    /// The descriptor of a child started by `request` on `provider`: the
    /// model comes from the request's `agentOptions`, persona and tool filter
    /// when present.
    pub fn for_request(provider: impl Into<String>, request: &StartRequest) -> Self {
        let settings = request.settings();
        let options = settings.agent_options.as_ref();
        Self {
            version: DESCRIPTOR_VERSION,
            provider: provider.into(),
            label: request.label.clone(),
            agent_provider: options.and_then(|o| o.provider.clone()),
            agent_model: options.and_then(|o| o.model.clone()),
            persona: settings.persona.clone(),
            tool_filter: settings.tool_filter.clone(),
        }
    }

    /// The descriptor as the JSON object that is persisted.
    pub fn to_value(&self) -> Value {
        // A struct of strings and string lists always serializes.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads a persisted descriptor. An unknown version is `Ok(None)`
    /// (unclassifiable); a malformed version-1 payload is an error naming
    /// the first problem in the contract's words.
    pub fn fold(value: &Value) -> Result<Option<Self>, String> {
        let Some(object) = value.as_object() else {
            return Err(wording::DESCRIPTOR_NOT_OBJECT.into());
        };
        let Some(version) = object.get("version").and_then(Value::as_f64) else {
            return Err(wording::DESCRIPTOR_VERSION_NOT_NUMBER.into());
        };
        if version != DESCRIPTOR_VERSION as f64 {
            return Ok(None);
        }
        const FIELDS: [&str; 7] = [
            "version",
            "provider",
            "label",
            "agentProvider",
            "agentModel",
            "persona",
            "toolFilter",
        ];
        if let Some(unknown) = object.keys().find(|key| !FIELDS.contains(&key.as_str())) {
            return Err(wording::descriptor_unknown_field(unknown));
        }
        if !object.get("provider").is_some_and(Value::is_string) {
            return Err(wording::DESCRIPTOR_PROVIDER_NOT_STRING.into());
        }
        for key in ["label", "agentProvider", "agentModel", "persona"] {
            if object.get(key).is_some_and(|v| !v.is_string()) {
                return Err(wording::descriptor_field_not_string(key));
            }
        }
        if let Some(filter) = object.get("toolFilter") {
            check_filter(filter)?;
        }
        serde_json::from_value(Value::Object(object.clone()))
            .map(Some)
            .map_err(wording::descriptor_malformed)
    }
}

fn check_filter(filter: &Value) -> Result<(), String> {
    let Some(filter): Option<&Map<String, Value>> = filter.as_object() else {
        return Err(wording::FILTER_NOT_OBJECT.into());
    };
    if let Some(unknown) = filter.keys().find(|key| *key != "allow" && *key != "deny") {
        return Err(wording::filter_unknown_field(unknown));
    }
    for (key, list) in filter {
        let strings = list.as_array().is_some_and(|items| items.iter().all(Value::is_string));
        if !strings {
            return Err(wording::filter_list_not_strings(key));
        }
    }
    if filter.is_empty() {
        return Err(wording::FILTER_EMPTY.into());
    }
    Ok(())
}

/// A request to continue a persisted child with a new message.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ResumeRequest {
    /// The child's id.
    pub child_id: String,
    /// The new user message.
    pub prompt: Vec<ContentBlock>,
    /// The delegating agent (the child's parent).
    pub parent: AgentRef,
    /// Cancellation of the resume and of the resumed run.
    pub cancel: CancellationToken,
    /// The child's descriptor, as folded from its transcript.
    pub descriptor: ContinuationDescriptor,
    /// Where the new activation's `invoke_agent` span sits (default: a new
    /// trace that follows from the span current when the request was made,
    /// a `send_message` call's).
    pub origin: crate::SpanOrigin,
    /// The resumed child's place in its parent's delegation tree, set by the
    /// service when it admits the activation (see [`crate::Lineage`]).
    pub lineage: crate::Lineage,
}

impl ResumeRequest {
    /// A resume request.
    pub fn new(
        child_id: impl Into<String>,
        prompt: Vec<ContentBlock>,
        parent: AgentRef,
        cancel: CancellationToken,
        descriptor: ContinuationDescriptor,
    ) -> Self {
        Self {
            child_id: child_id.into(),
            prompt,
            parent,
            cancel,
            descriptor,
            origin: crate::SpanOrigin::follows_current(),
            lineage: crate::Lineage::default(),
        }
    }
}

/// A request to recover a persisted child after an interruption: continue
/// its interrupted turn from its last completed step, or, when it had
/// finished, hand back the result it recorded, with no new model call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecoverRequest {
    /// The child's id.
    pub child_id: String,
    /// The delegating agent (the child's parent).
    pub parent: AgentRef,
    /// Cancellation of the recovery and of the recovered run.
    pub cancel: CancellationToken,
    /// The child's descriptor, as folded from its transcript.
    pub descriptor: ContinuationDescriptor,
    /// Where the recovered run's `invoke_agent` span sits.
    pub origin: crate::SpanOrigin,
    /// The child's place in its parent's delegation tree, set by the service
    /// when it admits the recovery (see [`crate::Lineage`]).
    pub lineage: crate::Lineage,
}

impl RecoverRequest {
    /// A recover request.
    pub fn new(
        child_id: impl Into<String>,
        parent: AgentRef,
        cancel: CancellationToken,
        descriptor: ContinuationDescriptor,
    ) -> Self {
        Self {
            child_id: child_id.into(),
            parent,
            cancel,
            descriptor,
            origin: crate::SpanOrigin::follows_current(),
            lineage: crate::Lineage::default(),
        }
    }
}

/// The continuation capability of a provider: start a child under a chosen
/// id with its descriptor recorded, and resume a persisted child.
///
/// Both methods follow [`SubagentProvider::start`](crate::SubagentProvider::start)'s
/// ownership contract: `Ok` publishes a run the caller must dispose.
pub trait ContinuableProvider: Send + Sync {
    /// Whether `parent` can have continuable children here at all (e.g.
    /// its runtime persists transcripts), checked synchronously before any
    /// task exists. The default accepts every parent.
    fn check_continuable(&self, parent: &AgentRef) -> Result<(), SubagentError> {
        let _ = parent;
        Ok(())
    }

    /// Starts a child whose id is `child_id`, recording `descriptor` before
    /// its first turn.
    fn start_continuable(
        &self,
        child_id: String,
        descriptor: ContinuationDescriptor,
        request: StartRequest,
    ) -> BoxFuture<'_, Result<SubagentRun, SubagentError>>;

    /// Continues the persisted child `request.child_id` with `request.prompt`:
    /// same id, same history, same system prompt, tool filter and model.
    fn resume(&self, request: ResumeRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>>;

    /// Recovers the persisted child `request.child_id` after an
    /// interruption (see [`RecoverRequest`]): its run goes on from its last
    /// completed step, or resolves at once with the result it had recorded.
    /// The default cannot: it refuses with
    /// [`ErrorCode::NotResumable`](crate::ErrorCode::NotResumable), and the
    /// caller reports the child as disconnected.
    fn recover(&self, request: RecoverRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        let id = request.child_id;
        Box::pin(async move {
            Err(SubagentError::failed_with_code(
                wording::not_recoverable(&id),
                crate::ErrorCode::NotResumable,
            ))
        })
    }
}

/// A persisted child as its store sees it.
///
/// Built with [`ChildRecord::new`] and the `with_*` setters, so new fields
/// can join without breaking a store written outside this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildRecord {
    /// The child's id.
    pub id: String,
    /// The agent that started it.
    pub parent: Option<AgentId>,
    /// Its continuation descriptor, when it has a supported one.
    pub descriptor: Option<ContinuationDescriptor>,
    /// What the store noticed, e.g. a torn last line after a crash (earlier
    /// entries intact) or a malformed descriptor.
    pub diagnostic: Option<String>,
    /// Whether the caller waited for the child or went on while it ran.
    pub mode: crate::RunMode,
    /// The task id the caller's model was given for the child: the
    /// background task that ran it, or where its cut result was kept.
    pub task_id: Option<String>,
    /// How the child's last run ended; `None` while it has not: it runs, or
    /// it was interrupted (a crash, a resumable stop) and can be recovered.
    pub ended: Option<crate::StopReason>,
    /// Whether the caller was told that the child's background task
    /// finished (its completion notice is in the caller's records).
    pub notice_delivered: bool,
    /// What is known of a child in another process, which keeps no records
    /// beside its parent's; `None` for an in-process child.
    pub remote: Option<crate::RemoteChild>,
    /// For a background child that had not begun to run (it keeps no
    /// records yet): the prompt it was started with, so that it can start
    /// again under the same ids.
    pub first_prompt: Option<String>,
}

impl ChildRecord {
    /// A child with no descriptor and no diagnostic.
    pub fn new(id: impl Into<String>, parent: Option<AgentId>) -> Self {
        Self {
            id: id.into(),
            parent,
            descriptor: None,
            diagnostic: None,
            mode: crate::RunMode::Foreground,
            task_id: None,
            ended: None,
            notice_delivered: false,
            remote: None,
            first_prompt: None,
        }
    }

    /// Marks a background child that had not begun to run: it starts again
    /// with `prompt`.
    #[must_use]
    pub fn not_begun(mut self, prompt: impl Into<String>) -> Self {
        self.first_prompt = Some(prompt.into());
        self
    }

    /// Sets how the caller ran the child and the task id its model was given.
    #[must_use]
    pub fn with_task(mut self, mode: crate::RunMode, task_id: Option<String>) -> Self {
        self.mode = mode;
        self.task_id = task_id;
        self
    }

    /// Sets how the child's last run ended.
    #[must_use]
    pub fn with_ended(mut self, ended: Option<crate::StopReason>) -> Self {
        self.ended = ended;
        self
    }

    /// Records that the caller was told the child's task finished.
    #[must_use]
    pub fn with_notice_delivered(mut self, delivered: bool) -> Self {
        self.notice_delivered = delivered;
        self
    }

    /// Sets what is known of a child in another process.
    #[must_use]
    pub fn with_remote(mut self, remote: crate::RemoteChild) -> Self {
        self.remote = Some(remote);
        self
    }

    /// Sets the continuation descriptor.
    #[must_use]
    pub fn with_descriptor(mut self, descriptor: ContinuationDescriptor) -> Self {
        self.descriptor = Some(descriptor);
        self
    }

    /// Sets what the store noticed about the child.
    #[must_use]
    pub fn with_diagnostic(mut self, diagnostic: impl Into<String>) -> Self {
        self.diagnostic = Some(diagnostic.into());
        self
    }
}

/// Where continuable children are persisted: answers "does child X exist,
/// who is its parent, what is its descriptor, anything wrong with it".
pub trait ChildStore: Send + Sync {
    /// The child, `Ok(None)` when no child has this id.
    fn lookup(&self, child_id: &str) -> Result<Option<ChildRecord>, SubagentError>;

    /// Every persisted child of `parent`, in a stable order.
    fn children_of(&self, parent: &AgentId) -> Result<Vec<ChildRecord>, SubagentError>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_fields_are_omitted_and_the_descriptor_round_trips() {
        let mut request = StartRequest::text("p", AgentRef::new("a"), CancellationToken::new());
        request.label = Some("research".into());
        let descriptor = ContinuationDescriptor::for_request("spawn", &request);
        let value = descriptor.to_value();
        assert_eq!(value, json!({"version": 1, "provider": "spawn", "label": "research"}));
        assert_eq!(ContinuationDescriptor::fold(&value), Ok(Some(descriptor)));
    }

    #[test]
    fn unknown_versions_are_unclassifiable_and_malformed_payloads_are_named() {
        assert_eq!(ContinuationDescriptor::fold(&json!({"version": 2, "x": 1})), Ok(None));
        let cases = [
            (json!([]), "persisted subagent descriptor payload must be an object"),
            (
                json!({"version": "1"}),
                "persisted subagent descriptor version must be a number",
            ),
            (
                json!({"version": 1, "provider": "spawn", "extra": 1}),
                "persisted subagent descriptor payload has unknown field \"extra\"",
            ),
            (
                json!({"version": 1}),
                "persisted subagent descriptor provider must be a string",
            ),
            (
                json!({"version": 1, "provider": "spawn", "persona": 3}),
                "persisted subagent descriptor persona must be a string",
            ),
            (
                json!({"version": 1, "provider": "spawn", "toolFilter": {}}),
                "persisted subagent descriptor toolFilter must declare allow and/or deny",
            ),
            (
                json!({"version": 1, "provider": "spawn", "toolFilter": {"allow": [1]}}),
                "persisted subagent descriptor toolFilter.allow must be an array of strings",
            ),
        ];
        for (value, message) in cases {
            assert_eq!(ContinuationDescriptor::fold(&value), Err(message.to_owned()), "{value}");
        }
    }
}
