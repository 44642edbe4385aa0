//! The child's process group: signalled as a whole, and looked at through
//! `/proc` so that zombies count as gone and our own orphans are reaped.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// What the system said when it refused to signal a process group: an OS
/// error number, shown as the system names it (`EPERM: Operation not
/// permitted`). Our own type, so that no dependency's type is in this
/// crate's API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SignalError(Errno);

impl SignalError {
    /// The OS error number (`errno`).
    pub fn raw_os_error(&self) -> i32 {
        self.0 as i32
    }

    /// The same error as the standard library's type.
    pub fn os_error(&self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.raw_os_error())
    }
}

/// The child's process group. Signals go to the whole group; once the group
/// is seen empty it is never signalled again (its id may be reused), and
/// dropping a group that was not seen empty SIGKILLs it, so a dropped child
/// leaves nothing running.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Pid,
    gone: AtomicBool,
}

/// The groups of this process's children that may still have members:
/// what [`kill_every_group`] signals when the process must exit at once.
static LIVE: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<i32>> {
    LIVE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SIGKILLs every process group this process started that may still have
/// members, without waiting: for a process that must exit at once (a
/// second Ctrl-C) and so cannot climb each child's teardown ladder, yet
/// must leave nothing running. The kernel collects what it kills.
pub fn kill_every_group() {
    let groups: Vec<i32> = live().iter().copied().collect();
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

impl ProcessGroup {
    /// The group whose leader is `pid`.
    pub(crate) fn led_by(pid: i32) -> Self {
        live().insert(pid);
        Self {
            pgid: Pid::from_raw(pid),
            gone: AtomicBool::new(false),
        }
    }

    /// Marks the group empty: it is never signalled again.
    fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
        live().remove(&self.pgid.as_raw());
    }

    /// The group id (the direct child's pid).
    pub fn id(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// SIGKILLs the group now, if it may still have members: for a caller
    /// that cannot wait for the teardown ladder. The kernel and the child's
    /// waiter collect the processes in the background.
    pub fn kill(&self) -> Result<(), SignalError> {
        self.signal(Some(Signal::SIGKILL)).map(|_| ())
    }

    /// Sends `signal` (or, with `None`, only checks existence) to the group.
    /// `Ok(false)` when the group has no member left.
    pub(crate) fn signal(&self, signal: Option<Signal>) -> Result<bool, SignalError> {
        if self.gone.load(Ordering::Acquire) {
            return Ok(false);
        }
        match killpg(self.pgid, signal) {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => {
                self.mark_gone();
                Ok(false)
            }
            Err(error) => Err(SignalError(error)),
        }
    }

    /// Whether the group has a member that still runs. Zombies do not count:
    /// they have exited and only wait for their parent (or, once orphaned,
    /// for init or the nearest subreaper) to collect them. The ones that are
    /// our own children — orphans reparented to us because we are a
    /// subreaper or PID 1 — are collected here, since nobody else will.
    pub(crate) fn alive(&self) -> Result<bool, SignalError> {
        if !self.signal(None)? {
            return Ok(false);
        }
        let Some(members) = members(self.id()) else {
            return Ok(true);
        };
        let us = nix::unistd::getpid().as_raw();
        for member in &members {
            // The direct child (the group leader) is collected by its own waiter.
            if member.zombie && member.parent == us && member.pid != self.id() {
                let _ = waitpid(Pid::from_raw(member.pid), Some(WaitPidFlag::WNOHANG));
            }
        }
        if members.iter().any(|member| !member.zombie) {
            return Ok(true);
        }
        // Nothing runs: a zombie left to another reaper is not ours to wait for.
        self.mark_gone();
        Ok(false)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.gone.load(Ordering::Acquire) {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
        live().remove(&self.pgid.as_raw());
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
