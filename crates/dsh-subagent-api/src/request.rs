//! The start request: everything a provider needs to start one child.

use std::sync::Arc;
use std::time::Duration;

use crate::{AgentRef, CancellationToken, Lineage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Capability, ContentBlock, ContextWindow, DepthLimit, SubagentError, TokenLimit};

/// Options for the child agent itself, overlaid on the parent's.
///
/// Absent fields stay absent: the child inherits the parent's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentOptions {
    /// The model provider (backend) to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The output-token budget per model call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The context window of the child's model, when it differs from the
    /// parent's: an agent loop fits each request into it. Checked when
    /// read, so a window too small is refused with the options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<ContextWindow>,
}

/// Which tools the child may see and call.
///
/// Omitted lists stay absent (`None`): an absent `allow` means "every tool",
/// while `Some(vec![])` means "no tool". `deny` wins over `allow`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolFilter {
    /// When present, only these tools are visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// These tools are never visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

impl AgentOptions {
    /// No option set: the child inherits everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the model provider (backend).
    #[must_use]
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }

    /// Sets the model.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets the output-token budget per model call.
    #[must_use]
    pub fn with_max_tokens(mut self, max_tokens: u64) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Sets the context window of the child's model.
    #[must_use]
    pub fn with_context_window(mut self, window: ContextWindow) -> Self {
        self.context_window = Some(window);
        self
    }
}

impl ToolFilter {
    /// A filter that shows only `names` (an empty list shows no tool).
    pub fn allowing<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self::default().with_allow(names)
    }

    /// A filter that hides `names` and shows every other tool.
    pub fn denying<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self::default().with_deny(names)
    }

    /// Sets the `allow` list.
    #[must_use]
    pub fn with_allow<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.allow = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the `deny` list.
    #[must_use]
    pub fn with_deny<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.deny = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Whether a tool of this name passes the filter.
    pub fn permits(&self, name: &str) -> bool {
        let allowed = self.allow.as_ref().is_none_or(|allow| allow.iter().any(|a| a == name));
        let denied = self.deny.as_ref().is_some_and(|deny| deny.iter().any(|d| d == name));
        allowed && !denied
    }
}

/// How a start came about, as its child records it ([`StartRequest::provenance`]).
///
/// The tool that asked for the child sets [`tool`](Self::tool) and
/// [`call_id`](Self::call_id); the service sets [`provider`](Self::provider)
/// and [`queued`](Self::queued) when it admits the start, and
/// [`task_id`](Self::task_id) when the child runs as a background task.
///
/// A [`StartRequest`] holds it behind one shared pointer
/// ([`StartRequest::with_provenance`], [`StartRequest::provenance_mut`]),
/// as it holds its [`ChildSettings`]: a tool builds the part every call of
/// it shares (its name, its provider) once, and a request, one per call in
/// flight or waiting in a queue, carries a pointer instead of room for five
/// fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Provenance {
    /// The name of the tool whose call asked for the child (`subagent`,
    /// `subagent_fork`, an ACP agent's tool), when a tool did.
    pub tool: Option<String>,
    /// The id the model gave that tool call, when known.
    pub call_id: Option<String>,
    /// The registered name of the provider that runs the child.
    pub provider: Option<String>,
    /// How long the start waited for a slot of its tree (zero when it did
    /// not wait).
    pub queued: Duration,
    /// The task of the child (the id `task_output` takes): the background
    /// task that runs it, set by the service that made the task; or, for a
    /// foreground call, the id reserved when the call started for its
    /// result, which is kept under it if it is cut (unused otherwise).
    pub task_id: Option<String>,
    /// Set when the call is run again after an interruption: the child it
    /// had started, which the provider continues instead of starting
    /// another ([`Rerun`](crate::Rerun)).
    pub rerun: Option<crate::Rerun>,
}

/// The provenance of a request that records none.
static NO_PROVENANCE: Provenance = Provenance {
    tool: None,
    call_id: None,
    provider: None,
    queued: Duration::ZERO,
    task_id: None,
    rerun: None,
};

/// Whether the caller of a start waits for the child ([`StartRequest::mode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunMode {
    /// The caller waits for the child's result: a foreground delegation.
    #[default]
    Foreground,
    /// The caller goes on while the child runs: a background task, or a
    /// continuable child.
    Background,
}

/// What a caller asks of a child beyond its prompt: its agent options,
/// persona, tool filter, depth cap, output schema, and time and token
/// limits. Every field is optional and stays `None` unless set.
///
/// A [`StartRequest`] holds these behind one shared pointer
/// ([`StartRequest::settings`], [`StartRequest::with_settings`]): most
/// requests set none of them, and a tool that asks the same of every child
/// builds them once and shares them, so a request (one per call in flight
/// or waiting in a queue) does not carry room for fields it does not set.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ChildSettings {
    /// Child agent options overlaid on the parent's.
    pub agent_options: Option<AgentOptions>,
    /// A persona replacing the child's system prompt. Needs [`Capability::Persona`].
    pub persona: Option<String>,
    /// A tool filter for the child. Needs [`Capability::ToolFilter`].
    pub tool_filter: Option<ToolFilter>,
    /// An absolute depth cap: the child's depth must be at most this. Needs [`Capability::DepthLimit`].
    pub max_depth: Option<DepthLimit>,
    /// A JSON schema the child's final answer must match. Needs [`Capability::OutputSchema`].
    pub output_schema: Option<Value>,
    /// The wall time the child's run may take. The service cancels it when
    /// this (or its parent's deadline, when earlier) has passed, and the run
    /// ends `time limit of … reached`, its partial output kept.
    pub timeout: Option<Duration>,
    /// The input plus output tokens the child may spend over all its model
    /// calls, its own children's included, within what its parent has left.
    /// Needs [`Capability::TokenBudget`].
    pub token_limit: Option<TokenLimit>,
}

/// The settings of a request that sets none.
static NO_SETTINGS: ChildSettings = ChildSettings {
    agent_options: None,
    persona: None,
    tool_filter: None,
    max_depth: None,
    output_schema: None,
    timeout: None,
    token_limit: None,
};

impl ChildSettings {
    /// No setting: the child inherits everything and has no limit of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self == &NO_SETTINGS
    }

    /// Checks the one field whose shape its type cannot hold:
    /// `output_schema` must be object-rooted. (The depth cap and the token
    /// budget checked themselves when they were made.)
    pub fn validate(&self) -> Result<(), SubagentError> {
        if let Some(schema) = &self.output_schema
            && schema.get("type").and_then(Value::as_str) != Some("object")
        {
            return Err(SubagentError::InvalidOutputSchema);
        }
        Ok(())
    }

    /// The capabilities these settings need, in the order the service checks them.
    pub fn required_capabilities(&self) -> impl Iterator<Item = Capability> + '_ {
        [
            (self.output_schema.is_some(), Capability::OutputSchema),
            (self.max_depth.is_some(), Capability::DepthLimit),
            (self.tool_filter.is_some(), Capability::ToolFilter),
            (self.persona.is_some(), Capability::Persona),
            (self.token_limit.is_some(), Capability::TokenBudget),
        ]
        .into_iter()
        .filter_map(|(needed, capability)| needed.then_some(capability))
    }
}

/// A request to start one child.
///
/// `prompt`, `parent` and `cancel` are required; every other field is
/// optional, and what the caller asks of the child beyond its prompt (its
/// [`ChildSettings`]) is set with [`StartRequest::with_settings`] or
/// [`StartRequest::settings_mut`]. The token covers the whole life of the
/// child: while `start` is pending the provider must roll back and fail,
/// and after publication it must stop the child and settle its result as
/// `aborted`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct StartRequest {
    /// The child's first user message.
    pub prompt: Vec<ContentBlock>,
    /// The delegating agent.
    pub parent: AgentRef,
    /// Cancellation of the start and of the live run.
    pub cancel: CancellationToken,
    /// A short display label for the child (the tool's `description`).
    pub label: Option<String>,
    /// Where the child's `invoke_agent` span sits (default: under the span
    /// current when the request was made).
    pub origin: crate::SpanOrigin,
    /// Whether the caller waits for this child ([`RunMode::Foreground`],
    /// the default) or goes on while it runs ([`RunMode::Background`]). A
    /// waiting caller lends its admission slot to its child, so a tree whose
    /// agents wait on their children cannot deadlock on its `max_concurrent`.
    pub mode: RunMode,
    /// The child's place in its delegation tree. Set by the service when it
    /// admits the child (whatever the caller put here is replaced); a
    /// provider gives it to the child's [`AgentRef`] (see [`Lineage`]).
    pub lineage: Lineage,
    /// `None`: nothing known (read as [`Provenance::default`]).
    provenance: Option<Arc<Provenance>>,
    /// `None`: no setting (read as [`ChildSettings::new`]).
    settings: Option<Arc<ChildSettings>>,
}

impl StartRequest {
    /// A request with the three required fields and nothing else.
    pub fn new(prompt: Vec<ContentBlock>, parent: AgentRef, cancel: CancellationToken) -> Self {
        Self {
            prompt,
            parent,
            cancel,
            label: None,
            origin: crate::SpanOrigin::current(),
            mode: RunMode::Foreground,
            lineage: Lineage::default(),
            provenance: None,
            settings: None,
        }
    }

    /// A request whose prompt is one text block.
    pub fn text(prompt: impl Into<String>, parent: AgentRef, cancel: CancellationToken) -> Self {
        Self::new(vec![ContentBlock::text(prompt)], parent, cancel)
    }

    /// Asks `settings` of the child, shared with whoever else holds them
    /// (a tool hands the same ones to every call).
    #[must_use]
    pub fn with_settings(mut self, settings: Arc<ChildSettings>) -> Self {
        self.settings = Some(settings);
        self
    }

    /// What the request asks of the child beyond its prompt.
    pub fn settings(&self) -> &ChildSettings {
        self.settings.as_deref().unwrap_or(&NO_SETTINGS)
    }

    /// The request's settings, to change: its own copy when they are
    /// shared, so whoever else holds them sees no change.
    pub fn settings_mut(&mut self) -> &mut ChildSettings {
        Arc::make_mut(self.settings.get_or_insert_with(Arc::default))
    }

    /// Records how this start came about ([`Provenance`]), shared with
    /// whoever else holds it (a tool hands the same one to every call that
    /// has no id of its own).
    #[must_use]
    pub fn with_provenance(mut self, provenance: Arc<Provenance>) -> Self {
        self.provenance = Some(provenance);
        self
    }

    /// How this start came about (the tool that asked, the provider that
    /// runs it, its wait for a slot), for the child's own records: an
    /// in-process child writes it into its transcript, where a tree view
    /// reads it. Informational: nothing is checked against it.
    pub fn provenance(&self) -> &Provenance {
        self.provenance.as_deref().unwrap_or(&NO_PROVENANCE)
    }

    /// The request's provenance, to change: its own copy when it is shared,
    /// so whoever else holds it sees no change.
    pub fn provenance_mut(&mut self) -> &mut Provenance {
        Arc::make_mut(self.provenance.get_or_insert_with(Arc::default))
    }

    /// Checks the settings that have a shape of their own
    /// ([`ChildSettings::validate`]).
    pub fn validate(&self) -> Result<(), SubagentError> {
        self.settings().validate()
    }

    /// The capabilities this request needs, in the order the service checks them.
    pub fn required_capabilities(&self) -> impl Iterator<Item = Capability> + '_ {
        self.settings().required_capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omitted_filter_lists_stay_absent() {
        let filter: ToolFilter = serde_json::from_str(r#"{"deny":["subagent"]}"#).unwrap();
        assert_eq!(filter.allow, None);
        assert_eq!(serde_json::to_string(&filter).unwrap(), r#"{"deny":["subagent"]}"#);
    }

    #[test]
    fn filter_semantics() {
        let grant_only = ToolFilter {
            allow: Some(vec![]),
            deny: None,
        };
        assert!(!grant_only.permits("read"));
        let deny = ToolFilter {
            allow: None,
            deny: Some(vec!["subagent".into()]),
        };
        assert!(deny.permits("read"));
        assert!(!deny.permits("subagent"));
    }

    #[test]
    fn capabilities_are_listed_in_check_order() {
        let mut request = StartRequest::text("p", AgentRef::new("a"), CancellationToken::new());
        let settings = request.settings_mut();
        settings.persona = Some("x".into());
        settings.max_depth = DepthLimit::new(1).ok();
        settings.output_schema = Some(serde_json::json!({}));
        let needed: Vec<_> = request.required_capabilities().collect();
        assert_eq!(
            needed,
            [Capability::OutputSchema, Capability::DepthLimit, Capability::Persona]
        );
    }

    #[test]
    fn shared_settings_are_copied_before_a_change() {
        let shared = Arc::new(ChildSettings {
            persona: Some("terse".into()),
            ..ChildSettings::new()
        });
        let mut request =
            StartRequest::text("p", AgentRef::new("a"), CancellationToken::new()).with_settings(shared.clone());
        assert_eq!(request.settings().persona.as_deref(), Some("terse"));
        request.settings_mut().max_depth = DepthLimit::new(2).ok();
        assert_eq!(request.settings().max_depth, DepthLimit::new(2).ok());
        assert_eq!(shared.max_depth, None, "the shared settings are unchanged");
    }

    #[test]
    fn shared_provenance_is_copied_before_a_change() {
        let shared = Arc::new(Provenance {
            tool: Some("subagent".into()),
            ..Provenance::default()
        });
        let mut request =
            StartRequest::text("p", AgentRef::new("a"), CancellationToken::new()).with_provenance(shared.clone());
        request.provenance_mut().call_id = Some("call-1".into());
        assert_eq!(request.provenance().tool.as_deref(), Some("subagent"));
        assert_eq!(request.provenance().call_id.as_deref(), Some("call-1"));
        assert_eq!(shared.call_id, None, "the shared provenance is unchanged");
        let bare = StartRequest::text("p", AgentRef::new("a"), CancellationToken::new());
        assert_eq!(bare.provenance(), &Provenance::default());
    }

    /// A request is held by every call in flight and every call waiting in
    /// a queue: what it records beyond its prompt sits behind pointers.
    #[test]
    fn a_request_stays_small() {
        assert!(
            size_of::<StartRequest>() <= 144,
            "StartRequest grew to {} B",
            size_of::<StartRequest>()
        );
    }

    #[test]
    fn a_request_without_settings_reads_as_empty() {
        let request = StartRequest::text("p", AgentRef::new("a"), CancellationToken::new());
        assert!(request.settings().is_empty());
        assert_eq!(request.required_capabilities().count(), 0);
    }
}
