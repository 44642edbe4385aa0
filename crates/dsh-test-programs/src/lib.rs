//! The programs dsh's tests run as child processes, kept out of the
//! published crates (this crate is never published, and no published
//! crate's package ships a test program):
//!
//! - `acp-fault-agent`: an ACP agent that misbehaves on purpose, one fault
//!   per mode (`dsh-subagent-acp`'s tests);
//! - `mcp-test-server`: a small MCP server on stdio (`dsh-mcp`'s and
//!   `dsh`'s tests);
//! - `mcp-conformance-client`: dsh's MCP client as the official conformance
//!   suite drives it (`scripts/mcp-conformance.sh`);
//! - `record-live-cassettes`: records `dsh-llm`'s cassettes of real traffic
//!   from a live server (`scripts/record-cassettes.sh`), which its
//!   `tests/recorded.rs` replays.
//!
//! Each program's own documentation is at the top of its source in
//! `src/bin/`. A test that depends on this crate gets a program's path with
//! [`Program::path`]. Cargo gives a test the path of its own package's
//! binaries only (`CARGO_BIN_EXE_<name>`), so the first call in a process
//! builds this crate's programs, in the test's profile, into
//! `test-programs/` under the test's own target directory (a no-op when
//! they are fresh). A directory of their own: built alone, the programs'
//! dependencies have other features than in the suite's build, and sharing
//! a directory would rebuild them each time one build follows the other.
//! `.ci/run` builds them there before the suites run:
//!
//! ```sh
//! cargo build -p dsh-test-programs --bins --target-dir target/test-programs
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One of the test programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// `acp-fault-agent <mode> [flags]`: a faulty ACP agent.
    AcpFaultAgent,
    /// `mcp-test-server [flags]`: a small MCP server on stdio.
    McpTestServer,
    /// `mcp-conformance-client <server URL>`: the conformance suite's client.
    McpConformanceClient,
}

impl Program {
    /// The program's file name.
    pub fn name(self) -> &'static str {
        match self {
            Self::AcpFaultAgent => "acp-fault-agent",
            Self::McpTestServer => "mcp-test-server",
            Self::McpConformanceClient => "mcp-conformance-client",
        }
    }

    /// The program's path, built and fresh: under `test-programs/` in the
    /// calling test's target directory, in its profile.
    ///
    /// # Panics
    ///
    /// When the calling executable is not in a Cargo target directory, or
    /// the build fails: a test cannot run without its program.
    pub fn path(self) -> PathBuf {
        match built() {
            Ok(dir) => dir.join(self.name()),
            Err(error) => panic!("the test programs of dsh-test-programs are not available: {error}"),
        }
    }
}

/// The directory holding the built programs, once they are built (once
/// per process).
fn built() -> &'static Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(build)
}

/// A directory inside the workspace being tested, found when the test runs
/// (never a path baked in when this crate was built, which would name
/// another checkout once a target directory is shared or copied): the
/// package directory `cargo test` gives its test, else the working directory.
fn workspace_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Builds the programs for the calling test: a test binary runs from
/// `<target>/<profile dir>/deps/`, and the programs land in
/// `<target>/test-programs/<profile dir>/`.
fn build() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|error| format!("cannot find the running test: {error}"))?;
    let profile_dir = exe
        .parent()
        .filter(|deps| deps.file_name().is_some_and(|name| name == "deps"))
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} is not in a Cargo target directory's deps/", exe.display()))?;
    let (Some(target_dir), Some(profile_dir_name)) = (profile_dir.parent(), profile_dir.file_name()) else {
        return Err(format!("{} is not in a Cargo target directory", profile_dir.display()));
    };
    let target_dir = target_dir.join("test-programs");
    // The `dev` profile's directory is `debug`; any other is named after its profile.
    let profile = match profile_dir_name.to_str() {
        Some("debug") | None => "dev",
        Some(name) => name,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--package",
            "dsh-test-programs",
            "--bins",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(workspace_dir())
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build --package dsh-test-programs --bins failed ({status})"
        ));
    }
    Ok(target_dir.join(profile_dir_name))
}
