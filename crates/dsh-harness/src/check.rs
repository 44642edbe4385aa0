//! The checks `HarnessBuilder::build` runs before it mounts anything.

use std::collections::BTreeSet;
use std::sync::Arc;

use dsh_subagent_api::{Capability, SubagentProvider};
use dsh_tool_subagent::{ConfigError, MaxDepth, SubagentToolConfig};
use dsh_tools::RegistryError;

use crate::BuildError;
use crate::assembly::{Assembly, Background};

/// Checks the whole assembly; returns the providers to register, one per
/// name, in the order they were first given.
pub(crate) fn check(assembly: &Assembly) -> Result<Vec<Arc<dyn SubagentProvider>>, BuildError> {
    for (config, provider) in &assembly.subagents {
        config.validate()?;
        if config.provider != provider.name() {
            return Err(BuildError::ProviderMismatch {
                tool: config.tool_name.clone(),
                configured: config.provider.clone(),
                given: provider.name().to_owned(),
            });
        }
    }
    let providers = distinct_providers(&assembly.providers)?;
    let mounted = tool_names(assembly)?;
    for (config, provider) in &assembly.subagents {
        background(config, provider.as_ref(), &assembly.background)?;
        capabilities(config, provider.as_ref())?;
        filter(config, &mounted, &assembly.later_tools)?;
    }
    tree_budget(assembly, &providers)?;
    Ok(providers)
}

/// A tree token budget is spent by what every child reports of its model
/// calls: a provider whose children report no usage would spend nothing
/// from it, and the budget would be accepted and never enforced. Every
/// provider counts, a provider given without a tool included: a child it
/// starts (a continued one, for one) belongs to a tree too.
///
/// A tree cost budget is spent by what those same reports cost, so it needs
/// the same of every provider.
fn tree_budget(assembly: &Assembly, providers: &[Arc<dyn SubagentProvider>]) -> Result<(), BuildError> {
    let Some(unmetered) = providers
        .iter()
        .find(|provider| !provider.capabilities().supports(Capability::TokenBudget))
    else {
        return Ok(());
    };
    let provider = unmetered.name().to_owned();
    if let Some(limit) = assembly.limits.token_limit() {
        return Err(BuildError::TreeBudgetUnsupported {
            provider,
            limit: limit.tokens(),
        });
    }
    if assembly.limits.cost_limit().is_some() {
        return Err(BuildError::TreeCostBudgetUnsupported { provider });
    }
    Ok(())
}

/// One provider per name: the same instance given twice is registered once.
fn distinct_providers(providers: &[Arc<dyn SubagentProvider>]) -> Result<Vec<Arc<dyn SubagentProvider>>, BuildError> {
    let mut distinct: Vec<Arc<dyn SubagentProvider>> = Vec::new();
    for provider in providers {
        match distinct.iter().find(|known| known.name() == provider.name()) {
            Some(known) if Arc::ptr_eq(known, provider) => {}
            Some(_) => {
                return Err(BuildError::DuplicateProvider {
                    name: provider.name().to_owned(),
                });
            }
            None => distinct.push(provider.clone()),
        }
    }
    Ok(distinct)
}

/// Every name the harness will mount, sorted: the `subagent` tools, the
/// harness's own, the task tools and `send_message` when the background
/// setting brings them. Two tools with one name are refused.
fn tool_names(assembly: &Assembly) -> Result<Vec<String>, BuildError> {
    let subagents = assembly.subagents.iter().map(|(config, _)| config.tool_name.as_str());
    let own = assembly.tools.iter().map(|tool| tool.name());
    let tasks = match assembly.background {
        Background::Off => &[][..],
        Background::Tasks | Background::Continuable(_) => &dsh_tool_tasks::TOOL_NAMES[..],
    };
    let control = match assembly.background {
        Background::Continuable(_) => &dsh_tool_subagent_control::TOOL_NAMES[..],
        Background::Off | Background::Tasks => &[][..],
    };
    let mut names = BTreeSet::new();
    for name in subagents
        .chain(own)
        .chain(tasks.iter().copied())
        .chain(control.iter().copied())
    {
        if name.is_empty() {
            return Err(BuildError::Registry(RegistryError::EmptyName));
        }
        if !names.insert(name.to_owned()) {
            return Err(BuildError::DuplicateToolName { name: name.to_owned() });
        }
    }
    Ok(names.into_iter().collect())
}

/// A tool that shows `run_in_background` needs somewhere to run it: a task
/// registry, and a child store when its provider continues its children.
fn background(
    config: &SubagentToolConfig,
    provider: &dyn SubagentProvider,
    background: &Background,
) -> Result<(), BuildError> {
    if !config.enable_run_in_background {
        return Ok(());
    }
    match background {
        Background::Off => Err(BuildError::BackgroundWithoutTasks {
            tool: config.tool_name.clone(),
        }),
        Background::Tasks if provider.continuation().is_some() => Err(BuildError::ContinuableWithoutStore {
            tool: config.tool_name.clone(),
            provider: provider.name().to_owned(),
        }),
        Background::Tasks | Background::Continuable(_) => Ok(()),
    }
}

/// What the configuration asks of every child, the provider must honour:
/// otherwise every call (or the mount itself) would be refused.
fn capabilities(config: &SubagentToolConfig, provider: &dyn SubagentProvider) -> Result<(), BuildError> {
    let capabilities = provider.capabilities();
    if matches!(config.max_depth, Some(MaxDepth::Limit(_))) && !capabilities.supports(Capability::DepthLimit) {
        return Err(BuildError::Tool(ConfigError::CannotEnforceMaxDepth {
            provider: provider.name().to_owned(),
        }));
    }
    let asked = [
        (config.tool_filter.is_some(), Capability::ToolFilter),
        (config.persona.is_some(), Capability::Persona),
        (config.token_limit.is_some(), Capability::TokenBudget),
    ];
    match asked
        .into_iter()
        .find(|(asked, capability)| *asked && !capabilities.supports(*capability))
    {
        Some((_, capability)) => Err(BuildError::UnsupportedCapability {
            tool: config.tool_name.clone(),
            provider: provider.name().to_owned(),
            capability,
        }),
        None => Ok(()),
    }
}

/// A tool filter names only tools that will be there: mounted by the build,
/// or declared as mounted later by prefix.
fn filter(config: &SubagentToolConfig, mounted: &[String], later: &[String]) -> Result<(), BuildError> {
    let Some(filter) = &config.tool_filter else {
        return Ok(());
    };
    let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
    let unknown = named
        .into_iter()
        .find(|name| mounted.binary_search(name).is_err() && !later.iter().any(|prefix| name.starts_with(prefix)));
    match unknown {
        Some(name) => Err(BuildError::UnknownFilterTool {
            tool: config.tool_name.clone(),
            name: name.clone(),
            mounted: mounted.to_vec(),
        }),
        None => Ok(()),
    }
}
