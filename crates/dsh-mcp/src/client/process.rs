//! The server process, on `dsh-process` (shared with the ACP provider's
//! children): spawned in its own process group, watched for exit, and torn
//! down as a whole group — its stdin closed (by the caller, which owns the
//! pipe), then SIGTERM, then SIGKILL — with zombies counted as gone and our
//! own orphans reaped when we are PID 1 or a subreaper. Unlike an ACP
//! child, an MCP server inherits the environment: it is the user's own
//! tool, often needing the user's credentials.

use std::fmt;
use std::time::Duration;

use dsh_process::{Child, ChildSpec, ExitInfo, Ladder, Program, SpawnError, TeardownError};
use tokio::process::{ChildStdin, ChildStdout};

use crate::client::options::KILL_WAIT;
use crate::wording;

/// How many bytes of the server's stderr a diagnostic may quote (the tail).
const STDERR_TAIL_BYTES: usize = 512;

/// How long a description of an ended process waits for its stderr to
/// close (a grandchild may hold it open).
const STDERR_CLOSE_WAIT: Duration = Duration::from_millis(500);

/// A running server process, and the ladder of its teardown.
pub(crate) struct ServerProcess {
    child: Child,
    ladder: Ladder,
}

impl ServerProcess {
    /// Spawns server `name`'s `program` in a new process group, launched as
    /// its [`Launch`](dsh_process::Launch) says (by default the inherited
    /// environment less the withheld variables, the variables set on top, in
    /// our working directory); returns it with its stdin and stdout.
    pub(crate) fn spawn(name: &str, program: &Program) -> std::io::Result<(Self, ChildStdin, ChildStdout)> {
        let server = name.to_owned();
        let (child, pipes) = ChildSpec::of(program)
            .stderr_tail_bytes(STDERR_TAIL_BYTES)
            .log_stderr(move |text| tracing::debug!(target: "dsh_mcp::server_stderr", server = %server, "{text}"))
            .spawn()
            .map_err(|error| match error {
                SpawnError::Io(error) => error,
                _ => std::io::Error::other(wording::PIPES_UNAVAILABLE),
            })?;
        let ladder = program.launch.teardown;
        Ok((Self { child, ladder }, pipes.stdin, pipes.stdout))
    }

    /// How the direct process ended, if it has.
    pub(crate) fn exit(&self) -> Option<ExitInfo> {
        self.child.exit()
    }

    /// Resolves when the direct process has ended.
    pub(crate) async fn exited(&self) -> Option<ExitInfo> {
        self.child.exited().await
    }

    /// How the process ended, in words, with the last stderr line when there
    /// is one. Once the process has ended, its stderr is read to its close
    /// first (for at most [`STDERR_CLOSE_WAIT`]): its exit can be seen before
    /// the last line it wrote has been read.
    pub(crate) async fn describe_exit(&self) -> String {
        let exit = self.exit();
        let how = wording::exited_with(exit.as_ref().map(|info| info as &dyn fmt::Display));
        let tail = match exit {
            Some(_) => self.child.stderr_tail_after_close(STDERR_CLOSE_WAIT).await,
            None => self.child.stderr_tail(),
        };
        match tail.last_line() {
            Some(line) => wording::with_last_stderr(&how, &line),
            None => how,
        }
    }

    /// With stdin already closed: waits the launch's `eof_grace`, then
    /// SIGTERMs the group and waits its `term_grace`, then SIGKILLs it.
    /// Returns once the direct process is reaped and nothing of the group
    /// still runs.
    pub(crate) async fn teardown(&self) -> Result<(), TeardownError> {
        self.child.teardown(&self.ladder).await.map(drop)
    }

    /// Tears the group down without a grace (a server that failed to
    /// start): SIGKILL at once, once stdin is closed.
    pub(crate) async fn kill(&self) -> Result<(), TeardownError> {
        let ladder = Ladder::new(Duration::ZERO, Duration::ZERO).kill_wait(KILL_WAIT);
        self.child.teardown(&ladder).await.map(drop)
    }
}
