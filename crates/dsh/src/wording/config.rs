//! `dsh.toml` errors: what is wrong with a key, and where.

use std::fmt::Display;
use std::path::Path;

/// A `dsh.toml` value that must not be empty is.
pub(crate) const CONFIG_EMPTY_VALUE: &str = "must not be empty";

/// `[record]` `file` names a directory.
pub(crate) fn config_record_directory(file: &str) -> String {
    format!("{file:?} is a directory: name the cassette file to record into, e.g. \"runs/last.jsonl\"")
}

/// `dsh run` and `dsh config check`, once: delegation tools whose children
/// may delegate again with no depth cap (no `max_depth`, and a filter that
/// leaves them a delegation tool).
pub(crate) fn uncapped_delegation(tools: &[&str]) -> String {
    let (names, verb, whose, entry) = match tools {
        [one] => (format!("tool {one}"), "has", "its", "its [[subagents]] entry"),
        many => (
            format!("tools {}", many.join(", ")),
            "have",
            "their",
            "their [[subagents]] entries",
        ),
    };
    format!(
        "dsh: warning: the delegation {names} {verb} no max_depth, so {whose} children may delegate again with no depth cap (a model that always delegates goes as deep as [limits] max_children allows); set max_depth = 1 in {entry} to let only the top-level agent delegate"
    )
}

/// `dsh config check`: the cassette every run records into.
pub(crate) fn config_check_record(file: &std::path::Path) -> String {
    format!(
        "recording: every run's model traffic into {} ([record]; --record and --replay win)",
        file.display()
    )
}

/// `dsh config check`: what earlier runs kept of the endpoint, the first
/// line (each model's follows).
pub(crate) fn config_check_kept(endpoint: &str, path: &Path) -> String {
    format!(
        "dsh: what {endpoint} taught earlier runs, kept in {} (used by the next run and resume; delete the file to forget it):",
        path.display()
    )
}

/// `dsh config check`: what is kept of one model.
pub(crate) fn config_check_kept_model(model: &str, kept: &dsh_agent::KeptModel) -> String {
    let mut parts = Vec::new();
    if let Some(window) = kept.window {
        parts.push(format!("context window {window} tokens"));
    }
    if let Some(limit) = kept.concurrency {
        parts.push(match limit.requests() {
            1 => "one request at a time".to_owned(),
            requests => format!("at most {requests} requests at once"),
        });
    }
    let counts = kept.whole.len() + kept.added.len();
    if counts > 0 {
        parts.push(format!(
            "{counts} count{} of its tokens against dsh's estimate",
            if counts == 1 { "" } else { "s" }
        ));
    }
    format!("  model {model}: {}", parts.join("; "))
}

/// `dsh config check`: nothing is kept of the endpoint yet.
pub(crate) fn config_check_nothing_kept(endpoint: &str, path: &Path) -> String {
    format!(
        "dsh: nothing learned of {endpoint} is kept yet (it would be in {})",
        path.display()
    )
}

/// `dsh config check`: the kept file is ignored, and why.
pub(crate) fn config_check_kept_ignored(error: &dyn Display) -> String {
    format!("dsh: {error}")
}

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

/// An `[[mcp_servers]]` entry with neither `command` nor `url`.
pub(crate) const CONFIG_MCP_NEEDS_ENDPOINT: &str =
    "an MCP server needs `command` (a program dsh runs on stdio) or `url` (a remote server over Streamable HTTP)";

/// An `[[mcp_servers]]` entry with both `command` and `url`.
pub(crate) const CONFIG_MCP_COMMAND_AND_URL: &str = "give either `command` or `url`, not both";

/// `headers` or `bearer_token_env` on a `command` server.
pub(crate) const CONFIG_MCP_URL_ONLY_KEY: &str = "applies only to an MCP server with a `url`";

/// What `env` takes, when it is given something else.
pub(crate) const CONFIG_EXPECTING_ENV: &str = "a table of variables to set, as env = { NAME = \"value\" } (the names of variables passed through from dsh's environment go in pass_env = [\"NAME\"])";

/// A launch key (`args`, `env`, `pass_env`, `cwd`) on a `url` server.
pub(crate) const CONFIG_MCP_COMMAND_ONLY_KEY: &str =
    "applies only to an MCP server with a `command`: a server at a `url` runs elsewhere";

/// `pass_env` on an MCP server, which inherits the whole environment.
pub(crate) const CONFIG_MCP_PASS_ENV: &str = "an MCP server inherits dsh's whole environment, so there is nothing to pass on: leave `pass_env` out (it is for `provider = \"acp\"` children, whose environment is scrubbed), or set a variable with env = { NAME = \"value\" }";

/// A `command` that looks like a shell line: words apart, and no path.
pub(crate) fn config_command_is_a_line(command: &str) -> String {
    let mut words = command.split_whitespace();
    let program = words.next().unwrap_or_default();
    let args: Vec<String> = words.map(|word| format!("{word:?}")).collect();
    format!(
        "`command` is one program, looked up on PATH, never a shell line: write command = {program:?} and put its arguments in `args`, as args = [{}]",
        args.join(", ")
    )
}

/// A `cwd` that is not a directory.
pub(crate) fn config_cwd_not_a_directory(path: &std::path::Path) -> String {
    format!(
        "{} is not a directory (a relative `cwd` is resolved against the directory of the configuration file)",
        path.display()
    )
}

/// A token written in the file (`bearer_token`, or an `Authorization` header).
pub(crate) const CONFIG_MCP_LITERAL_TOKEN: &str = "a token is never written in the configuration file: put it in an environment variable and name that variable with bearer_token_env";

/// A header whose value is not text.
pub(crate) const CONFIG_MCP_HEADER_NOT_TEXT: &str = "a header's value must be a string";

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

/// A child's `context_window` on an ACP entry: the child's loop is the
/// other process's.
pub(crate) const CONFIG_ACP_CONTEXT_WINDOW: &str = "an ACP child runs its own agent loop in its own process, with its own model: set its context window in that agent's configuration (for dsh, `[model] context_window` in the child's dsh.toml, or DSH_CONTEXT_WINDOW passed through this entry's `env`)";

/// Whose model a cost budget needs the price of: the parent's.
pub(crate) const PRICE_NEEDED_PARENT: &str = "the parent's model (set `[model] price` in dsh.toml)";

/// Whose model a cost budget needs the price of: a resumed parent's, which
/// its transcript names and `[model] price` does not price (that prices
/// today's model).
pub(crate) const PRICE_NEEDED_RESUMED: &str = "the resumed parent's model, from its transcript (run it on a model with a price: `--model`, or `[model] model` and `price` in dsh.toml)";

/// Whose model a cost budget needs the price of: a tool's children's.
pub(crate) fn price_needed_tool(index: usize, tool: &str) -> String {
    format!("the model of the children of `{tool}` (set `subagents[{index}].agent_options.price` in dsh.toml)")
}

/// A cost budget over a tree with a model of no price: what it spends
/// could never be counted, so nothing starts.
pub(crate) fn cost_budget_unpriced(model: &str, whose: &str) -> String {
    format!(
        "dsh: a cost budget needs the price of every model of the tree, and {model:?}, {whose}, has none: what it spends could never be counted"
    )
}

/// One model given two different prices.
pub(crate) fn price_given_twice(model: &str, first: &str, second: &str) -> String {
    format!("dsh: model {model:?} has two different prices, `{first}` and `{second}`: give it one")
}

/// `agent_options.price` on an ACP entry: its child reports no usage to price.
pub(crate) const CONFIG_ACP_PRICE: &str = "an ACP child runs its own agent loop in its own process and reports no usage to this dsh, so there is nothing here to price: give its price in that agent's configuration (for dsh, `[model] price` in the child's dsh.toml)";

/// A variable (`DSH_CONTEXT_WINDOW`) whose value its setting refuses, in
/// that setting's own words.
pub(crate) fn variable_invalid(variable: &str, refusal: &dyn Display) -> String {
    format!("dsh: {variable}: {refusal}")
}

/// A `tool_filter` with neither list.
pub(crate) const CONFIG_EMPTY_TOOL_FILTER: &str = "names neither `allow` nor `deny`; remove the key or fill the filter";

/// ACP teardown graces that do not fit in the tool's release grace.
pub(crate) fn config_graces_too_long(
    budget: std::time::Duration,
    fixed: std::time::Duration,
    grace: std::time::Duration,
) -> String {
    format!(
        "a cancelled child's teardown could take {} ms (these graces plus {} ms after SIGKILL), longer than the {} ms the tool waits for it, so the call could not say whether the child was stopped; keep cancel_grace + eof_grace + term_grace at most {} ms",
        budget.as_millis(),
        fixed.as_millis(),
        grace.as_millis(),
        grace.saturating_sub(fixed).as_millis()
    )
}

/// A configuration file that could not be read.
pub(crate) fn config_unreadable(error: &dyn Display) -> String {
    format!("cannot read the configuration file: {error}")
}

/// Where a configuration error is, then what it is:
/// `<file>:<line>:<column>: <key path>: <message>`.
pub(crate) fn config_error(path: &Path, position: Option<(usize, usize)>, key: &str, message: &str) -> String {
    let mut text = path.display().to_string();
    if let Some((line, column)) = position {
        text.push_str(&format!(":{line}:{column}"));
    }
    if !key.is_empty() {
        text.push_str(&format!(": {key}"));
    }
    text.push_str(&format!(": {message}"));
    text
}

/// What an `auth` value may be.
pub(crate) const CONFIG_EXPECTING_AUTH: &str = r#""none", "first-env-var" or { method = "<id>" }"#;

/// The working directory, where `dsh.toml` is looked for, is unreadable.
pub(crate) fn cwd_unreadable(error: &dyn Display) -> String {
    format!("dsh: cannot read the working directory: {error}")
}

/// `dsh config check` found a mounted tool the catalog does not know (a bug in dsh).
pub(crate) fn tool_not_catalogued(name: &str) -> String {
    format!("the tool {name} belongs to no catalogued crate")
}

/// A `tool_filter` that names a tool dsh does not mount.
pub(crate) fn config_unknown_filter_tool(name: &str, known: &[&str]) -> String {
    format!(
        "names \"{name}\", which is not a tool of this harness (its tools: {})",
        known.join(", ")
    )
}

/// The self-mount check's refusal: this `dsh` was started (as an ACP child or an
/// MCP server) by a `dsh` that loaded the same configuration.
pub(crate) fn started_by_own_config(path: &Path) -> String {
    format!(
        "dsh: {} is the configuration of the dsh that started this one, so this dsh would start itself again, without end. \
         Give the child its own configuration: add `--config <file>` to its command (the `args` of its [[subagents]] \
         or [[mcp_servers]] entry), or run it in a directory with a dsh.toml of its own \
         (the entry's `cwd`). dsh passes the configurations of the dsh processes above this one in DSH_PARENT_CONFIGS.",
        path.display()
    )
}
