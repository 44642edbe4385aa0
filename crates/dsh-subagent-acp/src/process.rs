//! The child process: spawned in its own process group with a scrubbed
//! environment, watched for exit, and torn down as a whole group.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::config::AcpConfig;
use crate::wording;

/// Variables of the parent's environment every child keeps: what programs
/// need to run and nothing that is a credential.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
];

/// How many bytes of the child's stderr a diagnostic may quote (the tail).
pub(crate) const STDERR_TAIL_BYTES: usize = 1024;

/// How long the group may take to vanish after SIGKILL before release reports
/// failure. SIGKILL cannot be caught; only a process stuck in the kernel
/// (uninterruptible sleep) outlives it, and zombies count as gone.
pub(crate) const KILL_WAIT: Duration = Duration::from_millis(1000);

/// The longest pause between two looks at a group whose direct child has
/// exited but whose other members have not (they send no event).
const POLL: Duration = Duration::from_millis(10);

/// The first such pause; each later one doubles, up to [`POLL`].
const FIRST_POLL: Duration = Duration::from_micros(250);

/// The environment the child starts with: [`BASE_ENV`] and the configured
/// inherited names from the parent, then the explicit entries.
pub(crate) fn child_env(config: &AcpConfig, lookup: impl Fn(&str) -> Option<OsString>) -> BTreeMap<OsString, OsString> {
    let mut env = BTreeMap::new();
    for name in BASE_ENV
        .iter()
        .copied()
        .chain(config.inherit_env.iter().map(String::as_str))
    {
        if let Some(value) = lookup(name) {
            env.insert(OsString::from(name), value);
        }
    }
    for (key, value) in &config.env {
        env.insert(OsString::from(key), OsString::from(value));
    }
    env
}

/// How the child's direct process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExitInfo(pub(crate) ExitStatus);

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

/// The last bytes the child wrote to stderr.
#[derive(Default)]
pub(crate) struct StderrTail {
    bytes: Vec<u8>,
    total: u64,
}

impl StderrTail {
    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > STDERR_TAIL_BYTES {
            let cut = self.bytes.len() - STDERR_TAIL_BYTES;
            self.bytes.drain(..cut);
        }
    }

    /// The tail as text: lossy UTF-8, terminal escape sequences (colours,
    /// cursor moves, titles) removed, other control characters than newline
    /// and tab replaced, trimmed; `None` when the child wrote nothing.
    pub(crate) fn text(&self) -> Option<String> {
        let text: String = strip_escapes(&String::from_utf8_lossy(&self.bytes))
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let cut = self.total > self.bytes.len() as u64;
        Some(if cut { format!("…{text}") } else { text.to_owned() })
    }
}

/// `text` without ANSI/VT escape sequences: CSI (`ESC [ … final`), OSC
/// (`ESC ] … BEL` or `ESC ] … ESC \`) and two-character escapes. A sequence
/// cut off at the end is dropped.
pub(crate) fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameter and intermediate bytes, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or the string terminator ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// One process of a group, as `/proc/<pid>/stat` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    pid: i32,
    parent: i32,
    zombie: bool,
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ppid pgrp …`. The command
/// name may hold spaces and parentheses, so the fields after it are found
/// from the last `)`.
fn parse_stat(stat: &str) -> Option<(Member, i32)> {
    let (head, tail) = stat.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let mut fields = tail.split_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // `Z` zombie, `X` dead: exited, only waiting to be collected.
    let zombie = matches!(state, "Z" | "X");
    Some((Member { pid, parent, zombie }, group))
}

/// The members of process group `pgid` per `/proc`; `None` where `/proc`
/// cannot be read (then only `killpg` answers).
fn members(pgid: i32) -> Option<Vec<Member>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        // A process may exit between the listing and the read: skip it.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((member, group)) = parse_stat(&stat)
            && group == pgid
        {
            found.push(member);
        }
    }
    Some(found)
}

/// The child's process group. Signals go to the whole group; once the group
/// is seen empty it is never signalled again, and dropping a group that was
/// not seen empty kills it (so a dropped start or run leaves nothing behind).
pub(crate) struct ProcessGroup {
    pgid: Pid,
    gone: AtomicBool,
}

impl ProcessGroup {
    /// Sends `signal` (or, with `None`, only checks existence) to the group.
    /// `Ok(false)` when the group has no member left.
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

    /// The group id (the child's pid).
    pub(crate) fn id(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// Whether the group has a member that still runs. Zombies do not count:
    /// they have exited and only wait for their parent (or, once orphaned,
    /// for init or the nearest subreaper) to collect them. The ones that are
    /// our own children — orphans reparented to us because we are a
    /// subreaper or PID 1 — are collected here, since nobody else will.
    fn alive(&self) -> Result<bool, Errno> {
        if !self.signal(None)? {
            return Ok(false);
        }
        let Some(members) = members(self.pgid.as_raw()) else {
            return Ok(true);
        };
        let us = nix::unistd::getpid().as_raw();
        for member in &members {
            // The direct child (the group leader) is collected by its own waiter.
            if member.zombie && member.parent == us && member.pid != self.pgid.as_raw() {
                let _ = waitpid(Pid::from_raw(member.pid), Some(WaitPidFlag::WNOHANG));
            }
        }
        if members.iter().any(|member| !member.zombie) {
            return Ok(true);
        }
        // Nothing runs: a zombie left to another reaper is not ours to wait for.
        self.gone.store(true, Ordering::Release);
        Ok(false)
    }

    /// SIGKILLs the group now, if it may still have members.
    pub(crate) fn kill(&self) {
        if let Err(error) = self.signal(Some(Signal::SIGKILL)) {
            tracing::warn!("{}", wording::log_cannot_kill(&self.id(), &error));
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

/// How far teardown had to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// The group exited after stdin was closed.
    Eof,
    /// The group exited after SIGTERM.
    Terminated,
    /// The group exited after SIGKILL.
    Killed,
}

/// A running child: its group, its exit, its stderr tail, and the switch that closes its stdin.
pub(crate) struct ChildProcess {
    pub(crate) group: Arc<ProcessGroup>,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<Mutex<StderrTail>>,
    stderr_done: watch::Receiver<bool>,
    close_stdin: tokio_util::sync::CancellationToken,
}

/// The child's pipes for the protocol.
pub(crate) struct ChildPipes {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
}

impl ChildProcess {
    /// Spawns `config.command` in a new process group with a scrubbed environment.
    pub(crate) fn spawn(config: &AcpConfig, cwd: &Path) -> std::io::Result<(Self, ChildPipes)> {
        let mut command = Command::new(&config.command);
        command
            .args(&config.args)
            .env_clear()
            .envs(child_env(config, |name| std::env::var_os(name)))
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(pid), Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Unreachable with piped stdio; never leave the process behind.
            let _ = child.start_kill();
            return Err(std::io::Error::other(wording::PIPES_UNAVAILABLE));
        };
        let group = Arc::new(ProcessGroup {
            pgid: Pid::from_raw(pid as i32),
            gone: AtomicBool::new(false),
        });
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            match status {
                Ok(status) => {
                    let _ = exit_tx.send(Some(ExitInfo(status)));
                }
                Err(error) => tracing::warn!("{}", wording::log_wait_failed(&error)),
            }
        });
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let sink = tail.clone();
        let (stderr_done_tx, stderr_done) = watch::channel(false);
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            loop {
                match stderr.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        let chunk = &buffer[..read];
                        tracing::debug!(target: "dsh_subagent_acp::child_stderr", "{}", String::from_utf8_lossy(chunk).trim_end());
                        sink.lock().unwrap_or_else(PoisonError::into_inner).push(chunk);
                    }
                }
            }
            let _ = stderr_done_tx.send(true);
        });
        let process = Self {
            group,
            exit,
            stderr: tail,
            stderr_done,
            close_stdin: tokio_util::sync::CancellationToken::new(),
        };
        Ok((process, ChildPipes { stdin, stdout }))
    }

    /// A token that, when cancelled, closes the child's stdin.
    pub(crate) fn stdin_closer(&self) -> tokio_util::sync::CancellationToken {
        self.close_stdin.clone()
    }

    /// How the direct child ended, if it has.
    pub(crate) fn exit(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Waits up to `limit` for the direct child to end.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> Option<ExitInfo> {
        let mut exit = self.exit.clone();
        let waited = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(info)) => *info,
            _ => self.exit(),
        }
    }

    /// The tail of the child's stderr, after waiting up to `limit` for stderr to close
    /// (so what a dying child wrote last is there).
    pub(crate) async fn stderr_tail(&self, limit: Duration) -> Option<String> {
        let mut done = self.stderr_done.clone();
        let _ = tokio::time::timeout(limit, done.wait_for(|done| *done)).await;
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).text()
    }

    /// Waits up to `limit` until the direct child is reaped and no member of
    /// the group still runs ([`ProcessGroup::alive`]).
    ///
    /// The direct child's exit is an event (its reaper wakes us), so it is
    /// awaited, not polled: a child that exits at once is seen at once.
    /// Other members of the group send no event; they are looked for after
    /// it, at pauses from [`FIRST_POLL`] doubling up to [`POLL`].
    async fn wait_gone(&self, limit: Duration) -> Result<bool, Errno> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut exit = self.exit.clone();
        // Err: the reaper is gone without a status; the loop below decides.
        if let Err(_elapsed) = tokio::time::timeout_at(deadline, exit.wait_for(Option::is_some)).await {
            return Ok(false);
        }
        let mut pause = FIRST_POLL;
        loop {
            if self.exit().is_some() && !self.group.alive()? {
                return Ok(true);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(POLL);
        }
    }

    /// Closes stdin and waits `eof_grace`; then SIGTERMs the group and waits
    /// `term_grace`; then SIGKILLs it. Returns once the whole group is gone.
    pub(crate) async fn teardown(&self, eof_grace: Duration, term_grace: Duration) -> Result<Teardown, String> {
        let failed = |error: Errno| wording::cannot_signal(&self.group.id(), &error);
        self.close_stdin.cancel();
        if self.wait_gone(eof_grace).await.map_err(failed)? {
            return Ok(Teardown::Eof);
        }
        self.group.signal(Some(Signal::SIGTERM)).map_err(failed)?;
        if self.wait_gone(term_grace).await.map_err(failed)? {
            return Ok(Teardown::Terminated);
        }
        self.group.signal(Some(Signal::SIGKILL)).map_err(failed)?;
        if self.wait_gone(KILL_WAIT).await.map_err(failed)? {
            return Ok(Teardown::Killed);
        }
        Err(wording::survived_kill(&self.group.id(), KILL_WAIT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_scrubbed_then_extended() {
        let config = AcpConfig::new("agent")
            .inherit_env("DSH_API_KEY")
            .env("DSH_MODEL", "m")
            .env("PATH", "/only/here");
        let parent = |name: &str| -> Option<OsString> {
            match name {
                "PATH" => Some("/usr/bin".into()),
                "HOME" => Some("/home/u".into()),
                "AWS_SECRET_ACCESS_KEY" | "OPENAI_API_KEY" => Some("secret".into()),
                "DSH_API_KEY" => Some("k".into()),
                _ => None,
            }
        };
        let env = child_env(&config, parent);
        let keys: Vec<_> = env.keys().map(|k| k.to_string_lossy().into_owned()).collect();
        assert_eq!(keys, ["DSH_API_KEY", "DSH_MODEL", "HOME", "PATH"]);
        assert_eq!(env[&OsString::from("PATH")], "/only/here", "explicit entries win");
    }

    #[test]
    fn escape_sequences_are_stripped() {
        assert_eq!(
            strip_escapes("\u{1b}[2m12:00\u{1b}[0m \u{1b}[1;31mERROR\u{1b}[0m boom"),
            "12:00 ERROR boom"
        );
        assert_eq!(
            strip_escapes("\u{1b}]0;title\u{7}text\u{1b}]8;;x\u{1b}\\link"),
            "textlink"
        );
        assert_eq!(strip_escapes("a\u{1b}=b\u{1b}[3"), "ab");
        assert_eq!(strip_escapes("plain\ttext"), "plain\ttext");
    }

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let (member, group) = parse_stat("4242 (node (x) y) Z 1 4200 4200 0 -1").unwrap();
        assert_eq!(
            (member, group),
            (
                Member {
                    pid: 4242,
                    parent: 1,
                    zombie: true
                },
                4200
            )
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("7 (sh) S 1 7 7").map(|(m, _)| m.zombie), Some(false));
    }

    #[test]
    fn our_own_process_is_a_running_member_of_its_group() {
        let us = nix::unistd::getpid().as_raw();
        let group = nix::unistd::getpgrp().as_raw();
        let members = members(group).unwrap_or_default();
        assert!(members.iter().any(|m| m.pid == us && !m.zombie), "{members:?}");
    }

    #[test]
    fn the_stderr_tail_is_bounded_and_printable() {
        let mut tail = StderrTail::default();
        assert_eq!(tail.text(), None);
        tail.push(b"first\x1b[31m line\x1b[0m\x07\n");
        assert_eq!(tail.text().as_deref(), Some("first line"));
        tail.push(&vec![b'x'; STDERR_TAIL_BYTES * 3]);
        let text = tail.text().unwrap_or_default();
        assert!(text.starts_with('…') && text.len() <= STDERR_TAIL_BYTES + '…'.len_utf8());
    }
}
