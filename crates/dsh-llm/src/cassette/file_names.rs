//! The names of a cassette's files, which the recorder writes and the
//! reader looks for: `FILE.recording` while a recording runs, and the parts
//! other processes of the same run record beside it, `FILE.part-<n>` (each
//! `FILE.part-<n>.recording` until it is finished).

use std::path::{Path, PathBuf};

/// The suffix of a recording in progress, beside the cassette it becomes.
pub const RECORDING_SUFFIX: &str = ".recording";

/// The most parts one cassette has.
pub(crate) const MAX_PARTS: usize = 10_000;

/// What a part's file name adds to its cassette's: `.part-`, then its number.
const PART_INFIX: &str = ".part-";

/// `FILE.recording`.
pub(crate) fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(RECORDING_SUFFIX);
    PathBuf::from(name)
}

/// `FILE.part-<number>`.
pub(crate) fn part_path(whole: &Path, number: usize) -> PathBuf {
    let mut name = whole.as_os_str().to_owned();
    name.push(format!("{PART_INFIX}{number}"));
    PathBuf::from(name)
}

/// The part called `name` (a file name, as [`parts_of`] gives it and a
/// closing line lists it), beside `whole`.
pub(crate) fn part_beside(whole: &Path, name: &str) -> PathBuf {
    let dir = whole.parent().filter(|dir| !dir.as_os_str().is_empty());
    dir.map_or_else(|| PathBuf::from(name), |dir| dir.join(name))
}

/// The parts beside `whole` (`FILE.part-<n>`, finished or still
/// `.recording`), by file name, in number order.
pub(crate) fn parts_of(whole: &Path) -> Vec<String> {
    let (Some(dir), Some(name)) = (whole.parent(), whole.file_name().and_then(|name| name.to_str())) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!("{name}{PART_INFIX}");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut parts: Vec<(usize, String)> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let file = entry.file_name().into_string().ok()?;
            let rest = file.strip_prefix(&prefix)?;
            let number = rest.strip_suffix(RECORDING_SUFFIX).unwrap_or(rest);
            let number: usize = number.parse().ok()?;
            Some((number, format!("{prefix}{number}")))
        })
        .collect();
    parts.sort();
    parts.dedup();
    parts.into_iter().map(|(_, name)| name).collect()
}

/// Removes the parts an earlier recording of `whole` left (the new
/// recording's children write theirs afresh).
pub(crate) fn remove_parts(whole: &Path) {
    for name in parts_of(whole) {
        let part = part_beside(whole, &name);
        let _ = std::fs::remove_file(&part);
        let _ = std::fs::remove_file(partial_path(&part));
    }
}
