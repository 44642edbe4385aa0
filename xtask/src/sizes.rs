//! `cargo xtask sizes`: no Rust source file of [`MAX_LINES`] lines or more.
//!
//! A file that long does more than one job: split it by job before it
//! grows further. Every `.rs` file under `crates/` and `xtask/` counts,
//! tests included. (Functions are bounded by clippy's `too_many_lines`,
//! set in `clippy.toml`.)

use std::path::{Path, PathBuf};

/// The first line count a file may not reach.
const MAX_LINES: usize = 900;

/// Checks every Rust file of the workspace at `root`; the message names
/// each file that is too long, with its length.
pub(crate) fn check(root: &Path) -> Result<String, String> {
    let mut files = Vec::new();
    for dir in ["crates", "xtask"] {
        collect(&root.join(dir), &mut files)?;
    }
    let mut long = Vec::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).map_err(|error| format!("sizes: cannot read {}: {error}", file.display()))?;
        let lines = text.lines().count();
        if lines >= MAX_LINES {
            let shown = file.strip_prefix(root).unwrap_or(file);
            long.push(format!(
                "sizes: {} has {lines} lines (at most {}): split it by job",
                shown.display(),
                MAX_LINES - 1
            ));
        }
    }
    match long.is_empty() {
        true => Ok(format!(
            "sizes: {} Rust files, each under {MAX_LINES} lines.",
            files.len()
        )),
        false => Err(long.join("\n")),
    }
}

/// Every `.rs` file below `dir`, skipping build output.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|error| format!("sizes: cannot list {}: {error}", dir.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name == "target") {
                continue;
            }
            collect(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}
