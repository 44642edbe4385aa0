//! Every text `dsh` shows a model or a person, in one place.

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
