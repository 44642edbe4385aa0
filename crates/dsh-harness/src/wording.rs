//! Every person-facing text of the builder: why a harness was not built.
//!
//! A refusal names the tool (and the provider or name) it is about and says
//! what to change. The builder shows the model nothing of its own.

use dsh_subagent_api::Capability;

/// A tool enables `run_in_background` in a harness without background tasks
/// (`SubagentToolPlugin::apply` refuses the same mistake in its own words,
/// which name its own loading functions).
pub(crate) fn background_without_tasks(tool: &str) -> String {
    format!(
        "dsh-harness: \"{tool}\" enables run_in_background but the harness runs no background tasks (Background::Off) — use Background::Tasks or Background::Continuable, or leave enableRunInBackground off for this tool"
    )
}

/// A tool would run continuable children in the background without a store
/// to keep them in.
pub(crate) fn continuable_without_store(tool: &str, provider: &str) -> String {
    format!(
        "dsh-harness: \"{tool}\" runs its children in the background and provider \"{provider}\" makes them continuable, but the harness has no child store to keep them in — use Background::Continuable with a ChildStore (dsh_agent::JsonlChildStore is one), or leave enableRunInBackground off for this tool"
    )
}

/// A tool filter names a tool the harness does not mount.
pub(crate) fn unknown_filter_tool(tool: &str, name: &str, mounted: &[String]) -> String {
    format!(
        "dsh-harness: the toolFilter of \"{tool}\" names \"{name}\", which is not mounted (mounted: {}) — name a mounted tool, mount it with HarnessBuilder::tool, or declare the prefix of tools mounted later with HarnessBuilder::later_tools",
        mounted.join(", ")
    )
}

/// Two tools of the harness have one name.
pub(crate) fn duplicate_tool_name(name: &str) -> String {
    format!("dsh-harness: two tools are named \"{name}\" — give each tool its own name")
}

/// Two different providers have one name.
pub(crate) fn duplicate_provider(name: &str) -> String {
    format!(
        "dsh-harness: two different providers are named \"{name}\" — give each provider its own name, and pass the same provider to every tool that shares it"
    )
}

/// A tool's configuration names another provider than the one it was given.
pub(crate) fn provider_mismatch(tool: &str, configured: &str, given: &str) -> String {
    format!(
        "dsh-harness: \"{tool}\" is configured for provider \"{configured}\" but was given provider \"{given}\" — pass the provider its configuration names"
    )
}

/// A tool sets a persona, a tool filter or a token budget its provider cannot honour.
pub(crate) fn unsupported_capability(tool: &str, provider: &str, capability: Capability) -> String {
    format!(
        "dsh-harness: \"{tool}\" sets {capability}, which provider \"{provider}\" cannot honour (no {capability} capability) — every call would be refused; remove {capability} from the configuration"
    )
}

/// The limits set a tree token budget over a provider that reports no usage.
pub(crate) fn tree_budget_unsupported(provider: &str, limit: u64) -> String {
    format!(
        "dsh-harness: the limits set a tree token budget of {limit} tokens, which provider \"{provider}\" cannot honour (no tokenBudget capability: its children report no usage, so what they spend would never be counted) — remove the token budget from the limits, or leave this provider out of the harness"
    )
}

/// A tree cost budget over a provider whose children report no usage.
pub(crate) fn tree_cost_budget_unsupported(provider: &str) -> String {
    format!(
        "dsh-harness: the limits set a tree cost budget, which provider \"{provider}\" cannot honour (no tokenBudget capability: its children report no usage, so what they spend could never be priced) — remove the cost budget from the limits, or leave this provider out of the harness"
    )
}

/// The tool registry refused a tool of the harness's own.
pub(crate) fn tool_not_registered(error: &dsh_tools::RegistryError) -> String {
    format!("dsh-harness: {error}")
}
