//! `[[subagents]]`: the delegation tools, each a provider (spawn, fork, or
//! an ACP command of its own) and the tool's configuration. A key the
//! provider cannot honour (a persona for an ACP child, a numeric
//! `max_depth` over a provider that keeps its own budget) is refused where
//! it is written, and so is a tool name used twice or a filter naming a
//! tool dsh does not mount.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use dsh_subagent_acp::{AcpAuth, AcpConfig, AcpProvider, PermissionPolicy};
use dsh_subagent_api::{AgentOptions, Capabilities, SubagentProvider, TokenLimit, ToolFilter};
use dsh_tool_subagent::{MaxDepth, RELEASE_GRACE, SubagentToolConfig};
use toml::Spanned;

use super::file::{ProviderKind, RawAgentOptions, RawAuth, RawPermission, RawSubagent, RawToolFilter};
use super::launch::{LaunchKeys, Place};
use super::model::price;
use super::{At, ConfigFileError, non_empty};
use crate::wording;

/// One delegation tool: its provider and the tool's configuration.
#[derive(Clone, Debug)]
pub(crate) struct Subagent {
    /// Which provider, and for `acp` what it runs.
    pub(crate) provider: Provider,
    /// The tool's configuration (its `provider` is the registered provider's name).
    pub(crate) tool: SubagentToolConfig,
    /// What its children's model's tokens cost (`agent_options.price`),
    /// when given: an in-process child's only, whose loop this dsh runs.
    pub(crate) price: Option<dsh_llm::Price>,
}

/// The provider behind one delegation tool.
#[derive(Clone, Debug)]
pub(crate) enum Provider {
    /// The shared in-process spawn provider.
    Spawn,
    /// The shared in-process fork provider.
    Fork,
    /// An ACP provider of this tool's own.
    Acp(Box<AcpConfig>),
}

/// Every `[[subagents]]` entry, in file order; relative `cwd`s of ACP
/// children are resolved against `base`. A tool name used twice is refused
/// at its second use, and a filter may name only tools dsh mounts.
pub(super) fn resolve_subagents(
    entries: Vec<Spanned<RawSubagent>>,
    base: &Path,
    at: &At<'_>,
) -> Result<Vec<Subagent>, ConfigFileError> {
    let mut subagents: Vec<Located> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let located = resolve_subagent(index, entry, base, at)?;
        let name = &located.subagent.tool.tool_name;
        if let Some(first) = subagents
            .iter()
            .position(|other| &other.subagent.tool.tool_name == name)
        {
            return Err(at(
                Some(located.name_span),
                format!("subagents[{index}].tool_name"),
                wording::config_duplicate_tool_name(name, first),
            ));
        }
        subagents.push(located);
    }
    check_filters(&subagents, at)?;
    Ok(subagents.into_iter().map(|located| located.subagent).collect())
}

/// A resolved entry and where its keys are, for checks across entries.
struct Located {
    subagent: Subagent,
    /// Its `tool_name` (or its table, when the name is the default).
    name_span: Range<usize>,
    filter_span: Option<Range<usize>>,
}

/// A filter may name only tools dsh mounts: a typo would otherwise fail
/// every delegation of that tool.
fn check_filters(subagents: &[Located], at: &At<'_>) -> Result<(), ConfigFileError> {
    let known: Vec<&str> = subagents
        .iter()
        .map(|located| located.subagent.tool.tool_name.as_str())
        .chain(dsh_tool_tasks::TOOL_NAMES.iter().copied())
        .chain(dsh_tool_subagent_control::TOOL_NAMES.iter().copied())
        .collect();
    // MCP tools are known only once their servers run; ToolView checks them then.
    let mounted_later = |name: &str| name.starts_with(dsh_mcp::TOOL_PREFIX);
    for (index, located) in subagents.iter().enumerate() {
        let Some(filter) = &located.subagent.tool.tool_filter else {
            continue;
        };
        let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
        if let Some(unknown) = named
            .into_iter()
            .find(|name| !known.contains(&name.as_str()) && !mounted_later(name))
        {
            return Err(at(
                located.filter_span.clone(),
                format!("subagents[{index}].tool_filter"),
                wording::config_unknown_filter_tool(unknown, &known),
            ));
        }
    }
    Ok(())
}

/// One entry, read key by key into its tool's configuration.
fn resolve_subagent(
    index: usize,
    entry: Spanned<RawSubagent>,
    base: &Path,
    at: &At<'_>,
) -> Result<Located, ConfigFileError> {
    let table = entry.span();
    let mut raw = entry.into_inner();
    let kind = *raw.provider.get_ref();
    let key = |name: &str| format!("subagents[{index}].{name}");
    if kind != ProviderKind::Acp
        && let Some((name, span)) = raw.acp_keys().into_iter().next()
    {
        return Err(at(Some(span), key(name), wording::config_acp_only_key(kind.as_str())));
    }
    let tool_name = raw
        .tool_name
        .take()
        .map(|name| {
            let span = name.span();
            non_empty(name, &key("tool_name"), at).map(|name| (name, span))
        })
        .transpose()?;
    let (tool_name, name_span) =
        tool_name.unwrap_or_else(|| (SubagentToolConfig::DEFAULT_TOOL_NAME.to_owned(), table.clone()));
    let (provider, provider_name, capabilities) = match kind {
        ProviderKind::Spawn => (
            Provider::Spawn,
            "spawn".to_owned(),
            dsh_subagent_spawn::SpawnProvider::new().capabilities(),
        ),
        ProviderKind::Fork => (
            Provider::Fork,
            "fork".to_owned(),
            dsh_subagent_fork::ForkProvider::new().capabilities(),
        ),
        ProviderKind::Acp => {
            let config = AcpEntry { index, at }.config(&raw, &tool_name, base, table.clone())?;
            let capabilities = AcpProvider::new(config.clone())
                .map_err(|error| at(Some(table.clone()), format!("subagents[{index}]"), error.to_string()))?
                .capabilities();
            let name = config.name.clone();
            (Provider::Acp(Box::new(config)), name, capabilities)
        }
    };
    let entry = Entry {
        index,
        kind,
        capabilities,
        at,
    };
    let tool = SubagentToolConfig::new(provider_name).tool_name(tool_name);
    let tool = entry.persona(raw.persona.take(), tool)?;
    let (tool, price) = entry.agent_options(raw.agent_options.take(), tool)?;
    let (tool, filter_span) = entry.tool_filter(raw.tool_filter.take(), tool)?;
    let tool = entry.max_depth(raw.max_depth.take(), tool)?;
    let tool = match raw.enable_run_in_background {
        Some(enable) => tool.enable_run_in_background(enable),
        None => tool,
    };
    let tool = match raw.timeout.take() {
        Some(timeout) => tool.timeout(timeout.into_inner().get()),
        None => tool,
    };
    let tool = entry.token_limit(raw.token_limit.take(), tool)?;
    let tool = match raw.result_limit.take() {
        Some(limit) => tool.result_limit(limit.into_inner()),
        None => tool,
    };
    entry.validate(&tool, filter_span.clone(), name_span.clone())?;
    Ok(Located {
        subagent: Subagent { provider, tool, price },
        name_span,
        filter_span,
    })
}

/// One entry being read: where it is, its provider and what that provider
/// can honour.
struct Entry<'a, 'b> {
    index: usize,
    kind: ProviderKind,
    capabilities: Capabilities,
    at: &'a At<'b>,
}

impl Entry<'_, '_> {
    /// The key path of one of the entry's keys.
    fn key(&self, name: &str) -> String {
        format!("subagents[{}].{name}", self.index)
    }

    /// Refuses a key the provider has no capability for.
    fn require(&self, capable: bool, name: &str, span: Range<usize>) -> Result<(), ConfigFileError> {
        if capable {
            return Ok(());
        }
        Err((self.at)(
            Some(span),
            self.key(name),
            wording::config_unsupported(name, self.kind.as_str()),
        ))
    }

    /// `persona`: only for a provider that takes one.
    fn persona(
        &self,
        persona: Option<Spanned<String>>,
        tool: SubagentToolConfig,
    ) -> Result<SubagentToolConfig, ConfigFileError> {
        let Some(persona) = persona else { return Ok(tool) };
        self.require(self.capabilities.persona, "persona", persona.span())?;
        Ok(tool.persona(non_empty(persona, &self.key("persona"), self.at)?))
    }

    /// `agent_options`: the children's model, context window and price (the
    /// window and the price only for an in-process child, whose loop this
    /// dsh runs).
    fn agent_options(
        &self,
        options: Option<Spanned<RawAgentOptions>>,
        tool: SubagentToolConfig,
    ) -> Result<(SubagentToolConfig, Option<dsh_llm::Price>), ConfigFileError> {
        let Some(options) = options else {
            return Ok((tool, None));
        };
        let options = options.into_inner();
        let mut agent_options = AgentOptions::new();
        if let Some(model) = options.model {
            agent_options = agent_options.with_model(model);
        }
        if let Some(window) = options.context_window {
            let key = self.key("agent_options.context_window");
            if self.kind == ProviderKind::Acp {
                return Err((self.at)(
                    Some(window.span()),
                    key,
                    wording::CONFIG_ACP_CONTEXT_WINDOW.to_owned(),
                ));
            }
            agent_options = agent_options.with_context_window(window.into_inner());
        }
        let price = match options.price {
            Some(value) if self.kind == ProviderKind::Acp => {
                return Err((self.at)(
                    Some(value.span()),
                    self.key("agent_options.price"),
                    wording::CONFIG_ACP_PRICE.to_owned(),
                ));
            }
            Some(value) => Some(price(value, &self.key("agent_options.price"), self.at)?),
            None => None,
        };
        Ok((tool.agent_options(agent_options), price))
    }

    /// `tool_filter`: only for a provider that filters; and where it is.
    fn tool_filter(
        &self,
        filter: Option<Spanned<RawToolFilter>>,
        tool: SubagentToolConfig,
    ) -> Result<(SubagentToolConfig, Option<Range<usize>>), ConfigFileError> {
        let Some(filter) = filter else { return Ok((tool, None)) };
        let span = filter.span();
        self.require(self.capabilities.tool_filter, "tool_filter", span.clone())?;
        let filter = filter.into_inner();
        let mut tool_filter = ToolFilter::default();
        if let Some(allow) = filter.allow {
            tool_filter = tool_filter.with_allow(allow);
        }
        if let Some(deny) = filter.deny {
            tool_filter = tool_filter.with_deny(deny);
        }
        Ok((tool.tool_filter(tool_filter), Some(span)))
    }

    /// `max_depth` (checked as it was read): a number only over a provider
    /// that enforces it.
    fn max_depth(
        &self,
        max_depth: Option<Spanned<MaxDepth>>,
        tool: SubagentToolConfig,
    ) -> Result<SubagentToolConfig, ConfigFileError> {
        let Some(max_depth) = max_depth else { return Ok(tool) };
        if max_depth.get_ref().cap().is_some() && !self.capabilities.depth_limit {
            return Err((self.at)(
                Some(max_depth.span()),
                self.key("max_depth"),
                wording::config_depth_not_enforced(self.kind.as_str()),
            ));
        }
        Ok(tool.max_depth(max_depth.into_inner()))
    }

    /// `token_limit` (checked as it was read): only over a provider that
    /// counts tokens.
    fn token_limit(
        &self,
        limit: Option<Spanned<TokenLimit>>,
        tool: SubagentToolConfig,
    ) -> Result<SubagentToolConfig, ConfigFileError> {
        let Some(limit) = limit else { return Ok(tool) };
        self.require(self.capabilities.token_budget, "token_limit", limit.span())?;
        Ok(tool.token_limit(limit.into_inner()))
    }

    /// The tool's own check, its error at the key it concerns: the span is
    /// `tool_filter`'s, when written; the name's is the fallback.
    fn validate(
        &self,
        tool: &SubagentToolConfig,
        filter_span: Option<Range<usize>>,
        name_span: Range<usize>,
    ) -> Result<(), ConfigFileError> {
        let Err(error) = tool.validate() else { return Ok(()) };
        let (span, name, message) = match error {
            dsh_tool_subagent::ConfigError::EmptyToolFilter => {
                (filter_span, "tool_filter", wording::CONFIG_EMPTY_TOOL_FILTER.to_owned())
            }
            other => (None, "tool_name", other.to_string()),
        };
        Err((self.at)(Some(span.unwrap_or(name_span)), self.key(name), message))
    }
}

/// The keys of a `provider = "acp"` entry being read.
struct AcpEntry<'a, 'b> {
    index: usize,
    at: &'a At<'b>,
}

impl AcpEntry<'_, '_> {
    /// The key path of one of the entry's keys.
    fn key(&self, name: &str) -> String {
        format!("subagents[{}].{name}", self.index)
    }

    /// The ACP provider's configuration: the program it runs (its launch
    /// keys read as an MCP server's are, a relative `cwd` against `base`),
    /// its answers and timings.
    fn config(
        &self,
        raw: &RawSubagent,
        tool_name: &str,
        base: &Path,
        table: Range<usize>,
    ) -> Result<AcpConfig, ConfigFileError> {
        let at = self.at;
        let Some(command) = &raw.command else {
            return Err(at(
                Some(table),
                format!("subagents[{}]", self.index),
                wording::CONFIG_ACP_NEEDS_COMMAND.to_owned(),
            ));
        };
        let mut config = AcpConfig::new(command.get_ref()).name(format!("acp:{tool_name}"));
        let keys = LaunchKeys {
            args: raw.args.as_ref(),
            env: raw.env.as_ref(),
            pass_env: raw.pass_env.as_ref(),
            cwd: raw.cwd.as_ref(),
        };
        let key = |name: &str| self.key(name);
        let place = Place { key: &key, at, base };
        config.program = super::launch::program(command, &keys, config.program.launch.clone(), &place)?;
        if let Some(permission) = &raw.permission {
            config = config.permission(match permission.get_ref() {
                RawPermission::Reject => PermissionPolicy::Reject,
                RawPermission::AllowFirst => PermissionPolicy::AllowFirst,
            });
        }
        if let Some(auth) = &raw.auth {
            config = config.auth(match auth.get_ref() {
                RawAuth::None => AcpAuth::None,
                RawAuth::FirstEnvVar => AcpAuth::FirstEnvVar,
                RawAuth::Method(id) => AcpAuth::Method(id.clone()),
            });
        }
        if let Some(timeout) = &raw.turn_timeout {
            config = config.turn_timeout(timeout.get_ref().get());
        }
        self.graces(raw, config)
    }

    /// The grace periods of a cancel and a release: what a cancelled call
    /// says about its child is true only if the whole teardown fits in the
    /// time the tool waits for it.
    fn graces(&self, raw: &RawSubagent, mut config: AcpConfig) -> Result<AcpConfig, ConfigFileError> {
        let graces = [
            ("cancel_grace", &raw.cancel_grace),
            ("eof_grace", &raw.eof_grace),
            ("term_grace", &raw.term_grace),
        ];
        if let Some(grace) = &raw.cancel_grace {
            config = config.cancel_grace(grace.get_ref().get());
        }
        if let Some(grace) = &raw.eof_grace {
            config = config.eof_grace(grace.get_ref().get());
        }
        if let Some(grace) = &raw.term_grace {
            config = config.term_grace(grace.get_ref().get());
        }
        if config.longest_release() > RELEASE_GRACE
            && let Some((name, grace)) = graces
                .iter()
                .find_map(|(name, grace)| grace.as_ref().map(|grace| (name, grace)))
        {
            let zero = Duration::ZERO;
            let fixed = config
                .clone()
                .cancel_grace(zero)
                .eof_grace(zero)
                .term_grace(zero)
                .longest_release();
            return Err((self.at)(
                Some(grace.span()),
                self.key(name),
                wording::config_graces_too_long(config.longest_release(), fixed, RELEASE_GRACE),
            ));
        }
        Ok(config)
    }
}
