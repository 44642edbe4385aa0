//! Every text `dsh` shows a model or a person, in one place: this module
//! holds the tool names, the parent's prompt, the banners, the progress,
//! usage and telemetry lines and the `dsh config check` verdict; its
//! submodules hold the rest by topic (config errors, the data directory,
//! failures, `dsh run`, resuming, `dsh acp`, `dsh mcp`, transcripts).
//!
//! The rule: every error, warning, progress or summary line, rendered
//! transcript and log message is written here, and the code only calls these
//! items. Two kinds of text stay beside the code: the `--help` texts, which
//! clap reads from the doc comments and attributes in `cli.rs`, and names a
//! program matches rather than sentences a person reads (config keys and key
//! paths, provider names, environment variables, the agent's protocol
//! identity).

mod acp;
mod check;
mod config;
mod data;
mod failure;
mod mcp_server;
mod resume;
mod run;
mod transcript;

pub(crate) use acp::*;
pub(crate) use check::*;
pub(crate) use config::*;
pub(crate) use data::*;
pub(crate) use failure::*;
pub(crate) use mcp_server::*;
pub(crate) use resume::*;
pub(crate) use run::*;
pub(crate) use transcript::*;

/// The `subagent` tool over the spawn provider (a fresh child).
pub(crate) const SPAWN_TOOL: &str = dsh_tool_subagent::SubagentToolConfig::DEFAULT_TOOL_NAME;

/// The `subagent` tool over the fork provider (a child that inherits the conversation).
pub(crate) const FORK_TOOL: &str = dsh_tool_subagent::SubagentToolConfig::FORK_TOOL_NAME;

/// The parent agent's system prompt.
pub(crate) const PARENT_SYSTEM_PROMPT: &str = "You are dsh, a capable assistant. For self-contained work that would fill this conversation with intermediate steps, delegate with the `subagent` tool (a fresh child that sees nothing of this conversation) or `subagent_fork` (a child that inherits this conversation's completed turns), then answer the user with what you learned.";

/// The first stderr line with the embedded scripted model.
pub(crate) const BANNER_BUILTIN: &str = "dsh: using the embedded scripted model (offline, deterministic). For a real model set DSH_API_KEY (DeepSeek by default), or DSH_BASE_URL for any OpenAI-compatible endpoint, and optionally DSH_MODEL.";

/// The first stderr line with a scripted model file.
pub(crate) fn banner_script(path: &std::path::Path) -> String {
    format!("dsh: using the scripted model from {} (offline)", path.display())
}

/// The first stderr line when replaying a cassette.
pub(crate) fn banner_replay(path: &std::path::Path, exchanges: usize, level: &str) -> String {
    format!(
        "dsh: replaying {} ({exchanges} recorded exchanges at the {level} level; no network)",
        path.display()
    )
}

/// The last stderr line of a recording run.
pub(crate) fn recorded(path: &std::path::Path, exchanges: u64) -> String {
    format!("dsh: recorded {exchanges} model exchanges into {}", path.display())
}

/// A parent's cassette variable that is none of its forms.
pub(crate) fn cassette_env_invalid(name: &str, value: &str) -> String {
    format!("{name} is {value:?}: it must be record:FILE, replay:FILE or replay-timing:FILE")
}

/// The last stderr line of a recording run stopped by a signal.
pub(crate) fn recorded_interrupted(path: &std::path::Path, exchanges: u64, signal: &str) -> String {
    format!(
        "dsh: recorded {exchanges} model exchanges into {}, interrupted by {signal}: replay refuses it",
        path.display()
    )
}

/// `dsh cassette show`: the first line.
pub(crate) fn cassette_show(
    path: &std::path::Path,
    level: &str,
    interrupted: Option<&str>,
    summary: &dyn std::fmt::Display,
) -> String {
    match interrupted {
        None => format!("{} ({level} level): {summary}", path.display()),
        Some(reason) => format!(
            "{} ({level} level; interrupted by {reason}, so replay refuses it): {summary}",
            path.display()
        ),
    }
}

/// `dsh cassette diff`: two recordings that agree.
pub(crate) const CASSETTES_AGREE: &str =
    "the two recordings agree: every agent asked the same and was answered the same";

/// The first stderr line with an endpoint.
pub(crate) fn banner_endpoint(model: &str, url: &str) -> String {
    format!("dsh: using model {model} at {url}")
}

/// `dsh config check` with MCP servers, whose tools it does not start.
pub(crate) fn config_check_mcp_servers(count: usize) -> String {
    format!(
        "dsh: (plus the mcp__<server>__<tool> tools of {count} MCP server{}, which checking does not start)",
        if count == 1 { "" } else { "s" }
    )
}

/// `dsh config check`: the limits of each delegation tree (one per
/// top-level agent), as `dsh run` would apply them without flags.
pub(crate) fn config_check_limits(limits: &dsh_subagent::Limits) -> String {
    let bound = |value: Option<String>| value.unwrap_or_else(|| "unbounded".to_owned());
    format!(
        "dsh: limits per top-level agent: {} children at once, {} calls waiting, {} children in all, token limit {}",
        bound(limits.max_concurrent().map(|n| n.children().to_string())),
        bound(limits.max_queued().map(|n| n.calls().to_string())),
        bound(limits.max_children().map(|n| n.children().to_string())),
        limits
            .token_limit()
            .map_or_else(|| "none".to_owned(), |tokens| format!("{} tokens", tokens.tokens())),
    )
}

/// `dsh config check`: a delegation tool's own limits on each child run.
pub(crate) fn config_check_tool_limits(
    tool: &str,
    timeout: Option<std::time::Duration>,
    token_limit: Option<u64>,
) -> String {
    let mut parts = Vec::new();
    if let Some(timeout) = timeout {
        parts.push(format!("timeout {}", dsh_subagent::wording::human_duration(timeout)));
    }
    if let Some(tokens) = token_limit {
        parts.push(format!("token limit {tokens} tokens"));
    }
    format!("dsh: {tool}: each child run: {}", parts.join(", "))
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

/// `dsh run` progress when stderr is not a terminal: a delegation waits for
/// a slot of its tree (its start line follows once admitted).
pub(crate) fn child_queued(indent: &str, label: &str, ahead: usize) -> String {
    format!("{indent}↳ subagent \"{label}\" {}", queued(ahead))
}

/// `dsh run` progress: a queued delegation was cancelled before it started.
pub(crate) fn child_withdrawn(indent: &str, label: &str, seconds: f64) -> String {
    format!("{indent}↳ subagent \"{label}\" {WITHDRAWN} · {seconds:.1}s")
}

/// A delegation waiting for a slot, and how many calls wait before it
/// (progress bars, `dsh acp` and `dsh mcp` progress).
pub(crate) fn queued(ahead: usize) -> String {
    format!("queued ({ahead} ahead)")
}

/// A queued delegation cancelled before it started (every progress surface).
pub(crate) const WITHDRAWN: &str = "left the queue unstarted";

/// `dsh run` progress, one line per child end when stderr is not a
/// terminal: its label, [`child_summary`] and its time.
pub(crate) fn child_ended(label: &str, summary: &str, seconds: f64) -> String {
    format!("↳ subagent \"{label}\" {summary} · {seconds:.1}s")
}

/// How a child's stop reads in a progress line: its stop reason, and for a
/// context stop the line that says why (the same on stderr, over ACP and
/// over MCP).
pub(crate) fn child_stop(end: &dsh_subagent::RunEndInfo) -> std::borrow::Cow<'_, str> {
    match (&end.stop_reason, &end.diagnostic) {
        (dsh_subagent_api::StopReason::Other(reason), Some(line))
            if reason == dsh_agent::wording::CONTEXT_WINDOW_STOP =>
        {
            format!("{reason}: {line}").into()
        }
        (reason, _) => reason.as_str().into(),
    }
}

/// `dsh run` progress: a delegation's result was longer than its result
/// budget: how large it was, how much of it the model reads, and where
/// the rest is kept. Follows the child's end line.
pub(crate) fn child_cut(
    label: &str,
    outcome: dsh_subagent::CutOutcome,
    full_bytes: u64,
    shown_bytes: u64,
    task: Option<&str>,
) -> String {
    let (ended, what) = match outcome {
        dsh_subagent::CutOutcome::Failed => ("failed", "error"),
        _ => ("completed", "answer"),
    };
    let rest = match task {
        Some(task) => format!("task_output reads the rest from task {task}"),
        None => "the rest is not kept".to_owned(),
    };
    format!(
        "↳ subagent \"{label}\" {ended} ({} {what}, {} shown; {rest})",
        size(full_bytes),
        size(shown_bytes)
    )
}

/// A size as a person reads it: `512 B`, `32 KB`, `2.2 MB` (powers of 1000).
pub(crate) fn size(bytes: u64) -> String {
    let bytes_f = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.0} KB", bytes_f / 1e3),
        _ => format!("{:.1} MB", bytes_f / 1e6),
    }
}

/// How a child ended: its stop reason, then its model calls (steps and
/// usage) when the agent loop reported them (an in-process child), or the
/// tool calls it reported (an ACP child, whose model calls are not known
/// here).
pub(crate) fn child_summary(
    stop: &str,
    calls: Option<(u32, Option<dsh_llm::Usage>, dsh_agent::Priced)>,
    tool_calls: u32,
) -> String {
    match calls {
        Some((steps, usage, cost)) => format!("{stop} · {}", model_calls(steps, usage, cost)),
        None if tool_calls > 0 => format!(
            "{stop} · {tool_calls} tool call{}",
            if tool_calls == 1 { "" } else { "s" }
        ),
        None => stop.to_owned(),
    }
}

/// A delegation under an ACP delegation call waits for a slot of its tree.
pub(crate) fn acp_child_queued(label: &str, ahead: usize) -> String {
    format!("{label}: {}", queued(ahead))
}

/// A delegation under an ACP delegation call was cancelled while it waited.
pub(crate) fn acp_child_withdrawn(label: &str) -> String {
    format!("{label}: {WITHDRAWN}")
}

/// A child under an ACP delegation call has started, on this provider.
pub(crate) fn acp_child_started(label: &str, provider: &str) -> String {
    format!("{label}: started ({provider})")
}

/// A child under an ACP delegation call finished a model call.
pub(crate) fn acp_child_step(
    label: &str,
    steps: u32,
    usage: Option<dsh_llm::Usage>,
    cost: dsh_agent::Priced,
) -> String {
    format!("{label}: working · {}", model_calls(steps, usage, cost))
}

/// A child under an ACP delegation call is calling a tool.
pub(crate) fn acp_child_tool(label: &str, tool: &str) -> String {
    format!("{label}: calling {tool}")
}

/// A child's progress bar before it reported anything.
pub(crate) const WORKING: &str = "working";

/// What an ACP child says it is doing while it streams its answer.
pub(crate) const ACP_CHILD_ANSWERING: &str = "answering";

/// What an ACP child's latest tool call (by its title) is doing.
pub(crate) fn acp_child_tool_status(title: &str, status: dsh_subagent_acp::Status) -> String {
    use dsh_subagent_acp::Status;
    match status {
        Status::Completed => format!("{title} done"),
        Status::Failed => format!("{title} failed"),
        _ => format!("calling {title}"),
    }
}

/// Where an ACP child's plan is: steps done of all, and the step it works on.
pub(crate) fn acp_child_plan(done: usize, total: usize, current: Option<&str>) -> String {
    match current {
        Some(step) => format!("plan {done}/{total} · {step}"),
        None => format!("plan {done}/{total}"),
    }
}

/// An ACP child's line while it works: its label and what it is doing now.
pub(crate) fn acp_child_activity(label: &str, now: &str) -> String {
    format!("{label}: {now}")
}

/// A child under an ACP delegation call ended ([`child_summary`]).
pub(crate) fn acp_child_finished(label: &str, summary: &str) -> String {
    format!("{label}: {summary}")
}

/// An agent's model calls in its current run, and their tokens.
pub(crate) fn model_calls(steps: u32, usage: Option<dsh_llm::Usage>, cost: dsh_agent::Priced) -> String {
    format!(
        "{steps} model call{} · {}",
        if steps == 1 { "" } else { "s" },
        tokens_and_cost(usage, cost)
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

/// Tokens as a person reads them: `N tokens`, `N tokens (M cached)` where
/// the server reported prompt tokens read from its cache; `N tokens
/// (estimated)` when some count is the loop's estimate (the server reported
/// none, or left a count out or at zero); `usage not reported` when there
/// is no count at all (no model call, or a child that reports none): never
/// "0 tokens".
pub(crate) fn tokens(usage: Option<dsh_llm::Usage>) -> String {
    match usage {
        Some(usage) if usage.is_estimated() => format!("{} tokens (estimated)", usage.total_tokens),
        Some(dsh_llm::Usage {
            total_tokens,
            cached_tokens: Some(cached),
            ..
        }) => format!("{total_tokens} tokens ({cached} cached)"),
        Some(usage) => format!("{} tokens", usage.total_tokens),
        None => "usage not reported".to_owned(),
    }
}

/// Tokens and, where every call's price is known, what they cost:
/// `N tokens, cost X`, the cost marked `(estimated)` when priced from
/// estimated tokens; tokens alone otherwise (never a made-up price).
pub(crate) fn tokens_and_cost(usage: Option<dsh_llm::Usage>, cost: dsh_agent::Priced) -> String {
    let amount = |cost: dsh_llm::Cost| dsh_subagent_api::money::amount_text(cost.nanos());
    match cost.known() {
        Some(cost) if cost.is_estimated() => format!("{}, cost {} (estimated)", tokens(usage), amount(cost)),
        Some(cost) => format!("{}, cost {}", tokens(usage), amount(cost)),
        None => tokens(usage),
    }
}

/// The parent's usage line at the end of `dsh run`: its own model calls and
/// its children's, separately and in total, each with its cost where the
/// prices are known (`children: none` when it started none and has no
/// children's usage from earlier turns, so no one reads "not reported" as
/// children that ran unseen); then how many delegation calls waited for a
/// slot, and how long in all, when any did.
pub(crate) fn usage_line(
    usage: &dsh_agent::UsageTotals,
    children_started: usize,
    waited_calls: usize,
    waited: std::time::Duration,
) -> String {
    let children = match usage.children {
        None if children_started == 0 => "none".to_owned(),
        children => tokens_and_cost(children, usage.children_cost),
    };
    let mut line = format!(
        "dsh: own model calls: {} · children: {children} · total: {}",
        tokens_and_cost(usage.own, usage.own_cost),
        tokens_and_cost(usage.total(), usage.total_cost())
    );
    // Only when the limits made some call wait.
    if waited_calls > 0 {
        line.push_str(&format!(
            " · {} call{} waited for a slot, {:.1}s in all",
            waited_calls,
            if waited_calls == 1 { "" } else { "s" },
            waited.as_secs_f64()
        ));
    }
    line
}

/// `dsh run`'s live tree, taller than the terminal: how many of its lines
/// (below the root, above the last ones) are not shown.
pub(crate) fn live_hidden(lines: usize) -> String {
    format!("… {lines} lines not shown")
}

/// `dsh tree`: the texts of one node's lines (see `crate::tree::text`).
pub(crate) mod tree {
    use dsh_tree::{Ending, Node, Place, Tokens};

    /// Who a node is: the tool that started it (for a child), its label and
    /// id, and where it ran (provider and model).
    pub(crate) fn who(node: &Node) -> String {
        let mut line = match (&node.tool, &node.label) {
            (Some(tool), Some(label)) => format!("{tool} \"{label}\" {}", node.id),
            (Some(tool), None) => format!("{tool} {}", node.id),
            (None, Some(label)) => format!("\"{label}\" {}", node.id),
            (None, None) => node.id.clone(),
        };
        let ran: Vec<&str> = [node.provider.as_deref(), node.model.as_deref()]
            .into_iter()
            .flatten()
            .filter(|part| !part.is_empty())
            .collect();
        if !ran.is_empty() {
            line.push_str(&format!(" ({})", ran.join(", ")));
        }
        line
    }

    /// How a turn ended, or that it has not.
    pub(crate) fn ending(ending: &Ending) -> String {
        match ending {
            Ending::Queued => "queued".to_owned(),
            Ending::Running => "running".to_owned(),
            Ending::Completed => "completed".to_owned(),
            Ending::Stopped { reason, detail: None } => reason.clone(),
            Ending::Stopped {
                reason,
                detail: Some(detail),
            } => format!("{reason}: {detail}"),
            Ending::Interrupted { detail } => format!("interrupted ({detail})"),
            Ending::Withdrawn => "left the queue unstarted".to_owned(),
            _ => "unknown".to_owned(),
        }
    }

    /// A duration in milliseconds as a person reads it: `0.4s`, `12.0s`, `3m 05s`.
    pub(crate) fn duration(ms: u64) -> String {
        if ms < 60_000 {
            format!("{:.1}s", ms as f64 / 1e3)
        } else {
            format!("{}m {:02}s", ms / 60_000, (ms % 60_000) / 1000)
        }
    }

    /// `queued 0.4s`.
    pub(crate) fn queued(ms: u64) -> String {
        format!("queued {}", duration(ms))
    }

    /// `ran 2.1s`.
    pub(crate) fn ran(ms: u64) -> String {
        format!("ran {}", duration(ms))
    }

    /// `3 model calls`.
    pub(crate) fn model_calls(calls: u32) -> String {
        format!("{calls} model call{}", if calls == 1 { "" } else { "s" })
    }

    /// Tokens: `1200 in, 300 out, 800 cached`, `~` before estimated ones.
    pub(crate) fn tokens(tokens: &Tokens) -> String {
        let mark = if tokens.estimated { "~" } else { "" };
        let mut text = format!("{mark}{} in, {mark}{} out", tokens.input, tokens.output);
        if let Some(cached) = tokens.cached {
            text.push_str(&format!(", {cached} cached"));
        }
        if tokens.estimated {
            text.push_str(" (estimated)");
        }
        text
    }

    /// `tokens …` (own).
    pub(crate) fn own_tokens(tokens: &Tokens) -> String {
        format!("tokens {}", self::tokens(tokens))
    }

    /// `subtree …`, shown when the subtree spent more than the node.
    pub(crate) fn subtree_tokens(tokens: &Tokens) -> String {
        format!("subtree {}", self::tokens(tokens))
    }

    /// `cost 0.0042`, `(estimated)` after one priced from estimated
    /// tokens; in the unit of the model's price.
    pub(crate) fn cost(cost: &dsh_tree::Cost) -> String {
        let mark = if cost.is_estimated() { " (estimated)" } else { "" };
        format!("cost {}{mark}", dsh_subagent_api::money::amount_text(cost.nanos()))
    }

    /// `subtree cost …`, shown beside the subtree's tokens when every
    /// model of the subtree was priced.
    pub(crate) fn subtree_cost(cost: &dsh_tree::Cost) -> String {
        format!("subtree {}", self::cost(cost))
    }

    /// `usage not reported`, for a node that ran with no usage reported.
    pub(crate) const NO_USAGE: &str = "usage not reported";

    /// A result's size: `result 2.2 MB, 32 KB shown (cut)`, or its full size only.
    pub(crate) fn result(full: Option<u64>, shown: Option<u64>, cut: bool) -> Option<String> {
        let cut_mark = if cut { " (cut)" } else { "" };
        match (full, shown) {
            (Some(full), Some(shown)) if cut || full != shown => Some(format!(
                "result {}, {} shown{cut_mark}",
                super::size(full),
                super::size(shown)
            )),
            (Some(full), _) => Some(format!("result {}", super::size(full))),
            (None, Some(shown)) => Some(format!("result {} shown{cut_mark}", super::size(shown))),
            (None, None) => None,
        }
    }

    /// `task subagent-3`.
    pub(crate) fn task(id: &str) -> String {
        format!("task {id}")
    }

    /// One turn's line of a node with several: `turn 2: completed · ran 1.2s · 1 model call`.
    pub(crate) fn turn(number: usize, parts: &[String]) -> String {
        format!("turn {number}: {}", parts.join(" · "))
    }

    /// A problem with a node's record.
    pub(crate) fn problem(problem: &dsh_tree::Problem) -> String {
        format!("! {problem}")
    }

    /// Where a node ran when its record is elsewhere.
    pub(crate) fn place(place: &Place) -> Option<String> {
        match place {
            Place::Elsewhere { ran } => Some(format!("ran in {ran}, whose records are not read here")),
            _ => None,
        }
    }

    /// What a subagent session an agent in another process announced was
    /// asked (its task there).
    pub(crate) fn asked(task: &str) -> String {
        format!("asked: {task}")
    }

    /// `--json` and `--html` together.
    pub(crate) const JSON_AND_HTML: &str = "dsh tree: --json and --html cannot be used together";

    /// The page could not be written.
    pub(crate) fn html_not_written(path: &std::path::Path, error: &std::io::Error) -> String {
        format!("dsh tree: cannot write {}: {error}", path.display())
    }

    /// The page was written.
    pub(crate) fn html_written(path: &std::path::Path, nodes: usize) -> String {
        format!(
            "dsh tree: wrote {} ({nodes} agent{})",
            path.display(),
            if nodes == 1 { "" } else { "s" }
        )
    }

    /// The tree could not be loaded.
    pub(crate) fn not_loaded(error: &dsh_tree::LoadError) -> String {
        format!("dsh tree: {error}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::usage_line;

    #[test]
    fn a_run_that_started_no_child_says_so_in_its_usage_line() {
        let usage = dsh_agent::UsageTotals {
            own: Some(dsh_llm::Usage::reported(30, 15)),
            ..dsh_agent::UsageTotals::default()
        };
        assert_eq!(
            usage_line(&usage, 0, 0, Duration::ZERO),
            "dsh: own model calls: 45 tokens · children: none · total: 45 tokens"
        );
        // A child that ran and reported nothing is not "none".
        assert_eq!(
            usage_line(&usage, 1, 0, Duration::ZERO),
            "dsh: own model calls: 45 tokens · children: usage not reported · total: 45 tokens"
        );
    }
}
