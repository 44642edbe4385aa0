//! The last report of `dsh check acp` for each agent command, kept in the
//! data directory (`checks/acp-<fingerprint>.json`), where `dsh config
//! check` reads the verdict of each configured ACP child.

use std::path::{Path, PathBuf};

use dsh_subagent_acp::AcpConfig;
use dsh_subagent_conformance::Report;

/// Where the report of the agent `config` runs is kept: named by a
/// fingerprint of its command and arguments (FNV-1a, stable across builds).
pub(crate) fn path(data_dir: &Path, config: &AcpConfig) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let program = &config.program;
    let words = std::iter::once(program.command.to_string_lossy().into_owned()).chain(program.args.iter().cloned());
    for word in words {
        for byte in word.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    data_dir.join("checks").join(format!("acp-{hash:016x}.json"))
}

/// Keeps `report` as the last check of the agent `config` runs.
pub(crate) fn save(data_dir: &Path, config: &AcpConfig, report: &Report) -> std::io::Result<()> {
    let path = path(data_dir, config);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, report.to_json())
}

/// The last check of the agent `config` runs, when one was saved and reads.
pub(crate) fn load(data_dir: &Path, config: &AcpConfig) -> Option<(Report, PathBuf)> {
    let path = path(data_dir, config);
    let text = std::fs::read_to_string(&path).ok()?;
    let report = serde_json::from_str(&text).ok()?;
    Some((report, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_tells_commands_and_arguments_apart() {
        let dir = Path::new(".dsh");
        let one = path(dir, &AcpConfig::new("dsh").args(["acp"]));
        assert_eq!(one, path(dir, &AcpConfig::new("dsh").args(["acp"])));
        assert_ne!(one, path(dir, &AcpConfig::new("dsh").args(["ac", "p"])));
        assert_ne!(one, path(dir, &AcpConfig::new("dsh acp")));
        assert!(one.starts_with(".dsh/checks"));
    }
}
