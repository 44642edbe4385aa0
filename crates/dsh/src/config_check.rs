//! `dsh config check`: check the configuration file and print the tool
//! catalog the parent's model will see, rendered like `docs/tool-catalog.md`.

use std::path::Path;

use dsh_agent::KeptFacts;
use dsh_tool_catalog::{HarvestedPackage, manifest, render};
use dsh_tools::ToolSpec;

use crate::cli::ConfigCheckArgs;
use crate::failure::Failure;
use crate::harness::{MountedHarness, Surface};
use crate::{check_acp, config, wording};

pub(crate) fn check(args: &ConfigCheckArgs) -> Result<(), Failure> {
    let config = config::load_from_cwd(args.config.as_deref())?;
    // As `dsh run` mounts them: with its default data directory (nothing is
    // created there), so continuable children and `send_message` show.
    let file_limits = config.as_ref().map(|config| config.limits).unwrap_or_default();
    let limits = file_limits.resolve(&config::LimitsConfig::default());
    let result_limit = file_limits.result_limit(&config::LimitsConfig::default());
    let mounted = MountedHarness::new(
        config.as_ref(),
        Some(Path::new(".dsh")),
        Surface::Agent,
        None,
        limits,
        result_limit,
        (&[], &[]),
    )?;
    eprintln!(
        "{}",
        wording::config_checked(config.as_ref().map(|config| config.path.as_path()))
    );
    // The limits are not in the catalog the model reads: stderr, like the verdict.
    eprintln!("{}", wording::config_check_limits(&limits));
    if let Some(file) = config.as_ref().and_then(|config| config.record.as_deref()) {
        eprintln!("{}", wording::config_check_record(file));
    }
    let tools = config.iter().flat_map(|config| &config.subagents);
    for subagent in tools.filter(|s| s.tool.timeout.is_some() || s.tool.token_limit.is_some()) {
        let tool = &subagent.tool;
        eprintln!(
            "{}",
            wording::config_check_tool_limits(
                &tool.tool_name,
                tool.timeout,
                tool.token_limit.map(dsh_subagent_api::TokenLimit::tokens)
            )
        );
    }
    warn_uncapped(config.as_ref());
    // Checking starts no process: MCP servers' tools are listed once they run.
    let servers = config.as_ref().map_or(0, |config| config.mcp_servers.len());
    if servers > 0 {
        eprintln!("{}", wording::config_check_mcp_servers(servers));
    }
    let failed = acp_children(config.as_ref(), args);
    let file_model = config.as_ref().map(|config| config.model.clone()).unwrap_or_default();
    if let Some(endpoint) = crate::model::configured_endpoint(&file_model, |key| std::env::var(key).ok()) {
        eprintln!("{}", kept(&KeptFacts::new(&args.data_dir, &endpoint)));
    }
    print!("{}", catalog(mounted.tools().specs(), mounted.delegation_tools())?);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::failed(wording::config_check_probe_failed(&failed)))
    }
}

/// Says once, on stderr, which delegation tools let their children
/// delegate again with no depth cap (`dsh run` and `dsh config check`).
pub(crate) fn warn_uncapped(config: Option<&config::Config>) {
    let uncapped = config.map(config::Config::uncapped_tools).unwrap_or_default();
    if !uncapped.is_empty() {
        eprintln!("{}", wording::uncapped_delegation(&uncapped));
    }
}

/// Names, for each configured ACP child, the verdict of its last saved
/// `dsh check acp`, or with `--probe` checks it now; returns the tools
/// whose probed child failed.
fn acp_children(config: Option<&config::Config>, args: &ConfigCheckArgs) -> Vec<String> {
    let children = config
        .iter()
        .flat_map(|config| &config.subagents)
        .filter_map(|subagent| match &subagent.provider {
            config::Provider::Acp(acp) => Some((subagent.tool.tool_name.clone(), acp)),
            config::Provider::Spawn | config::Provider::Fork => None,
        });
    let mut failed = Vec::new();
    for (tool, acp) in children {
        if !args.probe {
            match check_acp::saved::load(&args.data_dir, acp) {
                Some((report, path)) => eprintln!("{}", wording::config_check_acp_saved(&tool, &report, &path)),
                None => eprintln!("{}", wording::config_check_acp_unchecked(&tool, acp)),
            }
            continue;
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let Ok(runtime) = runtime else {
            failed.push(tool);
            continue;
        };
        let report = runtime.block_on(check_acp::check(acp, check_acp::STEP_TIMEOUT));
        let _ = check_acp::saved::save(&args.data_dir, acp, &report);
        eprintln!("{}", wording::config_check_acp_probed(&tool, &report));
        if !report.passed() {
            failed.push(tool);
        }
    }
    failed
}

/// What earlier runs kept of the endpoint in `facts`: each model's facts,
/// nothing yet, or why the file is ignored.
fn kept(facts: &KeptFacts) -> String {
    match facts.read() {
        Err(error) => wording::config_check_kept_ignored(&error),
        Ok(models) if models.is_empty() => wording::config_check_nothing_kept(facts.endpoint(), facts.path()),
        Ok(models) => {
            let mut lines = vec![wording::config_check_kept(facts.endpoint(), facts.path())];
            lines.extend(
                models
                    .iter()
                    .map(|(model, kept)| wording::config_check_kept_model(model, kept)),
            );
            lines.join("\n")
        }
    }
}

/// The parent's tools grouped by the crate that defines them, in catalog
/// order, rendered by the catalog's own renderer.
fn catalog(specs: Vec<ToolSpec>, delegation_tools: &[String]) -> Result<String, Failure> {
    let manifest = manifest();
    let mut packages: Vec<HarvestedPackage> = manifest
        .iter()
        .map(|entry| HarvestedPackage {
            package: entry.package,
            tools: Vec::new(),
            requires: entry.requires,
            writes: entry.writes,
            shipped_aliases: entry.shipped_aliases,
            note: entry.note,
        })
        .collect();
    for spec in specs {
        let found = manifest.iter().enumerate().find_map(|(index, entry)| {
            let delegation = entry.package == "dsh-tool-subagent" && delegation_tools.contains(&spec.name);
            let source = entry
                .sources
                .iter()
                .find(|(name, _)| delegation || *name == spec.name)
                .map(|(_, source)| *source)?;
            Some((index, source))
        });
        let Some((index, source)) = found else {
            return Err(Failure::internal(wording::tool_not_catalogued(&spec.name)));
        };
        packages[index].tools.push((spec, source));
    }
    packages.retain(|package| !package.tools.is_empty());
    Ok(render(&packages))
}
