//! The file as written: `dsh.toml`'s tables and keys, with the span of every
//! value a later check may need to point at.

use std::collections::BTreeMap;
use std::path::PathBuf;

use dsh_subagent_api::DurationSetting;
use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub(crate) model: Option<RawModel>,
    #[serde(default)]
    pub(crate) subagents: Vec<Spanned<RawSubagent>>,
    #[serde(default)]
    pub(crate) mcp_servers: Vec<Spanned<RawMcpServer>>,
    #[serde(default)]
    pub(crate) limits: Option<super::LimitsConfig>,
    #[serde(default)]
    pub(crate) data: Option<RawData>,
    #[serde(default)]
    pub(crate) record: Option<RawRecord>,
    #[serde(default)]
    pub(crate) run: Option<RunConfig>,
}

/// `[run]`: how `dsh run` ends.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunConfig {
    /// When the parent answers while its background children still run:
    /// wait for them (`true`, the default), or stop them resumably as
    /// `--no-wait` does (`false`).
    #[serde(default = "waits")]
    pub(crate) wait: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self { wait: waits() }
    }
}

/// `[run] wait`'s default: a run waits for its background children.
fn waits() -> bool {
    true
}

/// `[record]`: record every run's model traffic into one cassette.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRecord {
    /// The cassette, relative to the file's directory.
    pub(crate) file: Spanned<String>,
}

/// `[data]`: how long transcripts are kept, and how much of them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawData {
    pub(crate) max_age: Option<super::data::MaxAge>,
    pub(crate) max_size: Option<super::data::MaxSize>,
}

/// `[model]`: the parent's model endpoint.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModel {
    pub(crate) base_url: Option<Spanned<String>>,
    pub(crate) model: Option<Spanned<String>>,
    pub(crate) api_key_env: Option<Spanned<String>>,
    /// The model's context window, checked as it is read.
    pub(crate) context_window: Option<Spanned<dsh_agent::ContextWindow>>,
    /// What the model's tokens cost.
    pub(crate) price: Option<Spanned<RawPrice>>,
    /// The most requests to one model of the endpoint at once, checked as
    /// it is read.
    pub(crate) max_concurrent: Option<Spanned<dsh_llm::Concurrency>>,
}

/// `price = { input = …, output = …, cached_input = … }`: a model's price
/// per million tokens; checked once read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrice {
    pub(crate) input: Spanned<f64>,
    pub(crate) output: Spanned<f64>,
    pub(crate) cached_input: Option<Spanned<f64>>,
}

/// Which provider a `[[subagents]]` entry delegates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProviderKind {
    /// A fresh in-process child.
    Spawn,
    /// An in-process child that inherits the parent's completed turns.
    Fork,
    /// An out-of-process child over the Agent Client Protocol.
    Acp,
}

impl ProviderKind {
    /// The name as written in the file.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Spawn => "spawn",
            Self::Fork => "fork",
            Self::Acp => "acp",
        }
    }
}

/// One `[[subagents]]` entry: one model-facing delegation tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSubagent {
    pub(crate) tool_name: Option<Spanned<String>>,
    pub(crate) provider: Spanned<ProviderKind>,
    pub(crate) persona: Option<Spanned<String>>,
    pub(crate) agent_options: Option<Spanned<RawAgentOptions>>,
    pub(crate) tool_filter: Option<Spanned<RawToolFilter>>,
    /// The depth cap, checked as it is read.
    pub(crate) max_depth: Option<Spanned<dsh_tool_subagent::MaxDepth>>,
    pub(crate) enable_run_in_background: Option<bool>,
    /// The wall time of each child run, as `"90s"`, `"10min"`, `"1h"`.
    pub(crate) timeout: Option<Spanned<DurationSetting>>,
    /// The tokens each child may spend, its own children's included.
    pub(crate) token_limit: Option<Spanned<dsh_subagent_api::TokenLimit>>,
    /// The most of this tool's results the model reads, checked as it is read.
    pub(crate) result_limit: Option<Spanned<dsh_tools::ResultLimit>>,
    // Keys of `provider = "acp"` only; the launch keys read as under
    // `[[mcp_servers]]` (config/launch.rs).
    pub(crate) command: Option<Spanned<String>>,
    pub(crate) args: Option<Spanned<Vec<String>>>,
    pub(crate) env: Option<Spanned<RawEnv>>,
    pub(crate) pass_env: Option<Spanned<Vec<String>>>,
    pub(crate) cwd: Option<Spanned<PathBuf>>,
    pub(crate) permission: Option<Spanned<RawPermission>>,
    pub(crate) auth: Option<Spanned<RawAuth>>,
    /// The longest one turn may take.
    pub(crate) turn_timeout: Option<Spanned<DurationSetting>>,
    /// The wait for a cancelled turn to end.
    pub(crate) cancel_grace: Option<Spanned<DurationSetting>>,
    /// The launch's `eof_grace`.
    pub(crate) eof_grace: Option<Spanned<DurationSetting>>,
    /// The launch's `term_grace`.
    pub(crate) term_grace: Option<Spanned<DurationSetting>>,
}

impl RawSubagent {
    /// The keys only `provider = "acp"` takes that this entry sets, with their spans.
    pub(crate) fn acp_keys(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        [
            ("command", self.command.as_ref().map(Spanned::span)),
            ("args", self.args.as_ref().map(Spanned::span)),
            ("env", self.env.as_ref().map(Spanned::span)),
            ("pass_env", self.pass_env.as_ref().map(Spanned::span)),
            ("cwd", self.cwd.as_ref().map(Spanned::span)),
            ("permission", self.permission.as_ref().map(Spanned::span)),
            ("auth", self.auth.as_ref().map(Spanned::span)),
            ("turn_timeout", self.turn_timeout.as_ref().map(Spanned::span)),
            ("cancel_grace", self.cancel_grace.as_ref().map(Spanned::span)),
            ("eof_grace", self.eof_grace.as_ref().map(Spanned::span)),
            ("term_grace", self.term_grace.as_ref().map(Spanned::span)),
        ]
        .into_iter()
        .filter_map(|(key, span)| span.map(|span| (key, span)))
        .collect()
    }
}

/// `permission`: how an ACP child's permission requests are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RawPermission {
    /// Reject (the default).
    Reject,
    /// Allow with the child's first "allow" option.
    AllowFirst,
}

/// `auth`: which ACP authentication method the child is asked for:
/// `"none"`, `"first-env-var"`, or `{ method = "<id>" }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RawAuth {
    /// Never authenticate (the default).
    None,
    /// The first offered `env_var` method whose variable is set.
    FirstEnvVar,
    /// This method id.
    Method(String),
}

impl<'de> Deserialize<'de> for RawAuth {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawAuth;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(crate::wording::CONFIG_EXPECTING_AUTH)
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<RawAuth, E> {
                match value {
                    "none" => Ok(RawAuth::None),
                    "first-env-var" => Ok(RawAuth::FirstEnvVar),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawAuth, A::Error> {
                let mut method = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "method" {
                        return Err(serde::de::Error::unknown_field(&key, &["method"]));
                    }
                    method = Some(map.next_value::<String>()?);
                }
                method
                    .map(RawAuth::Method)
                    .ok_or_else(|| serde::de::Error::missing_field("method"))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `env = { NAME = "value" }`: the variables set for a launched program,
/// by name. Anything else (a list of names, as `pass_env` takes) is refused
/// saying what `env` takes.
#[derive(Debug, Default)]
pub(crate) struct RawEnv(pub(crate) BTreeMap<String, String>);

impl<'de> Deserialize<'de> for RawEnv {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawEnv;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(crate::wording::CONFIG_EXPECTING_ENV)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawEnv, A::Error> {
                let mut env = BTreeMap::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    env.insert(name, value);
                }
                Ok(RawEnv(env))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// `agent_options`: what every child of the tool runs with.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgentOptions {
    pub(crate) model: Option<String>,
    /// The context window of the children's model, checked as it is read.
    pub(crate) context_window: Option<Spanned<dsh_agent::ContextWindow>>,
    /// What the children's model's tokens cost.
    pub(crate) price: Option<Spanned<RawPrice>>,
}

/// `tool_filter`: which tools the children see.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToolFilter {
    pub(crate) allow: Option<Vec<String>>,
    pub(crate) deny: Option<Vec<String>>,
}

/// One `[[mcp_servers]]` entry: an MCP server whose tools the agents get,
/// run from a `command` (stdio) or reached at a `url` (Streamable HTTP).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub(crate) name: Spanned<String>,
    // The launch keys, read as under `[[subagents]]` (config/launch.rs).
    pub(crate) command: Option<Spanned<String>>,
    pub(crate) args: Option<Spanned<Vec<String>>>,
    pub(crate) env: Option<Spanned<RawEnv>>,
    pub(crate) pass_env: Option<Spanned<Vec<String>>>,
    pub(crate) cwd: Option<Spanned<PathBuf>>,
    pub(crate) url: Option<Spanned<String>>,
    /// Extra HTTP headers (a `url` server only), in file order.
    pub(crate) headers: Option<Spanned<toml::Table>>,
    /// The variable that holds the bearer token (a `url` server only).
    pub(crate) bearer_token_env: Option<Spanned<String>>,
    /// Read only to refuse it: a token is never written in the file.
    pub(crate) bearer_token: Option<Spanned<serde::de::IgnoredAny>>,
}
