//! Harvest: mount each manifest entry on a fresh registry and record its tools.

use dsh_tools::{ToolRegistry, ToolSpec};

use crate::manifest::ToolPackage;
use crate::wording;

/// What one tool crate registered.
#[derive(Clone, Debug, PartialEq)]
pub struct HarvestedPackage {
    /// The crate's name.
    pub package: &'static str,
    /// Its tools, sorted by name, each with the file that defines it.
    pub tools: Vec<(ToolSpec, &'static str)>,
    /// What a harness must provide.
    pub requires: &'static [&'static str],
    /// What its tools write or affect.
    pub writes: &'static [&'static str],
    /// Other names it is loaded under.
    pub shipped_aliases: &'static [&'static str],
    /// The deployment note.
    pub note: &'static str,
}

/// Why the catalog could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Mounting a crate failed.
    #[error("{}", wording::mount_failed(package, message))]
    MountFailed {
        /// The crate.
        package: &'static str,
        /// Its error.
        message: String,
    },
    /// A crate mounted but registered no tool.
    #[error("{}", wording::nothing_registered(package))]
    NothingRegistered {
        /// The crate.
        package: &'static str,
    },
    /// A harvested tool has no source file in the manifest.
    #[error("{}", wording::no_source(package, tool))]
    NoSource {
        /// The crate.
        package: &'static str,
        /// The tool.
        tool: String,
    },
    /// Tool crates exist that the manifest does not list.
    #[error("{}", wording::incomplete(missing))]
    Incomplete {
        /// The unlisted crates.
        missing: Vec<String>,
    },
}

/// Mounts every entry on its own fresh registry and records what registered.
pub fn harvest(manifest: &[ToolPackage]) -> Result<Vec<HarvestedPackage>, CatalogError> {
    manifest.iter().map(harvest_one).collect()
}

fn harvest_one(entry: &ToolPackage) -> Result<HarvestedPackage, CatalogError> {
    let tools = ToolRegistry::new();
    let guard = (entry.mount)(&tools).map_err(|error| CatalogError::MountFailed {
        package: entry.package,
        message: error.to_string(),
    })?;
    let specs = tools.specs();
    drop(guard);
    if specs.is_empty() {
        return Err(CatalogError::NothingRegistered { package: entry.package });
    }
    let tools = specs
        .into_iter()
        .map(|spec| {
            let source = entry
                .sources
                .iter()
                .find(|(name, _)| *name == spec.name)
                .map(|(_, path)| *path)
                .ok_or_else(|| CatalogError::NoSource {
                    package: entry.package,
                    tool: spec.name.clone(),
                })?;
            Ok((spec, source))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HarvestedPackage {
        package: entry.package,
        tools,
        requires: entry.requires,
        writes: entry.writes,
        shipped_aliases: entry.shipped_aliases,
        note: entry.note,
    })
}

/// Fails when a crate named `dsh-tool-*` in `crate_dirs` is missing from the manifest.
///
/// `crate_dirs` are the directory names under `crates/`; crates named like
/// tool crates that are not (this one) are skipped.
pub fn check_completeness(crate_dirs: &[String], manifest: &[ToolPackage]) -> Result<(), CatalogError> {
    let mut missing: Vec<String> = crate_dirs
        .iter()
        .filter(|dir| dir.starts_with("dsh-tool-") && !crate::manifest::NOT_TOOL_CRATES.contains(&dir.as_str()))
        .filter(|dir| !manifest.iter().any(|entry| entry.package == dir.as_str()))
        .cloned()
        .collect();
    missing.sort();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CatalogError::Incomplete { missing })
    }
}
