//! Finding the `dsh` binary that the `dsh acp`, `dsh run` and `dsh tree`
//! rows start, and a command for the rows that start it themselves, with
//! none of the bench's own `dsh` environment ([`dsh_command`]).
//!
//! [`locate_dsh`]: the path in [`DSH_BIN_ENV`] if set (used as it is);
//! otherwise, when the bench was started by Cargo (`cargo run`), it runs
//! `cargo build -p dsh` with the bench's own profile and takes the
//! executable Cargo reports (a no-op when `dsh` is fresh, so the binary is
//! never stale); otherwise the `dsh` next to the bench's own executable, and
//! if that is missing the row fails saying to run
//! `cargo build --release -p dsh` first.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

/// The environment variable that names the `dsh` binary to run (skips the
/// automatic build and the lookup next to the bench).
pub const DSH_BIN_ENV: &str = "DSH_BENCH_DSH_BIN";

/// `cargo build` arguments for the `dsh` binary, reported as JSON (the manifest path follows).
const BUILD_ARGS: [&str; 7] = [
    "build",
    "-p",
    "dsh",
    "--bin",
    "dsh",
    "--message-format=json",
    "--manifest-path",
];

/// Every variable a `dsh` run reads from the environment: an endpoint, key
/// or model, a log filter, a context window, a self-mount marker or a
/// cassette from a `dsh` running the bench.
const DSH_RUN_ENV: [&str; 7] = [
    "DSH_BASE_URL",
    "DSH_API_KEY",
    "DSH_MODEL",
    "DSH_LOG",
    "DSH_PARENT_CONFIGS",
    "DSH_CONTEXT_WINDOW",
    "DSH_CASSETTE",
];

/// A command running the `dsh` at `dsh` with none of the variables a run
/// reads from the bench's environment; a row sets what it needs on top.
pub fn dsh_command(dsh: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(dsh);
    for key in DSH_RUN_ENV {
        command.env_remove(key);
    }
    command
}

/// Where the `dsh` binary comes from; see the [module docs](self).
pub fn locate_dsh() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(DSH_BIN_ENV).filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!("{DSH_BIN_ENV}={} is not a file", path.display()));
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().map_err(|error| format!("cannot find the bench's own executable: {error}"))?;
    let exe_dir = exe.parent().unwrap_or(Path::new("."));
    // `cargo run` sets CARGO_MANIFEST_DIR for the process it starts: read it at
    // run time, so the build targets the checkout being benchmarked, not the
    // one that first compiled this binary.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(|dir| Path::new(&dir).join("../../Cargo.toml"));
    if let (Some(cargo), Some(manifest)) = (std::env::var_os("CARGO"), manifest)
        && manifest.is_file()
    {
        return build_dsh(&cargo, &manifest, exe_dir);
    }
    sibling_dsh(exe_dir)
}

/// The `dsh` next to the bench's executable, or a message saying how to build it.
fn sibling_dsh(exe_dir: &Path) -> Result<PathBuf, String> {
    let path = exe_dir.join("dsh");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no dsh binary at {}: run `cargo build --release -p dsh` first (or set {DSH_BIN_ENV})",
            path.display()
        ))
    }
}

/// The Cargo arguments that build with the profile whose output directory is `exe_dir`.
fn profile_args(exe_dir: &Path) -> Vec<String> {
    match exe_dir.file_name().and_then(|name| name.to_str()) {
        Some("release") => vec!["--release".to_owned()],
        Some("debug") | None => Vec::new(),
        Some(profile) => vec!["--profile".to_owned(), profile.to_owned()],
    }
}

/// Whether `cargo run` set `name` for the bench itself (the package's
/// metadata). A nested `cargo build` must not see these: build scripts
/// (ring's) rerun when they change, so the nested build would rebuild half
/// the tree, and the next plain build would rebuild it back.
fn set_by_cargo_run(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
        ]
        .contains(&name)
}

/// `cargo build -p dsh` with the bench's profile; the executable Cargo reports.
fn build_dsh(cargo: &OsString, manifest: &Path, exe_dir: &Path) -> Result<PathBuf, String> {
    let mut command = std::process::Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_by_cargo_run) {
            command.env_remove(name);
        }
    }
    let output = command
        .args(BUILD_ARGS)
        .arg(manifest)
        .args(profile_args(exe_dir))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run cargo to build dsh: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "`cargo build -p dsh` failed ({}): run `cargo build --release -p dsh` to see why (or set {DSH_BIN_ENV})",
            output.status
        ));
    }
    dsh_executable(&String::from_utf8_lossy(&output.stdout))
        .ok_or_else(|| format!("`cargo build -p dsh` reported no dsh executable (set {DSH_BIN_ENV} to the binary)"))
}

/// The `dsh` executable in Cargo's `--message-format=json` output.
fn dsh_executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact" && message["target"]["name"] == "dsh")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_follows_the_output_directory() {
        assert_eq!(profile_args(Path::new("/t/target/release")), ["--release"]);
        assert!(profile_args(Path::new("/t/target/debug")).is_empty());
        assert_eq!(profile_args(Path::new("/t/target/bench")), ["--profile", "bench"]);
    }

    #[test]
    fn the_nested_build_drops_what_cargo_run_set() {
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_run(name), "{name}");
        }
        for name in ["CARGO_TARGET_DIR", "CARGO_HOME", "PATH", "RUSTFLAGS"] {
            assert!(!set_by_cargo_run(name), "{name}");
        }
    }

    #[test]
    fn cargo_names_the_dsh_executable() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"dsh_agent"},"executable":null}"#,
            "\n",
            "not json\n",
            r#"{"reason":"compiler-artifact","target":{"name":"dsh"},"executable":"/t/release/dsh"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(dsh_executable(messages), Some(PathBuf::from("/t/release/dsh")));
        assert_eq!(dsh_executable(r#"{"reason":"build-finished"}"#), None);
    }

    #[test]
    fn a_missing_sibling_says_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let error = sibling_dsh(dir.path()).unwrap_err();
        assert!(error.contains("cargo build --release -p dsh"), "{error}");
        assert!(error.contains(DSH_BIN_ENV), "{error}");
    }
}
