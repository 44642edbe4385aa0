//! What to run, and the running child: its exit, its stderr tail and its
//! process group.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::{
    DEFAULT_EOF_GRACE, DEFAULT_TERM_GRACE, Environment, ExitInfo, Ladder, Launch, ProcessGroup, Program, StderrTail,
    wording,
};

/// How many bytes of stderr a child keeps by default
/// ([`ChildSpec::stderr_tail_bytes`]).
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 1024;

/// What the child writes to stderr, chunk by chunk (lossy UTF-8, trailing
/// whitespace trimmed), for the caller's log.
type StderrLog = Arc<dyn Fn(&str) + Send + Sync>;

/// What to run: the program, its arguments, how it is launched and
/// released ([`Launch`]), and how much of its stderr to keep.
#[derive(Clone)]
pub struct ChildSpec {
    program: OsString,
    args: Vec<OsString>,
    launch: Launch,
    stderr_tail_bytes: usize,
    stderr_log: Option<StderrLog>,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("environment", &self.launch.environment)
            .field("set", &self.launch.env.iter().map(|(key, _)| key).collect::<Vec<_>>())
            .field("withheld", &self.launch.withheld_env)
            .field("cwd", &self.launch.cwd)
            .field("teardown", &self.launch.teardown)
            .field("stderr_tail_bytes", &self.stderr_tail_bytes)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// Runs `program` with no arguments, the parent's environment
    /// ([`Environment::Inherited`]) and the parent's working directory, torn
    /// down on the default graces ([`DEFAULT_EOF_GRACE`],
    /// [`DEFAULT_TERM_GRACE`], [`DEFAULT_KILL_WAIT`](crate::DEFAULT_KILL_WAIT)).
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            launch: Launch::new(
                Environment::Inherited,
                Ladder::new(DEFAULT_EOF_GRACE, DEFAULT_TERM_GRACE),
            ),
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
            stderr_log: None,
        }
    }

    /// Runs `program`: its command, its arguments and its launch.
    pub fn of(program: &Program) -> Self {
        Self::new(&program.command)
            .args(&program.args)
            .launch(program.launch.clone())
    }

    /// Appends arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// How the child is launched and released: its environment, working
    /// directory and teardown graces, all at once.
    #[must_use]
    pub fn launch(mut self, launch: Launch) -> Self {
        self.launch = launch;
        self
    }

    /// Where the environment comes from ([`Launch::environment`]).
    #[must_use]
    pub fn environment(mut self, environment: Environment) -> Self {
        self.launch.environment = environment;
        self
    }

    /// Sets one variable explicitly, on top of the policy's (it wins; see
    /// [`Launch::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.launch = self.launch.env(key, value);
        self
    }

    /// Withholds one of the parent's variables (see [`Launch::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, key: impl Into<String>) -> Self {
        self.launch = self.launch.withhold_env(key);
        self
    }

    /// The working directory (default: the parent's).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.launch = self.launch.cwd(cwd);
        self
    }

    /// How many bytes of stderr to keep for [`Child::stderr_tail`] (default
    /// [`DEFAULT_STDERR_TAIL_BYTES`]).
    #[must_use]
    pub fn stderr_tail_bytes(mut self, bytes: usize) -> Self {
        self.stderr_tail_bytes = bytes;
        self
    }

    /// Hands each chunk the child writes to stderr (lossy UTF-8, trailing
    /// whitespace trimmed) to `log`, so the caller logs it under its own
    /// `tracing` target.
    #[must_use]
    pub fn log_stderr(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.stderr_log = Some(Arc::new(log));
        self
    }

    /// The variables the child starts with: the policy's, read from this
    /// process's environment, less the withheld ones, then the explicit ones.
    pub fn child_env(&self) -> BTreeMap<OsString, OsString> {
        self.launch.environment.resolve(
            &self.launch.env,
            &self.launch.withheld_env,
            |name| std::env::var_os(name),
            || std::env::vars_os().collect(),
        )
    }

    /// Spawns the program in a new process group (its pid is the group id),
    /// with piped stdio, watched for its exit, its stderr kept as a tail.
    /// Needs a tokio runtime (it spawns the waiter and the stderr reader).
    pub fn spawn(&self) -> Result<(Child, Pipes), SpawnError> {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        match &self.launch.environment {
            Environment::Inherited => {
                for name in &self.launch.withheld_env {
                    command.env_remove(name);
                }
                command.envs(self.launch.env.iter().cloned())
            }
            Environment::Scrubbed { .. } => command.env_clear().envs(self.child_env()),
        };
        if let Some(cwd) = &self.launch.cwd {
            command.current_dir(cwd);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(SpawnError::Io)?;
        let (Some(pid), Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Unreachable with piped stdio; never leave the process behind.
            let _ = child.start_kill();
            return Err(SpawnError::PipesUnavailable);
        };
        let group = ProcessGroup::led_by(pid as i32);
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            match child.wait().await {
                Ok(status) => {
                    let _ = exit_tx.send(Some(ExitInfo::from(status)));
                }
                Err(error) => tracing::warn!(pid, "{}", wording::log_wait_failed(&error)),
            }
        });
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let (sink, bound, log) = (tail.clone(), self.stderr_tail_bytes, self.stderr_log.clone());
        let (stderr_done_tx, stderr_done) = watch::channel(false);
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
                let chunk = &buffer[..read];
                if let Some(log) = &log {
                    log(String::from_utf8_lossy(chunk).trim_end());
                }
                sink.lock().unwrap_or_else(PoisonError::into_inner).push(chunk, bound);
            }
            let _ = stderr_done_tx.send(true);
        });
        let child = Child {
            group,
            exit,
            stderr: tail,
            stderr_done,
        };
        Ok((child, Pipes { stdin, stdout }))
    }
}

/// Why a child could not be spawned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The system could not run the program (not found, not executable, …).
    #[error(transparent)]
    Io(std::io::Error),
    /// The piped stdio did not come back from the spawn (the process was killed).
    #[error("{}", wording::PIPES_UNAVAILABLE)]
    PipesUnavailable,
}

/// The child's stdin and stdout, for the caller's protocol. Dropping
/// `stdin` is how the child learns its input has ended (the first rung of
/// [`Child::teardown`]).
#[derive(Debug)]
pub struct Pipes {
    /// The child's standard input.
    pub stdin: ChildStdin,
    /// The child's standard output.
    pub stdout: ChildStdout,
}

/// A running child: its process group, its exit, and its stderr tail.
/// Dropping it SIGKILLs the group unless the group was seen gone.
#[derive(Debug)]
pub struct Child {
    pub(crate) group: ProcessGroup,
    pub(crate) exit: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<Mutex<StderrTail>>,
    stderr_done: watch::Receiver<bool>,
}

impl Child {
    /// The child's process group.
    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    /// How the direct child ended, if it has.
    pub fn exit(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Resolves when the direct child has ended: with how, or `None` when
    /// its status could not be read (it is gone all the same).
    pub async fn exited(&self) -> Option<ExitInfo> {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(info) => *info,
            Err(_) => None,
        }
    }

    /// Waits up to `limit` for the direct child to end.
    pub async fn wait_exit(&self, limit: Duration) -> Option<ExitInfo> {
        match tokio::time::timeout(limit, self.exited()).await {
            Ok(Some(info)) => Some(info),
            _ => self.exit(),
        }
    }

    /// What the child has written to stderr so far (the tail).
    pub fn stderr_tail(&self) -> StderrTail {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The tail after waiting up to `limit` for stderr to close, so what a
    /// dying child wrote last is there.
    pub async fn stderr_tail_after_close(&self, limit: Duration) -> StderrTail {
        let mut done = self.stderr_done.clone();
        let _ = tokio::time::timeout(limit, done.wait_for(|done| *done)).await;
        self.stderr_tail()
    }
}
