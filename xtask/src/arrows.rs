//! `cargo xtask arrows`: every dependency between our crates is one that
//! `docs/design.md` allows.
//!
//! The allowed arrows are the table of that file's "Arrows" section, one row
//! per crate: `| `crate` | `dep`, `dep` | why |` (`none` for no arrow). The
//! actual arrows come from `cargo metadata`: the normal and build
//! dependencies of each workspace member on another member. Development
//! dependencies are not arrows: a crate's tests may reach for any sibling.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Where the allowed arrows are written.
pub(crate) const DESIGN_PATH: &str = "docs/design.md";

/// The heading of the section that holds the table.
const SECTION: &str = "## Arrows";

type Arrows = BTreeMap<String, BTreeSet<String>>;

/// Checks the workspace at `root`; the message lists every forbidden arrow.
pub(crate) fn check(root: &Path) -> Result<String, String> {
    let design = std::fs::read_to_string(root.join(DESIGN_PATH))
        .map_err(|error| format!("arrows: cannot read {DESIGN_PATH}: {error}"))?;
    let allowed = allowed(&design)?;
    let actual = actual(root)?;
    let mut problems = Vec::new();
    for (from, targets) in &actual {
        let Some(permitted) = allowed.get(from) else {
            problems.push(format!(
                "crate `{from}` has no row in the {SECTION} table of {DESIGN_PATH}"
            ));
            continue;
        };
        for to in targets.difference(permitted) {
            problems.push(format!(
                "forbidden arrow: {from} -> {to} (not allowed in {DESIGN_PATH}, {SECTION})"
            ));
        }
    }
    for from in allowed.keys().filter(|from| !actual.contains_key(*from)) {
        problems.push(format!(
            "{DESIGN_PATH}, {SECTION}: row for `{from}`, which is not a workspace member"
        ));
    }
    if problems.is_empty() {
        let count: usize = actual.values().map(BTreeSet::len).sum();
        Ok(format!(
            "arrows: {count} arrows between {} crates, all allowed.",
            actual.len()
        ))
    } else {
        Err(problems.join("\n"))
    }
}

/// The allowed arrows, from the table of the Arrows section.
fn allowed(design: &str) -> Result<Arrows, String> {
    let section = design
        .split_once(&format!("\n{SECTION}\n"))
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))
        .ok_or_else(|| format!("arrows: {DESIGN_PATH} has no `{SECTION}` section"))?;
    let mut arrows = Arrows::new();
    for line in section.lines().filter(|line| line.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let [from, to, ..] = cells.as_slice() else { continue };
        let from = from.trim_matches('`');
        // The header and its rule.
        if from == "crate" || from.starts_with('-') {
            continue;
        }
        let targets = to
            .split(',')
            .map(|target| target.trim().trim_matches('`'))
            .filter(|target| !target.is_empty() && *target != "none")
            .map(str::to_owned)
            .collect();
        if arrows.insert(from.to_owned(), targets).is_some() {
            return Err(format!("arrows: {DESIGN_PATH}, {SECTION}: two rows for `{from}`"));
        }
    }
    if arrows.is_empty() {
        return Err(format!("arrows: {DESIGN_PATH}, {SECTION}: no table rows"));
    }
    Ok(arrows)
}

/// The arrows between workspace members (normal and build dependencies),
/// from `cargo metadata`.
fn actual(root: &Path) -> Result<Arrows, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .map_err(|error| format!("arrows: cannot run cargo metadata: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "arrows: cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("arrows: cargo metadata printed no JSON: {error}"))?;
    let packages = metadata["packages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let members: BTreeSet<&str> = packages.iter().filter_map(|package| package["name"].as_str()).collect();
    let mut arrows = Arrows::new();
    for package in packages {
        let Some(name) = package["name"].as_str() else { continue };
        arrows.entry(name.to_owned()).or_default();
        let dependencies = package["dependencies"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for dependency in dependencies {
            let Some(target) = dependency["name"].as_str().filter(|target| members.contains(target)) else {
                continue;
            };
            if dependency["kind"].as_str() != Some("dev") {
                arrows.entry(name.to_owned()).or_default().insert(target.to_owned());
            }
        }
    }
    Ok(arrows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_read_row_by_row() {
        let design = "# D\n\n## Arrows\n\n| crate | may depend on | why |\n|---|---|---|\n| `a` | none | root |\n| `b` | `a`, `c` | uses them |\n\n## Next\n| `z` | `a` | not this section |\n";
        let arrows = allowed(design).unwrap_or_default();
        assert_eq!(arrows.len(), 2);
        assert!(arrows["a"].is_empty());
        assert_eq!(arrows["b"].iter().map(String::as_str).collect::<Vec<_>>(), ["a", "c"]);
        assert!(!arrows.contains_key("z"));
    }

    #[test]
    fn a_missing_section_or_a_doubled_row_is_an_error() {
        assert!(allowed("# D\n").is_err());
        assert!(allowed("# D\n\n## Arrows\n\n| `a` | none | x |\n| `a` | none | y |\n").is_err());
    }
}
