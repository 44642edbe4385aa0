//! `dsh.toml`: the parent's model, its delegation tools and its MCP servers.
//!
//! [`load`] finds the file (`--config <path>`, else `dsh.toml` in the working
//! directory, else none: dsh then behaves as without a file) and [`parse`]
//! reads and checks it: unknown keys, wrong types and contradictions (an
//! acp-only key on an in-process provider, a numeric `max_depth` over a
//! provider that keeps its own budget, a persona for a child that cannot take
//! one, a tool name used twice) are refused with the file, line, column and
//! key path. Nothing is started while the file is read. The format is
//! documented in the crate README.

mod data;
mod error;
mod file;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_agent::ContextWindow;
use dsh_mcp::{McpServerSpec, RemoteServer, SpecError};
use dsh_subagent_acp::{AcpAuth, AcpConfig, AcpProvider, PermissionPolicy};
use dsh_subagent_api::{AgentOptions, SubagentProvider, ToolFilter};
use dsh_tool_subagent::{MaxDepth, RELEASE_GRACE, SubagentToolConfig};
use dsh_tools::ResultBudget;
use toml::Spanned;

pub(crate) use error::ConfigFileError;
pub(crate) use file::ProviderKind;
use file::{RawAuth, RawConfig, RawCount, RawLimits, RawMaxDepth, RawMcpServer, RawModel, RawPermission, RawSubagent};

use crate::wording;

/// The file read when no `--config` is given, in the working directory.
pub(crate) const DEFAULT_FILE: &str = "dsh.toml";

/// A checked configuration file.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// Where it was read from.
    pub(crate) path: PathBuf,
    /// `[model]`.
    pub(crate) model: ModelConfig,
    /// `[[subagents]]`, in file order.
    pub(crate) subagents: Vec<Subagent>,
    /// `[[mcp_servers]]`, in file order.
    pub(crate) mcp_servers: Vec<McpServerSpec>,
    /// `[limits]`: what the file sets; flags override it, defaults fill it.
    pub(crate) limits: LimitsConfig,
    /// `[data]`: the bounds on the transcripts kept, over dsh's defaults.
    pub(crate) data: crate::retention::DataPolicy,
    /// The text's fingerprint, for the loop guard ([`crate::loop_guard`]).
    pub(crate) fingerprint: String,
}

/// `[model]`: each key, when set, overrides the matching `DSH_*` variable;
/// command-line flags override the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ModelConfig {
    /// The OpenAI-compatible endpoint.
    pub(crate) base_url: Option<String>,
    /// The model name.
    pub(crate) model: Option<String>,
    /// The variable that holds the API key (instead of `DSH_API_KEY`).
    pub(crate) api_key_env: Option<String>,
    /// The model's context window (over `DSH_CONTEXT_WINDOW`; under
    /// `--context-window`).
    pub(crate) context_window: Option<ContextWindow>,
}

/// `[limits]`: the bounds of every delegation tree (a top-level agent and
/// everything below it), each key when set. [`LimitsConfig::resolve`] lays
/// the command-line flags over it and fills the rest with dsh's defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LimitsConfig {
    /// Children of one tree running at once (at least 1).
    pub(crate) max_concurrent: Option<u64>,
    /// Calls of one tree waiting for a slot.
    pub(crate) max_queued: Option<u64>,
    /// Children one tree may start over its life (at least 1).
    pub(crate) max_children: Option<u64>,
    /// Tokens one tree may spend, its top-level agent's own included.
    pub(crate) token_budget: Option<u64>,
    /// The most of a delegation output the model reads, in tokens (at
    /// least [`ResultBudget::MIN`]), for every tool without its own.
    pub(crate) result_budget: Option<u64>,
}

impl LimitsConfig {
    /// dsh's default `max_concurrent`.
    pub(crate) const DEFAULT_MAX_CONCURRENT: u64 = 8;
    /// dsh's default `max_queued`.
    pub(crate) const DEFAULT_MAX_QUEUED: u64 = 64;
    /// dsh's default `max_children`.
    pub(crate) const DEFAULT_MAX_CHILDREN: u64 = 200;

    /// `flags` over `self` (the file) over dsh's defaults: 8 at once, 64
    /// waiting, 200 children, no token budget.
    /// Counts past what this machine can hold are taken as unbounded in effect.
    pub(crate) fn resolve(&self, flags: &LimitsConfig) -> dsh_subagent::Limits {
        let count = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        let limits = dsh_subagent::Limits::none()
            .max_concurrent(count(
                flags
                    .max_concurrent
                    .or(self.max_concurrent)
                    .unwrap_or(Self::DEFAULT_MAX_CONCURRENT),
            ))
            .max_queued(count(
                flags.max_queued.or(self.max_queued).unwrap_or(Self::DEFAULT_MAX_QUEUED),
            ))
            .max_children(
                flags
                    .max_children
                    .or(self.max_children)
                    .unwrap_or(Self::DEFAULT_MAX_CHILDREN),
            );
        match flags.token_budget.or(self.token_budget) {
            Some(tokens) => limits.token_budget(tokens),
            None => limits,
        }
    }

    /// The result budget: `flags` over `self` (the file) over the default
    /// of 8,000 tokens. Both were checked to be at least
    /// [`ResultBudget::MIN`] when read.
    pub(crate) fn result_budget(&self, flags: &LimitsConfig) -> ResultBudget {
        flags
            .result_budget
            .or(self.result_budget)
            .and_then(|tokens| ResultBudget::new(tokens).ok())
            .unwrap_or_default()
    }
}

/// One delegation tool: its provider and the tool's configuration.
#[derive(Clone, Debug)]
pub(crate) struct Subagent {
    /// Which provider, and for `acp` what it runs.
    pub(crate) provider: Provider,
    /// The tool's configuration (its `provider` is the registered provider's name).
    pub(crate) tool: SubagentToolConfig,
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

/// Finds and reads the configuration: `explicit` (which must exist), else
/// [`DEFAULT_FILE`] in `cwd` if there is one, else `None`.
pub(crate) fn load(explicit: Option<&Path>, cwd: &Path) -> Result<Option<Config>, ConfigFileError> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => {
            let path = cwd.join(DEFAULT_FILE);
            if !path.is_file() {
                return Ok(None);
            }
            PathBuf::from(DEFAULT_FILE)
        }
    };
    let full = if path.is_absolute() {
        path.clone()
    } else {
        cwd.join(&path)
    };
    let text = std::fs::read_to_string(&full).map_err(|error| ConfigFileError::unreadable(&path, &error))?;
    let base = full.parent().map_or_else(|| cwd.to_owned(), Path::to_owned);
    parse(&path, &text, &base).map(Some)
}

/// [`load`] from the process's working directory, as a [`Failure`](crate::Failure).
pub(crate) fn load_from_cwd(explicit: Option<&Path>) -> Result<Option<Config>, crate::Failure> {
    let cwd = std::env::current_dir().map_err(|error| crate::Failure::usage(wording::cwd_unreadable(&error)))?;
    load(explicit, &cwd).map_err(|error| crate::Failure::config(&error))
}

/// [`load_from_cwd`] for a command that mounts what the file configures
/// (`dsh run`, `dsh acp`, `dsh mcp`): a file that a `dsh` which started this
/// one loaded is refused (exit 2), since mounting it would start this `dsh`
/// again ([`crate::loop_guard`]).
pub(crate) fn load_for_mounting(explicit: Option<&Path>) -> Result<Option<Config>, crate::Failure> {
    let config = load_from_cwd(explicit)?;
    crate::loop_guard::check(config.as_ref(), crate::loop_guard::inherited().as_deref())?;
    Ok(config)
}

/// Parses and checks a configuration. `path` names the file in errors;
/// relative `cwd`s of ACP children are resolved against `base`.
pub(crate) fn parse(path: &Path, text: &str, base: &Path) -> Result<Config, ConfigFileError> {
    let at =
        |span: Option<Range<usize>>, key: String, message: String| ConfigFileError::at(path, text, span, key, message);
    let deserializer =
        toml::Deserializer::parse(text).map_err(|error| at(error.span(), String::new(), error.message().to_owned()))?;
    let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let key = key_path(error.path());
        let error = error.into_inner();
        at(error.span(), key, error.message().to_owned())
    })?;
    let model = raw
        .model
        .map(|model| resolve_model(model, &at))
        .transpose()?
        .unwrap_or_default();
    let mut subagents: Vec<Located> = Vec::with_capacity(raw.subagents.len());
    for (index, entry) in raw.subagents.into_iter().enumerate() {
        let located = resolve_subagent(index, entry, base, &at)?;
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
    // A filter may name only tools dsh mounts: a typo would otherwise fail
    // every delegation of that tool.
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
    let mut mcp_servers: Vec<(McpServerSpec, Range<usize>)> = Vec::with_capacity(raw.mcp_servers.len());
    for (index, entry) in raw.mcp_servers.into_iter().enumerate() {
        let span = entry.span();
        let server = resolve_mcp_server(index, entry.into_inner(), span, &at)?;
        if let Some(first) = mcp_servers.iter().position(|other| other.0.name == server.0.name) {
            return Err(at(
                Some(server.1),
                format!("mcp_servers[{index}].name"),
                wording::config_duplicate_mcp_server(&server.0.name, first),
            ));
        }
        mcp_servers.push(server);
    }
    let limits = raw
        .limits
        .map(|limits| resolve_limits(limits, &at))
        .transpose()?
        .unwrap_or_default();
    let data = raw
        .data
        .map(|data| data::resolve_data(data, &at))
        .transpose()?
        .unwrap_or_default();
    Ok(Config {
        path: path.to_owned(),
        model,
        subagents: subagents.into_iter().map(|located| located.subagent).collect(),
        mcp_servers: mcp_servers.into_iter().map(|server| server.0).collect(),
        limits,
        data,
        fingerprint: crate::loop_guard::fingerprint(text),
    })
}

/// A key path as the file's author wrote it (`subagents[1].max_depth`),
/// without the wrappers that carry spans.
fn key_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: name } if name.starts_with("$__serde_spanned") => {}
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Unknown => {}
        }
    }
    key
}

type At<'a> = dyn Fn(Option<Range<usize>>, String, String) -> ConfigFileError + 'a;

fn non_empty(value: Spanned<String>, key: &str, at: &At<'_>) -> Result<String, ConfigFileError> {
    let span = value.span();
    let value = value.into_inner();
    if value.trim().is_empty() {
        return Err(at(Some(span), key.to_owned(), wording::CONFIG_EMPTY_VALUE.to_owned()));
    }
    Ok(value)
}

/// Whether `name` can name an environment variable.
fn variable_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

fn resolve_model(raw: RawModel, at: &At<'_>) -> Result<ModelConfig, ConfigFileError> {
    let api_key_env = match raw.api_key_env {
        Some(name) if !variable_name(name.get_ref()) => {
            return Err(at(
                Some(name.span()),
                "model.api_key_env".into(),
                wording::config_bad_variable(name.get_ref()),
            ));
        }
        name => name.map(Spanned::into_inner),
    };
    Ok(ModelConfig {
        base_url: raw
            .base_url
            .map(|url| non_empty(url, "model.base_url", at))
            .transpose()?,
        model: raw.model.map(|model| non_empty(model, "model.model", at)).transpose()?,
        api_key_env,
        context_window: raw
            .context_window
            .map(|window| context_window(window, "model.context_window", at))
            .transpose()?,
    })
}

/// A `context_window`: at least [`ContextWindow::MIN`] tokens.
fn context_window(value: Spanned<RawCount>, key: &str, at: &At<'_>) -> Result<ContextWindow, ConfigFileError> {
    ContextWindow::new(value.get_ref().0).map_err(|error| at(Some(value.span()), key.to_owned(), error.to_string()))
}

/// `[limits]`: `max_concurrent`, `max_children` and `token_budget` must be
/// at least 1 (a tree that may run or start nothing would only refuse);
/// `max_queued = 0` refuses every call past `max_concurrent` at once.
fn resolve_limits(raw: RawLimits, at: &At<'_>) -> Result<LimitsConfig, ConfigFileError> {
    let positive = |value: Option<Spanned<RawCount>>, name: &str| match value {
        Some(value) if value.get_ref().0 == 0 => Err(at(
            Some(value.span()),
            format!("limits.{name}"),
            wording::config_limit_zero(name),
        )),
        value => Ok(value.map(|value| value.into_inner().0)),
    };
    let result_budget = raw
        .result_budget
        .map(|value| result_budget(value, "limits.result_budget".to_owned(), at))
        .transpose()?;
    Ok(LimitsConfig {
        max_concurrent: positive(raw.max_concurrent, "max_concurrent")?,
        max_queued: raw.max_queued.map(|value| value.into_inner().0),
        max_children: positive(raw.max_children, "max_children")?,
        token_budget: positive(raw.token_budget, "token_budget")?,
        result_budget: result_budget.map(ResultBudget::tokens),
    })
}

/// A result budget as written: a count of tokens, at least
/// [`ResultBudget::MIN`]; `key` names it in the error.
fn result_budget(value: Spanned<RawCount>, key: String, at: &At<'_>) -> Result<ResultBudget, ConfigFileError> {
    let tokens = value.get_ref().0;
    ResultBudget::new(tokens).map_err(|_| {
        at(
            Some(value.span()),
            key,
            wording::config_result_budget_too_small(ResultBudget::MIN.tokens(), tokens),
        )
    })
}

/// A resolved entry and where its keys are, for checks across entries.
struct Located {
    subagent: Subagent,
    /// Its `tool_name` (or its table, when the name is the default).
    name_span: Range<usize>,
    filter_span: Option<Range<usize>>,
}

fn resolve_subagent(
    index: usize,
    entry: Spanned<RawSubagent>,
    base: &Path,
    at: &At<'_>,
) -> Result<Located, ConfigFileError> {
    let table = entry.span();
    let mut raw = entry.into_inner();
    let key = |name: &str| format!("subagents[{index}].{name}");
    let kind = *raw.provider.get_ref();
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
            let config = acp_config(index, &raw, &tool_name, base, table.clone(), at)?;
            let capabilities = AcpProvider::new(config.clone())
                .map_err(|error| at(Some(table.clone()), format!("subagents[{index}]"), error.to_string()))?
                .capabilities();
            let name = config.name.clone();
            (Provider::Acp(Box::new(config)), name, capabilities)
        }
    };
    let mut tool = SubagentToolConfig::new(provider_name).tool_name(tool_name);
    if let Some(persona) = raw.persona.take() {
        let span = persona.span();
        require(capabilities.persona, "persona", kind, span.clone(), &key("persona"), at)?;
        tool = tool.persona(non_empty(persona, &key("persona"), at)?);
    }
    if let Some(options) = raw.agent_options.take() {
        let options = options.into_inner();
        let mut agent_options = AgentOptions::new();
        if let Some(model) = options.model {
            agent_options = agent_options.with_model(model);
        }
        if let Some(window) = options.context_window {
            let key = key("agent_options.context_window");
            if kind == ProviderKind::Acp {
                return Err(at(
                    Some(window.span()),
                    key,
                    wording::CONFIG_ACP_CONTEXT_WINDOW.to_owned(),
                ));
            }
            agent_options = agent_options.with_context_window(context_window(window, &key, at)?.tokens());
        }
        tool = tool.agent_options(agent_options);
    }
    let mut filter_span = None;
    if let Some(filter) = raw.tool_filter.take() {
        let span = filter.span();
        require(
            capabilities.tool_filter,
            "tool_filter",
            kind,
            span.clone(),
            &key("tool_filter"),
            at,
        )?;
        let filter = filter.into_inner();
        let mut tool_filter = ToolFilter::default();
        if let Some(allow) = filter.allow {
            tool_filter = tool_filter.with_allow(allow);
        }
        if let Some(deny) = filter.deny {
            tool_filter = tool_filter.with_deny(deny);
        }
        tool = tool.tool_filter(tool_filter);
        filter_span = Some(span);
    }
    let mut depth_span = None;
    if let Some(max_depth) = raw.max_depth {
        let span = max_depth.span();
        match max_depth.into_inner() {
            RawMaxDepth::Limit(limit) => {
                if !capabilities.depth_limit {
                    return Err(at(
                        Some(span),
                        key("max_depth"),
                        wording::config_depth_not_enforced(kind.as_str()),
                    ));
                }
                tool = tool.max_depth(MaxDepth::Limit(limit));
            }
            RawMaxDepth::ProviderManaged => tool = tool.max_depth(MaxDepth::ProviderManaged),
        }
        depth_span = Some(span);
    }
    if let Some(enable) = raw.enable_run_in_background {
        tool = tool.enable_run_in_background(enable);
    }
    if let Some(timeout) = raw.timeout.take() {
        let span = timeout.span();
        let text = &timeout.get_ref().0;
        let duration = dsh_tool_subagent::parse_duration(text)
            .ok_or_else(|| at(Some(span), key("timeout"), wording::config_bad_duration(text)))?;
        tool = tool.timeout(duration);
    }
    if let Some(budget) = raw.token_budget.take() {
        let span = budget.span();
        require(
            capabilities.token_budget,
            "token_budget",
            kind,
            span.clone(),
            &key("token_budget"),
            at,
        )?;
        let tokens = budget.get_ref().0;
        if tokens == 0 {
            return Err(at(
                Some(span),
                key("token_budget"),
                wording::config_limit_zero("token_budget"),
            ));
        }
        if tokens > dsh_subagent_api::MAX_SAFE_INTEGER {
            return Err(at(
                Some(span),
                key("token_budget"),
                wording::CONFIG_PAST_SAFE_INTEGER.to_owned(),
            ));
        }
        tool = tool.token_budget(tokens);
    }
    if let Some(budget) = raw.result_budget.take() {
        tool = tool.result_budget(result_budget(budget, key("result_budget"), at)?);
    }
    if let Err(error) = tool.validate() {
        let (span, name, message) = match error {
            dsh_tool_subagent::ConfigError::InvalidMaxDepth => {
                (depth_span, "max_depth", wording::CONFIG_PAST_SAFE_INTEGER.to_owned())
            }
            dsh_tool_subagent::ConfigError::EmptyToolFilter => {
                (filter_span, "tool_filter", wording::CONFIG_EMPTY_TOOL_FILTER.to_owned())
            }
            other => (None, "tool_name", other.to_string()),
        };
        return Err(at(Some(span.unwrap_or(name_span)), key(name), message));
    }
    Ok(Located {
        subagent: Subagent { provider, tool },
        name_span,
        filter_span,
    })
}

/// Refuses a key the provider has no capability for.
fn require(
    capable: bool,
    name: &str,
    kind: ProviderKind,
    span: Range<usize>,
    key: &str,
    at: &At<'_>,
) -> Result<(), ConfigFileError> {
    if capable {
        return Ok(());
    }
    Err(at(
        Some(span),
        key.to_owned(),
        wording::config_unsupported(name, kind.as_str()),
    ))
}

fn acp_config(
    index: usize,
    raw: &RawSubagent,
    tool_name: &str,
    base: &Path,
    table: Range<usize>,
    at: &At<'_>,
) -> Result<AcpConfig, ConfigFileError> {
    let key = |name: &str| format!("subagents[{index}].{name}");
    let Some(command) = &raw.command else {
        return Err(at(
            Some(table),
            format!("subagents[{index}]"),
            wording::CONFIG_ACP_NEEDS_COMMAND.to_owned(),
        ));
    };
    let command = non_empty(command.clone(), &key("command"), at)?;
    let mut config = AcpConfig::new(command).name(format!("acp:{tool_name}"));
    if let Some(args) = &raw.args {
        config = config.args(args.get_ref().iter().cloned());
    }
    if let Some(env) = &raw.env {
        if let Some(bad) = env.get_ref().iter().find(|name| !variable_name(name)) {
            return Err(at(Some(env.span()), key("env"), wording::config_bad_variable(bad)));
        }
        for name in env.get_ref() {
            config = config.inherit_env(name.clone());
        }
    }
    if let Some(cwd) = &raw.cwd {
        config = config.cwd(base.join(cwd.get_ref()));
    }
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
    if let Some(timeout) = &raw.turn_timeout_ms {
        if *timeout.get_ref() == 0 {
            return Err(at(
                Some(timeout.span()),
                key("turn_timeout_ms"),
                wording::CONFIG_ZERO_TIMEOUT.to_owned(),
            ));
        }
        config = config.turn_timeout(Duration::from_millis(*timeout.get_ref()));
    }
    let graces = [
        ("cancel_grace_ms", &raw.cancel_grace_ms),
        ("dispose_eof_grace_ms", &raw.dispose_eof_grace_ms),
        ("dispose_term_grace_ms", &raw.dispose_term_grace_ms),
    ];
    if let Some(grace) = &raw.cancel_grace_ms {
        config = config.cancel_grace(Duration::from_millis(*grace.get_ref()));
    }
    if let Some(grace) = &raw.dispose_eof_grace_ms {
        config = config.dispose_eof_grace(Duration::from_millis(*grace.get_ref()));
    }
    if let Some(grace) = &raw.dispose_term_grace_ms {
        config = config.dispose_term_grace(Duration::from_millis(*grace.get_ref()));
    }
    // What a cancelled call says about its child is true only if the whole
    // teardown fits in the time the tool waits for it.
    if config.release_budget() > RELEASE_GRACE
        && let Some((name, grace)) = graces
            .iter()
            .find_map(|(name, grace)| grace.as_ref().map(|grace| (name, grace)))
    {
        let zero = Duration::ZERO;
        let fixed = config
            .clone()
            .cancel_grace(zero)
            .dispose_eof_grace(zero)
            .dispose_term_grace(zero)
            .release_budget();
        return Err(at(
            Some(grace.span()),
            key(name),
            wording::config_graces_too_long(config.release_budget(), fixed, RELEASE_GRACE),
        ));
    }
    Ok(config)
}

/// An `[[mcp_servers]]` entry as the MCP client takes it: a `command` (one
/// command line, split into words like a shell's) or a `url` with its
/// headers and the variable of its bearer token.
fn resolve_mcp_server(
    index: usize,
    raw: RawMcpServer,
    table: Range<usize>,
    at: &At<'_>,
) -> Result<(McpServerSpec, Range<usize>), ConfigFileError> {
    let key = |name: &str| format!("mcp_servers[{index}].{name}");
    let name_span = raw.name.span();
    let name = raw.name.into_inner();
    if let Some(token) = &raw.bearer_token {
        return Err(at(
            Some(token.span()),
            key("bearer_token"),
            wording::CONFIG_MCP_LITERAL_TOKEN.to_owned(),
        ));
    }
    let bad_name = |error: SpecError| at(Some(name_span.clone()), key("name"), error.to_string());
    let spec = match (raw.command, raw.url) {
        (Some(_), Some(url)) => {
            return Err(at(
                Some(url.span()),
                key("url"),
                wording::CONFIG_MCP_COMMAND_AND_URL.to_owned(),
            ));
        }
        (None, None) => {
            return Err(at(
                Some(table),
                key("command"),
                wording::CONFIG_MCP_NEEDS_ENDPOINT.to_owned(),
            ));
        }
        (Some(command), None) => {
            let remote_only = [
                ("headers", raw.headers.as_ref().map(Spanned::span)),
                ("bearer_token_env", raw.bearer_token_env.as_ref().map(Spanned::span)),
            ];
            if let Some((name, Some(span))) = remote_only.into_iter().find(|(_, span)| span.is_some()) {
                return Err(at(Some(span), key(name), wording::CONFIG_MCP_URL_ONLY_KEY.to_owned()));
            }
            let command_span = command.span();
            let command = non_empty(command, &key("command"), at)?;
            match McpServerSpec::from_command_line(name, &command) {
                Ok(spec) => spec,
                Err(error @ SpecError::BadName { .. }) => return Err(bad_name(error)),
                Err(error) => return Err(at(Some(command_span), key("command"), error.to_string())),
            }
        }
        (None, Some(url)) => {
            let url_span = url.span();
            let url = non_empty(url, &key("url"), at)?;
            let mut server =
                RemoteServer::new(url).map_err(|error| at(Some(url_span), key("url"), error.to_string()))?;
            if let Some(headers) = raw.headers {
                let span = headers.span();
                for (header, value) in headers.into_inner() {
                    let header_key = key(&format!("headers.{header}"));
                    if header.eq_ignore_ascii_case("authorization") {
                        return Err(at(Some(span), header_key, wording::CONFIG_MCP_LITERAL_TOKEN.to_owned()));
                    }
                    let Some(value) = value.as_str() else {
                        return Err(at(
                            Some(span),
                            header_key,
                            wording::CONFIG_MCP_HEADER_NOT_TEXT.to_owned(),
                        ));
                    };
                    server = server
                        .header(header.clone(), value)
                        .map_err(|error| at(Some(span.clone()), header_key, error.to_string()))?;
                }
            }
            if let Some(variable) = raw.bearer_token_env {
                if !variable_name(variable.get_ref()) {
                    return Err(at(
                        Some(variable.span()),
                        key("bearer_token_env"),
                        wording::config_bad_variable(variable.get_ref()),
                    ));
                }
                server = server
                    .bearer_token_env(variable.get_ref().clone())
                    .map_err(|error| at(Some(variable.span()), key("bearer_token_env"), error.to_string()))?;
            }
            McpServerSpec::remote(name, server).map_err(bad_name)?
        }
    };
    Ok((spec, name_span))
}

#[cfg(test)]
mod tests;
