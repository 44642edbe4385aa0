//! Workspace chores.
//!
//! - `cargo xtask catalog` writes `docs/tool-catalog.md` from the tools as they register.
//! - `cargo xtask catalog --check` exits 0 when that file is current, 1 when it is stale.
//! - `cargo xtask arrows` exits 0 when every dependency between our crates is
//!   allowed by the Arrows section of `docs/design.md`, 1 naming each one that is not.
//! - `cargo xtask modules` exits 0 when no modules of one folder form a circle.
//! - `cargo xtask sizes` exits 0 when every Rust file is under 900 lines.

mod arrows;
mod modules;
mod sizes;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dsh_tool_catalog::{CATALOG_PATH, Freshness};

const USAGE: &str =
    "usage: cargo xtask catalog [--check] | cargo xtask arrows | cargo xtask modules | cargo xtask sizes";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let outcome = match args.as_slice() {
        ["catalog"] => catalog(false),
        ["catalog", "--check"] => catalog(true),
        ["arrows"] => workspace_root().and_then(|root| arrows::check(&root)),
        ["modules"] => workspace_root().and_then(|root| modules::check(&root)),
        ["sizes"] => workspace_root().and_then(|root| sizes::check(&root)),
        _ => Err(USAGE.to_owned()),
    };
    match outcome {
        Ok(message) => {
            println!("{message}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace this command runs in, found at run time: the nearest
/// directory, from the current one upwards, whose `Cargo.toml` declares
/// `[workspace]`. A path baked in at build time would point at whichever
/// checkout first built this binary, which is wrong when a target directory
/// is shared between checkouts.
fn workspace_root() -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|error| format!("xtask: cannot read the current directory: {error}"))?;
    cwd.ancestors()
        .find(|dir| is_workspace_root(dir))
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("xtask: no Cargo.toml with [workspace] in {} or above it", cwd.display()))
}

fn is_workspace_root(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|manifest| manifest.lines().any(|line| line.trim() == "[workspace]"))
}

fn catalog(check: bool) -> Result<String, String> {
    let root = workspace_root()?;
    let crate_dirs = std::fs::read_dir(root.join("crates"))
        .map_err(|error| format!("tool-catalog: cannot list crates/: {error}"))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    let manifest = dsh_tool_catalog::manifest();
    dsh_tool_catalog::check_completeness(&crate_dirs, &manifest).map_err(|error| error.to_string())?;
    let page = dsh_tool_catalog::render(&dsh_tool_catalog::harvest(&manifest).map_err(|error| error.to_string())?);
    let path = root.join(CATALOG_PATH);
    if !check {
        std::fs::write(&path, &page).map_err(|error| format!("tool-catalog: cannot write {CATALOG_PATH}: {error}"))?;
        return Ok(format!("tool-catalog: wrote {CATALOG_PATH}."));
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    match dsh_tool_catalog::compare(&committed, &page) {
        Freshness::Current => Ok(format!("tool-catalog: {CATALOG_PATH} is up to date.")),
        Freshness::Stale {
            line,
            committed,
            rendered,
        } => Err(format!(
            "tool-catalog: {CATALOG_PATH} is stale. Run `cargo xtask catalog` and commit {CATALOG_PATH}.\n  first difference at line {line}:\n  committed: {}\n  generated: {}",
            quote(committed.as_deref()),
            quote(rendered.as_deref()),
        )),
    }
}

fn quote(line: Option<&str>) -> String {
    match line {
        Some(line) => serde_json::to_string(line).unwrap_or_else(|_| line.to_owned()),
        None => "(end of file)".to_owned(),
    }
}
