//! The child process, on `dsh-process`: spawned in its own process group
//! with a scrubbed environment, watched for exit, and torn down as a whole
//! group. What is ACP's own here: the spec built from the config, the
//! switch that closes stdin (the protocol writer owns the pipe), and this
//! provider's texts for a failed teardown.

use std::path::Path;
use std::time::Duration;

use dsh_process::{Child, ChildSpec, ExitInfo, Ladder, Pipes, SpawnError, Teardown, TeardownError};
use tokio_util::sync::CancellationToken;

use crate::config::AcpConfig;
use crate::wording;

/// How many bytes of the child's stderr a diagnostic may quote (the tail).
const STDERR_TAIL_BYTES: usize = 1024;

/// What to run for `config` in `cwd`: [`BASE_ENV`](dsh_process::BASE_ENV) and the configured
/// names passed on from the parent (less the withheld ones), then the explicit entries; the child's
/// stderr logged under `dsh_subagent_acp::child_stderr`.
pub(crate) fn spec(config: &AcpConfig, cwd: &Path) -> ChildSpec {
    let mut program = config.program.clone();
    program.launch = program.launch.cwd(cwd);
    ChildSpec::of(&program)
        .stderr_tail_bytes(STDERR_TAIL_BYTES)
        .log_stderr(|text| tracing::debug!(target: "dsh_subagent_acp::child_stderr", "{text}"))
}

/// A running child, and the switch that closes its stdin.
pub(crate) struct ChildProcess {
    child: Child,
    close_stdin: CancellationToken,
}

impl ChildProcess {
    /// Spawns `spec` in a new process group.
    pub(crate) fn spawn(spec: &ChildSpec) -> std::io::Result<(Self, Pipes)> {
        let (child, pipes) = spec.spawn().map_err(|error| match error {
            SpawnError::Io(error) => error,
            // No pipes (unreachable with piped stdio): the shared text.
            other => std::io::Error::other(other.to_string()),
        })?;
        let process = Self {
            child,
            close_stdin: CancellationToken::new(),
        };
        Ok((process, pipes))
    }

    /// The group id (the child's pid).
    pub(crate) fn group_id(&self) -> i32 {
        self.child.group().id()
    }

    /// SIGKILLs the group now, if it may still have members.
    pub(crate) fn kill(&self) {
        if let Err(error) = self.child.group().kill() {
            tracing::warn!("{}", wording::log_cannot_kill(&self.group_id(), &error));
        }
    }

    /// A token that, when cancelled, closes the child's stdin.
    pub(crate) fn stdin_closer(&self) -> CancellationToken {
        self.close_stdin.clone()
    }

    /// How the direct child ended, if it has.
    pub(crate) fn exit(&self) -> Option<ExitInfo> {
        self.child.exit()
    }

    /// Waits up to `limit` for the direct child to end.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> Option<ExitInfo> {
        self.child.wait_exit(limit).await
    }

    /// The tail of the child's stderr as text, after waiting up to `limit`
    /// for stderr to close (so what a dying child wrote last is there).
    pub(crate) async fn stderr_tail(&self, limit: Duration) -> Option<String> {
        self.child.stderr_tail_after_close(limit).await.text()
    }

    /// Closes stdin and waits the ladder's `eof_grace`; then SIGTERMs the
    /// group and waits its `term_grace`; then SIGKILLs it. Returns once the
    /// whole group is gone (zombies left to another reaper count as gone; our
    /// own are reaped).
    pub(crate) async fn teardown(&self, ladder: &Ladder) -> Result<Teardown, String> {
        self.close_stdin.cancel();
        self.child.teardown(ladder).await.map_err(|error| match error {
            TeardownError::Signal { group, error } => wording::cannot_signal(&group, &error),
            TeardownError::SurvivedKill { group, waited } => wording::survived_kill(&group, waited),
            _ => error.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_withheld_variable_is_not_passed_even_when_named_in_pass_env() {
        // Cargo sets both for every test run.
        let config = AcpConfig::new("agent")
            .pass_env("CARGO_MANIFEST_DIR")
            .pass_env("CARGO_PKG_NAME")
            .withhold_env("CARGO_MANIFEST_DIR");
        let env = spec(&config, Path::new("/")).child_env();
        assert!(!env.contains_key(std::ffi::OsStr::new("CARGO_MANIFEST_DIR")));
        assert!(env.contains_key(std::ffi::OsStr::new("CARGO_PKG_NAME")));
    }
}
