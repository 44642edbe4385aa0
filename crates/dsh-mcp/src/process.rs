//! The server process: spawned in its own process group, watched for exit,
//! and torn down as a whole group.
//!
//! The same approach as the ACP provider's child (`dsh-subagent-acp`'s
//! `process` module), cut down to what an MCP server needs: close stdin,
//! then SIGTERM, then SIGKILL to the group. Unlike an ACP child, an MCP
//! server inherits the environment: it is the user's own tool, often
//! needing the user's credentials.

use std::fmt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::wording;

/// How many bytes of the server's stderr a diagnostic may quote (the tail).
const STDERR_TAIL_BYTES: usize = 512;

/// How often a group whose direct child has exited is looked at again.
const POLL: Duration = Duration::from_millis(10);

/// How long the group may take to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How the server's direct process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExitInfo(ExitStatus);

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use std::os::unix::process::ExitStatusExt;
        match (self.0.code(), self.0.signal()) {
            (Some(code), _) => f.write_str(&wording::exit_code(code)),
            (None, Some(signal)) => match Signal::try_from(signal) {
                Ok(signal) => f.write_str(&wording::killed_by_signal(&signal)),
                Err(_) => f.write_str(&wording::killed_by_signal(&signal)),
            },
            (None, None) => f.write_str(wording::UNKNOWN_EXIT),
        }
    }
}

/// The process group; dropping it before it is seen empty kills it.
struct ProcessGroup {
    pgid: Pid,
    gone: AtomicBool,
}

impl ProcessGroup {
    /// Sends `signal` (`None`: only checks existence); `Ok(false)` once the group is empty.
    fn signal(&self, signal: Option<Signal>) -> Result<bool, Errno> {
        if self.gone.load(Ordering::Acquire) {
            return Ok(false);
        }
        match killpg(self.pgid, signal) {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => {
                self.gone.store(true, Ordering::Release);
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.gone.load(Ordering::Acquire) {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// A running server process.
pub(crate) struct ServerProcess {
    group: ProcessGroup,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl ServerProcess {
    /// Spawns server `name`'s `program` in a new process group; returns it
    /// with its stdin and stdout.
    pub(crate) fn spawn(
        name: &str,
        program: &str,
        args: &[String],
    ) -> std::io::Result<(Self, ChildStdin, ChildStdout)> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let (Some(pid), Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.start_kill();
            return Err(std::io::Error::other(wording::PIPES_UNAVAILABLE));
        };
        let group = ProcessGroup {
            pgid: Pid::from_raw(pid as i32),
            gone: AtomicBool::new(false),
        };
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            if let Ok(status) = child.wait().await {
                let _ = exit_tx.send(Some(ExitInfo(status)));
            }
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let sink = tail.clone();
        let server = name.to_owned();
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
                let chunk = &buffer[..read];
                tracing::debug!(target: "dsh_mcp::server_stderr", server = %server, "{}", String::from_utf8_lossy(chunk).trim_end());
                let mut tail = sink.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend_from_slice(chunk);
                let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                tail.drain(..excess);
            }
        });
        Ok((
            Self {
                group,
                exit,
                stderr: tail,
            },
            stdin,
            stdout,
        ))
    }

    /// How the direct process ended, if it has.
    pub(crate) fn exit(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Resolves when the direct process has ended.
    pub(crate) async fn exited(&self) -> Option<ExitInfo> {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(info) => *info,
            // The reaper ended without a status: the process is gone all the same.
            Err(_) => None,
        }
    }

    /// The last line of what the server wrote to stderr, printable.
    pub(crate) fn stderr_tail(&self) -> Option<String> {
        let bytes = self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let text = String::from_utf8_lossy(&bytes);
        let line = text.lines().map(str::trim).rfind(|line| !line.is_empty())?;
        Some(line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect())
    }

    /// How the process ended, in words, with the last stderr line when there is one.
    pub(crate) fn describe_exit(&self) -> String {
        let exit = self.exit();
        let how = wording::exited_with(exit.as_ref().map(|info| info as &dyn fmt::Display));
        match self.stderr_tail() {
            Some(line) => wording::with_last_stderr(&how, &line),
            None => how,
        }
    }

    /// Waits up to `limit` for the direct process to end and the group to empty.
    async fn wait_gone(&self, limit: Duration) -> Result<bool, Errno> {
        let deadline = tokio::time::Instant::now() + limit;
        if tokio::time::timeout_at(deadline, self.exited()).await.is_err() {
            return Ok(false);
        }
        loop {
            if !self.group.signal(None)? {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// With stdin already closed: waits `eof_grace`, then SIGTERMs the group
    /// and waits `term_grace`, then SIGKILLs it. Returns once the group is gone.
    pub(crate) async fn teardown(&self, eof_grace: Duration, term_grace: Duration) -> Result<(), String> {
        let failed = |error: Errno| wording::cannot_signal(&error);
        if self.wait_gone(eof_grace).await.map_err(failed)? {
            return Ok(());
        }
        self.group.signal(Some(Signal::SIGTERM)).map_err(failed)?;
        if self.wait_gone(term_grace).await.map_err(failed)? {
            return Ok(());
        }
        self.group.signal(Some(Signal::SIGKILL)).map_err(failed)?;
        if self.wait_gone(KILL_WAIT).await.map_err(failed)? {
            return Ok(());
        }
        Err(wording::SURVIVED_KILL.to_owned())
    }
}
