//! Configuration of one `subagent` tool instance, and its load-time checks.

use std::time::Duration;

use dsh_subagent_api::{AgentOptions, ContextWindow, DurationSetting, MAX_SAFE_INTEGER, TokenLimit, ToolFilter};
use dsh_tools::{ResultLimit, json_kind};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::MaxDepth;
pub use crate::config_error::ConfigError;
use crate::wording;

/// The configuration of one `subagent` tool instance: one provider, one tool name.
///
/// Every optional field stays absent unless set, and absent fields are never
/// sent to the provider: no `agentOptions` key, no cap, no filter, no persona.
///
/// ```
/// use dsh_tool_subagent::{MaxDepth, SubagentToolConfig};
/// let config = SubagentToolConfig::new("acp")
///     .tool_name("subagent_acp")
///     .max_depth(MaxDepth::ProviderManaged);
/// assert_eq!(config, SubagentToolConfig::from_json(&serde_json::json!({
///     "provider": "acp", "toolName": "subagent_acp", "maxDepth": "provider-managed"
/// })).unwrap());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubagentToolConfig {
    /// The provider the tool delegates to (required).
    pub provider: String,
    /// The model-visible tool name (default `subagent`); unique per registry.
    pub tool_name: String,
    /// Child agent options, forwarded unchanged.
    pub agent_options: Option<AgentOptions>,
    /// A persona for every child (needs the provider's `persona` capability).
    pub persona: Option<String>,
    /// A tool filter for every child (needs the provider's `toolFilter` capability).
    pub tool_filter: Option<ToolFilter>,
    /// The depth cap; absent means no cap is sent.
    pub max_depth: Option<MaxDepth>,
    /// Whether the model may run a delegation in the background (default
    /// `false`): adds `run_in_background` to the schema and a sentence to the
    /// description. Background runs become tasks of the calling agent, so the
    /// plugin needs a task registry ([`SubagentToolPlugin::apply_with_tasks`](crate::SubagentToolPlugin::apply_with_tasks));
    /// plain [`SubagentToolPlugin::apply`](crate::SubagentToolPlugin::apply) refuses it
    /// ([`ConfigError::BackgroundWithoutTasks`]).
    pub enable_run_in_background: bool,
    /// The wall time each child run may take (JSON `timeout`, as `"90s"`,
    /// `"10min"`, `"1h"` or `"500ms"`). A child's deadline is the earlier of
    /// this and its parent's; when it passes the child is cancelled, and the
    /// model reads `subagent run ended abnormally (time limit of 10 min
    /// reached)` with the partial output.
    pub timeout: Option<Duration>,
    /// The input plus output tokens each child may spend over all its model
    /// calls, its own children's included (JSON `tokenLimit`), within what
    /// its parent has left. Past it the child stops as `max-tokens`. Needs
    /// the provider's `tokenLimit` capability.
    pub token_limit: Option<TokenLimit>,
    /// The most of a result the model reads (JSON `resultLimit`, in
    /// tokens of 4 bytes; at least [`ResultLimit::MIN`]). Absent, a
    /// harness fills in its own (8,000 tokens unless it sets another for
    /// all its tools); a tool loaded without a harness reads
    /// [`ResultLimit::DEFAULT`]. A longer result reads as its head and
    /// tail around a notice; with `task_output` mounted the whole result is
    /// kept as a task of the caller, and the notice gives the exact
    /// `task_output` call that reads on.
    pub result_limit: Option<ResultLimit>,
}

const KNOWN_KEYS: [&str; 10] = [
    "provider",
    "toolName",
    "agentOptions",
    "persona",
    "toolFilter",
    "maxDepth",
    "enableRunInBackground",
    "timeout",
    "tokenLimit",
    "resultLimit",
];

impl SubagentToolConfig {
    /// The default tool name.
    pub const DEFAULT_TOOL_NAME: &'static str = "subagent";

    /// The conventional name of an instance bound to the fork provider (the
    /// child inherits the conversation), as `dsh` mounts it.
    pub const FORK_TOOL_NAME: &'static str = "subagent_fork";

    /// The conventional name of an instance bound to an ACP provider (an
    /// out-of-process child), as the README's example mounts it.
    pub const ACP_TOOL_NAME: &'static str = "subagent_acp";

    /// A configuration for `provider` with every default: tool name
    /// `subagent`, no options, no persona, no filter, no cap.
    pub fn new(provider: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            tool_name: Self::DEFAULT_TOOL_NAME.to_owned(),
            agent_options: None,
            persona: None,
            tool_filter: None,
            max_depth: None,
            enable_run_in_background: false,
            timeout: None,
            token_limit: None,
            result_limit: None,
        }
    }

    /// Sets the tool name.
    #[must_use]
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = name.into();
        self
    }

    /// Sets the child agent options.
    #[must_use]
    pub fn agent_options(mut self, options: AgentOptions) -> Self {
        self.agent_options = Some(options);
        self
    }

    /// Sets the persona.
    #[must_use]
    pub fn persona(mut self, persona: impl Into<String>) -> Self {
        self.persona = Some(persona.into());
        self
    }

    /// Sets the tool filter.
    #[must_use]
    pub fn tool_filter(mut self, filter: ToolFilter) -> Self {
        self.tool_filter = Some(filter);
        self
    }

    /// Lets the model run delegations in the background.
    #[must_use]
    pub fn enable_run_in_background(mut self, enable: bool) -> Self {
        self.enable_run_in_background = enable;
        self
    }

    /// Sets the wall time each child run may take.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the tokens each child may spend, its own children's included.
    #[must_use]
    pub fn token_limit(mut self, tokens: TokenLimit) -> Self {
        self.token_limit = Some(tokens);
        self
    }

    /// Sets the most of a result the model reads.
    #[must_use]
    pub fn result_limit(mut self, limit: ResultLimit) -> Self {
        self.result_limit = Some(limit);
        self
    }

    /// The result limit in force: the configured one (a harness always
    /// fills one in), else, for a tool loaded without a harness, the
    /// default.
    pub fn result_limit_or_default(&self) -> ResultLimit {
        self.result_limit.unwrap_or_default()
    }

    /// Sets the depth cap.
    #[must_use]
    pub fn max_depth(mut self, max_depth: MaxDepth) -> Self {
        self.max_depth = Some(max_depth);
        self
    }

    /// Reads a configuration from JSON with the reference's camelCase keys
    /// (`provider`, `toolName`, `agentOptions`, `persona`, `toolFilter`,
    /// `maxDepth`, `enableRunInBackground`), and the limits of this
    /// workspace (`timeout`, `tokenLimit`, `resultLimit`), then
    /// [`validate`](Self::validate)s it.
    /// Unknown keys and wrong types are refused with a message naming the key.
    pub fn from_json(value: &Value) -> Result<Self, ConfigError> {
        let object = value
            .as_object()
            .ok_or_else(|| ConfigError::Invalid(wording::config_not_object(json_kind(value))))?;
        if let Some(unknown) = object.keys().find(|key| !KNOWN_KEYS.contains(&key.as_str())) {
            return Err(ConfigError::Invalid(wording::config_unknown_key(unknown, &KNOWN_KEYS)));
        }
        let provider = string(object, "provider")?
            .ok_or_else(|| ConfigError::Invalid(wording::config_key_required("provider")))?;
        let mut config = Self::new(provider);
        if let Some(name) = string(object, "toolName")? {
            config.tool_name = name;
        }
        config.persona = string(object, "persona")?;
        config.agent_options = agent_options(object)?;
        config.tool_filter = typed(object, "toolFilter")?;
        config.max_depth = object
            .get("maxDepth")
            .map(|value| MaxDepth::deserialize(value).map_err(|_| ConfigError::InvalidMaxDepth))
            .transpose()?;
        if let Some(enable) = object.get("enableRunInBackground") {
            config.enable_run_in_background = enable.as_bool().ok_or_else(|| {
                ConfigError::Invalid(wording::config_key_wrong_type(
                    "enableRunInBackground",
                    dsh_tools::wording::EXPECTED_BOOLEAN,
                    json_kind(enable),
                ))
            })?;
        }
        config.timeout = string(object, "timeout")?
            .map(|text| {
                text.parse::<DurationSetting>()
                    .map(DurationSetting::get)
                    .map_err(|_| ConfigError::Invalid(wording::config_timeout_invalid(&text)))
            })
            .transpose()?;
        config.token_limit = typed(object, "tokenLimit")?;
        config.result_limit = typed(object, "resultLimit")?;
        config.validate()?;
        Ok(config)
    }

    /// The load-time checks of what no type of its own checks: `toolFilter`
    /// names a list, names are not empty, a `timeout` given as a
    /// [`Duration`] is not zero, `maxTokens` is a positive safe integer.
    /// (`maxDepth`, `tokenLimit` and `resultLimit` checked themselves when
    /// they were made, and so did a `timeout` read as text.)
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(filter) = &self.tool_filter
            && filter.allow.is_none()
            && filter.deny.is_none()
        {
            return Err(ConfigError::EmptyToolFilter);
        }
        if self.provider.is_empty() {
            return Err(ConfigError::Invalid(wording::config_key_empty("provider")));
        }
        if self.tool_name.is_empty() {
            return Err(ConfigError::Invalid(wording::config_key_empty("toolName")));
        }
        if self.timeout.is_some_and(|timeout| timeout.is_zero()) {
            return Err(ConfigError::Invalid(wording::config_timeout_invalid("0s")));
        }
        if let Some(max_tokens) = self.agent_options.as_ref().and_then(|options| options.max_tokens)
            && !(1..=MAX_SAFE_INTEGER).contains(&max_tokens)
        {
            return Err(ConfigError::Invalid(wording::config_max_tokens_out_of_range(
                MAX_SAFE_INTEGER,
            )));
        }
        Ok(())
    }
}

fn string(object: &Map<String, Value>, key: &str) -> Result<Option<String>, ConfigError> {
    match object.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(ConfigError::Invalid(wording::config_key_wrong_type(
            key,
            dsh_tools::wording::EXPECTED_STRING,
            json_kind(other),
        ))),
    }
}

/// `agentOptions`, with its `contextWindow` refused under its own key: the
/// window checks itself as it is read, so a bad one never loads.
fn agent_options(object: &Map<String, Value>) -> Result<Option<AgentOptions>, ConfigError> {
    if let Some(window) = object
        .get("agentOptions")
        .and_then(|options| options.get("contextWindow"))
    {
        ContextWindow::deserialize(window).map_err(|error| {
            ConfigError::Invalid(wording::config_key_invalid(
                "agentOptions.contextWindow",
                &error.to_string(),
            ))
        })?;
    }
    typed(object, "agentOptions")
}

fn typed<T: serde::de::DeserializeOwned>(object: &Map<String, Value>, key: &str) -> Result<Option<T>, ConfigError> {
    object
        .get(key)
        .map(|value| {
            T::deserialize(value)
                .map_err(|error| ConfigError::Invalid(wording::config_key_invalid(key, &error.to_string())))
        })
        .transpose()
}
