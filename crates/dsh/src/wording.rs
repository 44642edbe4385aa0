//! Every text `dsh` shows a model or a person, in one place.

/// The `subagent` tool over the spawn provider (a fresh child).
pub(crate) const SPAWN_TOOL: &str = dsh_tool_subagent::SubagentToolConfig::DEFAULT_TOOL_NAME;

/// The `subagent` tool over the fork provider (a child that inherits the conversation).
pub(crate) const FORK_TOOL: &str = "subagent_fork";

/// The parent agent's system prompt.
pub(crate) const PARENT_SYSTEM_PROMPT: &str = "You are dsh, a capable assistant. For self-contained work that would fill this conversation with intermediate steps, delegate with the `subagent` tool (a fresh child that sees nothing of this conversation) or `subagent_fork` (a child that inherits this conversation's completed turns), then answer the user with what you learned.";

/// The first stderr line with the embedded scripted model.
pub(crate) const BANNER_BUILTIN: &str = "dsh: using the embedded scripted model (offline, deterministic). For a real model set DSH_API_KEY (DeepSeek by default), or DSH_BASE_URL for any OpenAI-compatible endpoint, and optionally DSH_MODEL.";

/// The first stderr line with a scripted model file.
pub(crate) fn banner_script(path: &std::path::Path) -> String {
    format!("dsh: using the scripted model from {} (offline)", path.display())
}

/// The first stderr line with an endpoint.
pub(crate) fn banner_endpoint(model: &str, url: &str) -> String {
    format!("dsh: using model {model} at {url}")
}

/// A `dsh.toml` value that must not be empty is.
pub(crate) const CONFIG_EMPTY_VALUE: &str = "must not be empty";

/// A `provider = "acp"` entry without a command.
pub(crate) const CONFIG_ACP_NEEDS_COMMAND: &str = "provider = \"acp\" needs `command`: the ACP agent to run for each delegation (e.g. command = \"dsh\", args = [\"acp\", \"--quiet\"])";

/// Two `[[subagents]]` entries register the same tool name.
pub(crate) fn config_duplicate_tool_name(name: &str, first: usize) -> String {
    format!("the tool name \"{name}\" is already used by subagents[{first}]; give each entry its own `tool_name`")
}

/// Two `[[mcp_servers]]` entries share a name.
pub(crate) fn config_duplicate_mcp_server(name: &str, first: usize) -> String {
    format!("the MCP server name \"{name}\" is already used by mcp_servers[{first}]")
}

/// A name that cannot be an environment variable.
pub(crate) fn config_bad_variable(name: &str) -> String {
    format!("{name:?} cannot name an environment variable")
}

/// A key of `provider = "acp"` on another provider.
pub(crate) fn config_acp_only_key(provider: &str) -> String {
    format!("applies only to provider = \"acp\", and this entry's provider is \"{provider}\"")
}

/// A numeric `max_depth` over a provider that keeps its own recursion budget.
pub(crate) fn config_depth_not_enforced(provider: &str) -> String {
    format!(
        "the {provider} provider keeps its own recursion budget and cannot enforce a numeric max_depth; write max_depth = \"provider-managed\" or leave it out"
    )
}

/// A per-child setting the provider cannot apply.
pub(crate) fn config_unsupported(key: &str, provider: &str) -> String {
    format!("the {provider} provider cannot apply `{key}` to its children; remove it from this entry")
}

/// A `tool_filter` with neither list.
pub(crate) const CONFIG_EMPTY_TOOL_FILTER: &str = "names neither `allow` nor `deny`; remove the key or fill the filter";

/// A `max_depth` beyond what the tool accepts.
pub(crate) const CONFIG_MAX_DEPTH_TOO_LARGE: &str = "must be at most 9007199254740991";

/// `--resume` (or `session/load`) without transcripts to read.
pub(crate) const RESUME_NEEDS_DATA_DIR: &str =
    "dsh: resuming needs the data directory the parent's transcript is in (--data-dir)";

/// `--resume` with an id that names no parent.
pub(crate) fn unknown_parent(id: &str, dir: &std::path::Path, parents: &[String]) -> String {
    let known = if parents.is_empty() {
        "none".to_owned()
    } else {
        parents.join(", ")
    };
    format!(
        "dsh: no parent agent {id:?} to resume in {} (parents that can be resumed: {known})",
        dir.display()
    )
}

/// What a resume repaired, on stderr.
pub(crate) fn resume_repaired(id: &str, repair: &str) -> String {
    format!("dsh: resuming {id}: {repair}")
}

/// A configured fork tool that `dsh mcp` does not serve, on stderr.
pub(crate) fn fork_not_served(tool: &str) -> String {
    format!(
        "dsh mcp: not serving {tool}: a fork child inherits the calling agent's conversation, which lives in the MCP host"
    )
}

/// `dsh config check` with MCP servers, whose tools it does not start.
pub(crate) fn config_check_mcp_servers(count: usize) -> String {
    format!(
        "dsh: (plus the mcp__<server>__<tool> tools of {count} MCP server{}, which checking does not start)",
        if count == 1 { "" } else { "s" }
    )
}

/// `dsh config check`'s verdict, on stderr before the catalog.
pub(crate) fn config_checked(path: Option<&std::path::Path>) -> String {
    match path {
        Some(path) => format!("dsh: {} is valid; the parent's model sees these tools:", path.display()),
        None => {
            "dsh: no configuration file (dsh.toml); with the defaults the parent's model sees these tools:".to_owned()
        }
    }
}

/// `dsh run` progress, one line per child start when stderr is not a
/// terminal: its label, its id and the provider that runs it.
pub(crate) fn child_started(indent: &str, label: &str, id: &str, provider: &str) -> String {
    format!("{indent}↳ subagent \"{label}\" started ({id}, {provider})")
}

/// `dsh run` progress, one line per child end when stderr is not a
/// terminal: its label, [`child_summary`] and its time.
pub(crate) fn child_ended(label: &str, summary: &str, seconds: f64) -> String {
    format!("↳ subagent \"{label}\" {summary} · {seconds:.1}s")
}

/// How a child ended: its stop reason, then its model calls when the agent
/// loop reported them (an in-process child); an ACP child's are not known.
pub(crate) fn child_summary(stop: &str, calls: Option<crate::observe::Calls>) -> String {
    match calls {
        Some(calls) => format!("{stop} · {}", model_calls(calls.steps, calls.usage)),
        None => stop.to_owned(),
    }
}

/// A child under an ACP delegation call has started, on this provider.
pub(crate) fn acp_child_started(label: &str, provider: &str) -> String {
    format!("{label}: started ({provider})")
}

/// A child under an ACP delegation call finished a model call.
pub(crate) fn acp_child_step(label: &str, steps: u32, usage: Option<dsh_llm::Usage>) -> String {
    format!("{label}: working · {}", model_calls(steps, usage))
}

/// A child under an ACP delegation call is calling a tool.
pub(crate) fn acp_child_tool(label: &str, tool: &str) -> String {
    format!("{label}: calling {tool}")
}

/// A child under an ACP delegation call ended ([`child_summary`]).
pub(crate) fn acp_child_finished(label: &str, summary: &str) -> String {
    format!("{label}: {summary}")
}

/// An agent's model calls in its current run, and their tokens.
pub(crate) fn model_calls(steps: u32, usage: Option<dsh_llm::Usage>) -> String {
    format!(
        "{steps} model call{} · {}",
        if steps == 1 { "" } else { "s" },
        tokens(usage)
    )
}

/// A `tool_filter` that names a tool dsh does not mount.
pub(crate) fn config_unknown_filter_tool(name: &str, known: &[&str]) -> String {
    format!(
        "names \"{name}\", which is not a tool of this harness (its tools: {})",
        known.join(", ")
    )
}

/// The one warning line when OTLP export could not be set up.
pub(crate) fn otlp_setup_failed(error: &str) -> String {
    format!("dsh: warning: OTLP trace export is off: {error}")
}

/// The one warning line when spans could not be exported (collector down or slow).
pub(crate) fn otlp_export_failed(error: &str) -> String {
    format!("dsh: warning: some spans were not exported over OTLP: {error}")
}

/// Tokens as a person reads them: `N tokens`, or `usage not reported` when
/// the server reported none (never "0 tokens").
pub(crate) fn tokens(usage: Option<dsh_llm::Usage>) -> String {
    match usage {
        Some(usage) => format!("{} tokens", usage.total_tokens),
        None => "usage not reported".to_owned(),
    }
}

/// The parent's usage line at the end of `dsh run`: its own model calls and
/// its children's, separately and in total.
pub(crate) fn usage_line(usage: &dsh_agent::UsageTotals) -> String {
    format!(
        "dsh: own model calls: {} · children: {} · total: {}",
        tokens(usage.own),
        tokens(usage.children),
        tokens(usage.total())
    )
}

/// Why `dsh mcp` kills the background tasks still running when its client leaves.
pub(crate) const MCP_SESSION_CLOSED: &str = "the MCP session closed";

/// The stderr line of `dsh mcp` for a call its client cancelled (the client
/// never receives this result).
pub(crate) fn mcp_call_cancelled(tool: &str, result: &str) -> String {
    format!("dsh mcp: the client cancelled a call to {tool}; it ended with: {result}")
}

/// A zero timeout in `dsh.toml`.
pub(crate) const CONFIG_ZERO_TIMEOUT: &str = "must be greater than zero (leave it out for no timeout)";

/// ACP teardown graces that do not fit in the tool's release grace.
pub(crate) fn config_graces_too_long(
    budget: std::time::Duration,
    fixed: std::time::Duration,
    grace: std::time::Duration,
) -> String {
    format!(
        "a cancelled child's teardown could take {} ms (these graces plus {} ms after SIGKILL), longer than the {} ms the tool waits for it, so the call could not say whether the child was stopped; keep cancel_grace_ms + dispose_eof_grace_ms + dispose_term_grace_ms at most {} ms",
        budget.as_millis(),
        fixed.as_millis(),
        grace.as_millis(),
        grace.saturating_sub(fixed).as_millis()
    )
}
