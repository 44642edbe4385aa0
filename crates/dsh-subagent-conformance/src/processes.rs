//! The processes a cell leaves behind: on Linux, every descendant of this
//! process (and every member of a process group one of them led) that
//! appeared while the cell ran, read from `/proc`. Zombies count as gone,
//! as the ACP provider's release counts them. Elsewhere nothing is seen.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

/// One process, as `/proc/<pid>/stat` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    zombie: bool,
    name: String,
}

/// The processes of one cell.
#[derive(Debug)]
pub(crate) struct Processes {
    me: i32,
    my_group: i32,
    /// Descendants that were there before the cell (another test's).
    baseline: BTreeSet<i32>,
    /// Descendants seen while the cell ran, and the groups they are in.
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    pids: BTreeSet<i32>,
    groups: BTreeSet<i32>,
}

impl Processes {
    /// Takes the descendants already running as the baseline.
    pub(crate) fn start() -> Self {
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        let all = scan();
        let my_group = all.iter().find(|p| p.pid == me).map_or(0, |p| p.pgid);
        let baseline = descendants(&all, me).map(|p| p.pid).collect();
        Self {
            me,
            my_group,
            baseline,
            seen: Mutex::default(),
        }
    }

    /// Records the descendants running now (a published child's process).
    pub(crate) fn sample(&self) {
        let all = scan();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for process in descendants(&all, self.me).filter(|p| !self.baseline.contains(&p.pid)) {
            seen.pids.insert(process.pid);
            if process.pgid != self.my_group {
                seen.groups.insert(process.pgid);
            }
        }
    }

    /// The processes of the cell still running: `<pid> (<name>)` each.
    pub(crate) fn remaining(&self) -> Vec<(i32, String)> {
        self.sample();
        let all = scan();
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        all.iter()
            .filter(|p| !p.zombie && p.pid != self.me)
            .filter(|p| seen.pids.contains(&p.pid) || seen.groups.contains(&p.pgid))
            .map(|p| (p.pid, p.name.clone()))
            .collect()
    }

    /// Kills what [`Processes::remaining`] names, so that the kit leaves
    /// nothing behind even when the provider did.
    pub(crate) fn kill_remaining(&self) {
        #[cfg(target_os = "linux")]
        for (pid, _) in self.remaining() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// The processes that descend from `root`.
fn descendants(all: &[Proc], root: i32) -> impl Iterator<Item = &Proc> {
    let mut family = BTreeSet::from([root]);
    // Parents come and go in any order in /proc: grow until nothing joins.
    loop {
        let before = family.len();
        for process in all {
            if family.contains(&process.ppid) {
                family.insert(process.pid);
            }
        }
        if family.len() == before {
            break;
        }
    }
    all.iter().filter(move |p| p.pid != root && family.contains(&p.pid))
}

/// Every process `/proc` shows (none where there is no `/proc`).
fn scan() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| parse_stat(pid, &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// `<pid> (<name>) <state> <ppid> <pgid> …`; the name may hold anything,
/// so the fields are read after its last `)`.
fn parse_stat(pid: i32, stat: &str) -> Option<Proc> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_owned();
    let mut fields = stat.get(close + 1..)?.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        pgid,
        zombie: state == "Z" || state == "X",
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_is_read_whole() {
        let process = parse_stat(42, "42 (a (b) c) S 7 42 42 0").unwrap();
        assert_eq!(
            process,
            Proc {
                pid: 42,
                ppid: 7,
                pgid: 42,
                zombie: false,
                name: "a (b) c".into()
            }
        );
        assert!(parse_stat(1, "1 (x) Z 0 1").unwrap().zombie);
        assert_eq!(parse_stat(1, "garbage"), None);
    }

    #[test]
    fn descendants_are_found_through_every_generation() {
        let p = |pid, ppid| Proc {
            pid,
            ppid,
            pgid: pid,
            zombie: false,
            name: String::new(),
        };
        let all = [p(30, 20), p(20, 10), p(10, 1), p(40, 1)];
        let found: Vec<i32> = descendants(&all, 10).map(|p| p.pid).collect();
        assert_eq!(found, [30, 20]);
    }
}
