//! A real delegation, replayed offline: `tests/cassettes/delegation.jsonl`
//! was recorded by `dsh run --record` from llama-cpp-python serving
//! SmolLM2-135M-Instruct (`scripts/record-cassettes.sh dsh` records it
//! again; a change to what dsh sends the model, such as a tool's
//! description, needs that). The parent delegates to one child, which
//! answers on the model; replayed, the same tree runs with no network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

const TASK: &str = "Use the subagent tool to find out what the capital of France is, then tell me the answer.";

fn cassettes() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cassettes")
}

fn dsh(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command.args(args).current_dir(dir);
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    command.output().unwrap()
}

#[test]
fn a_recorded_delegation_replays_offline() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = cassettes().join("delegation.jsonl");
    let config = cassettes().join("delegation.toml");
    let (cassette, config) = (cassette.to_str().unwrap(), config.to_str().unwrap());
    let replay = || dsh(dir.path(), &["run", "--config", config, "--replay", cassette, TASK]);
    let first = replay();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    // The child ran, on the recorded model.
    assert!(stderr.contains("↳ subagent"), "{stderr}");
    assert!(stderr.contains(" completed"), "{stderr}");
    let stdout = String::from_utf8_lossy(&first.stdout).into_owned();
    insta::assert_snapshot!("delegation_answer", stdout);
    // Every replay is the same run.
    assert_eq!(String::from_utf8_lossy(&replay().stdout), stdout);

    let show = dsh(dir.path(), &["cassette", "show", cassette]);
    let text = String::from_utf8_lossy(&show.stdout).replace(cassette, "delegation.jsonl");
    insta::assert_snapshot!("delegation_show", text);
}
