//! How long dsh keeps what it writes to its data directory: the
//! transcripts in `<data-dir>/agents/`, one per agent (the crate README's
//! "What is kept on disk" is the policy as a user reads it).
//!
//! - **An MCP session's transcripts go with the session.** When a `dsh mcp`
//!   session ends (stdin closed, `DELETE`, idle timeout, shutdown), the
//!   transcripts of its calling agent and of every agent below it are
//!   removed once its background tasks are released: nothing can continue
//!   those children any more. `--keep-transcripts` keeps them.
//! - **The rest is bounded by `[data]`**: a transcript not written for
//!   `max_age` is removed, and past `max_size` the least recently written
//!   go first. `dsh run` sweeps when its run ends; `dsh acp` (with
//!   `--data-dir`) and `dsh mcp` sweep as they start and then every
//!   [`SWEEP_EVERY`].
//! - **Nothing in use is removed**: a sweep skips every transcript of an
//!   agent this process holds (an open ACP or MCP session's agent, a child
//!   while it runs) and every transcript written within the last
//!   [`IN_USE`], which covers what another dsh on the same directory is
//!   writing. So a run, a session and a continuation keep their transcript
//!   while they need it, and a resume (`dsh run --resume`, `session/load`,
//!   `send_message` to an idle child) finds any transcript the policy keeps.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use dsh_subagent::SubagentEvent;
use dsh_tools::AgentId;

use crate::wording;

/// A transcript written within this long is in use, whoever writes it: no
/// sweep removes it.
pub(crate) const IN_USE: Duration = Duration::from_secs(3600);

/// How often a long-running `dsh` (`acp`, `mcp`) sweeps its data directory.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// `[data]`: the bounds on the transcripts a sweep keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DataPolicy {
    /// A transcript not written for this long is removed; `None` keeps them
    /// whatever their age.
    pub(crate) max_age: Option<Duration>,
    /// Past this many bytes of transcripts the least recently written are
    /// removed; `None` bounds no size.
    pub(crate) max_size: Option<u64>,
}

impl DataPolicy {
    /// dsh's default `max_age`: 30 days.
    pub(crate) const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
    /// dsh's default `max_size`: 1 GiB.
    pub(crate) const DEFAULT_MAX_SIZE: u64 = 1 << 30;
}

impl Default for DataPolicy {
    fn default() -> Self {
        Self {
            max_age: Some(Self::DEFAULT_MAX_AGE),
            max_size: Some(Self::DEFAULT_MAX_SIZE),
        }
    }
}

/// What a sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Transcripts removed.
    pub(crate) files: usize,
    /// Their bytes.
    pub(crate) bytes: u64,
}

/// One transcript as a sweep sees it.
struct Found {
    path: PathBuf,
    modified: SystemTime,
    bytes: u64,
    /// Held by this process, or written within [`IN_USE`] of `now`.
    in_use: bool,
}

/// Applies `policy` to the transcripts of `data_dir` as of `now`: removes
/// every one older than `max_age`, then the least recently written until
/// the rest fit in `max_size`. A transcript for which `held` is true (its
/// agent's id), or written within [`IN_USE`] of `now`, is never removed (it
/// still counts toward the size). Files that are not transcripts are left
/// alone; a directory that is not there holds nothing to sweep.
pub(crate) fn sweep(
    data_dir: &Path,
    policy: DataPolicy,
    now: SystemTime,
    held: impl Fn(&str) -> bool,
) -> std::io::Result<Swept> {
    let dir = data_dir.join("agents");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Swept::default()),
        Err(error) => return Err(error),
    };
    let age = |modified: SystemTime| now.duration_since(modified).unwrap_or_default();
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let Some(id) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let metadata = entry.metadata()?;
        if !metadata.is_file() {
            continue;
        }
        let modified = metadata.modified()?;
        found.push(Found {
            in_use: held(id) || age(modified) < IN_USE,
            path,
            modified,
            bytes: metadata.len(),
        });
    }
    // Least recently written first: the order both bounds remove in.
    found.sort_by_key(|found| found.modified);
    let mut total: u64 = found.iter().map(|found| found.bytes).sum();
    let mut swept = Swept::default();
    for found in found.iter().filter(|found| !found.in_use) {
        let expired = policy.max_age.is_some_and(|max| age(found.modified) > max);
        let over = policy.max_size.is_some_and(|max| total > max);
        if !expired && !over {
            continue;
        }
        match std::fs::remove_file(&found.path) {
            Ok(()) => {}
            // Removed meanwhile (by another dsh's sweep): gone either way.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        total -= found.bytes;
        swept.files += 1;
        swept.bytes += found.bytes;
    }
    Ok(swept)
}

/// What this process holds and tracks of its data directory.
#[derive(Default)]
struct State {
    /// Agents whose transcripts no sweep may remove, with how many holds
    /// each has (a session's hold, a run in flight).
    held: HashMap<AgentId, usize>,
    /// With session transcripts removed at the session's end: the session
    /// (its calling agent) each agent below a session belongs to.
    sessions: Option<HashMap<AgentId, AgentId>>,
}

/// The retention of one data directory: the policy, the agents this process
/// holds, and (for `dsh mcp`) which session each agent belongs to.
pub(crate) struct Retention {
    data_dir: PathBuf,
    policy: DataPolicy,
    state: Mutex<State>,
}

impl Retention {
    /// The retention of `data_dir` under `policy`; no session's transcripts
    /// are removed at its end until [`Retention::remove_with_sessions`].
    pub(crate) fn new(data_dir: PathBuf, policy: DataPolicy) -> Self {
        Self {
            data_dir,
            policy,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on, a session's transcripts go with it
    /// ([`Retention::end_session`]).
    pub(crate) fn remove_with_sessions(&self) {
        self.lock().sessions.get_or_insert_with(HashMap::new);
    }

    /// Holds `agent`'s transcript until the returned guard drops: no sweep
    /// removes it meanwhile. A session holds its agent while it is open.
    pub(crate) fn hold(self: &Arc<Self>, agent: &AgentId) -> Hold {
        *self.lock().held.entry(agent.clone()).or_default() += 1;
        Hold {
            retention: Arc::downgrade(self),
            agent: agent.clone(),
        }
    }

    fn release(&self, agent: &AgentId) {
        let mut state = self.lock();
        if let Some(count) = state.held.get_mut(agent) {
            *count -= 1;
            if *count == 0 {
                state.held.remove(agent);
            }
        }
    }

    /// Opens a session whose transcripts go with it: its calling agent and
    /// every agent started below it ([`Retention::child_event`]).
    pub(crate) fn open_session(&self, session: &AgentId) {
        if let Some(sessions) = &mut self.lock().sessions {
            sessions.insert(session.clone(), session.clone());
        }
    }

    /// Hears the service's run events: a child holds its transcript while
    /// it runs, and joins its parent's session.
    pub(crate) fn child_event(&self, event: &SubagentEvent) {
        let mut state = self.lock();
        match event {
            SubagentEvent::RunStarted(run) => {
                let child = AgentId::new(run.id.as_str());
                *state.held.entry(child.clone()).or_default() += 1;
                if let Some(sessions) = &mut state.sessions
                    && let Some(session) = sessions.get(&run.parent).cloned()
                {
                    sessions.insert(child, session);
                }
            }
            SubagentEvent::RunEnded(end) => {
                drop(state);
                self.release(&AgentId::new(end.run.id.as_str()));
            }
            _ => {}
        }
    }

    /// Ends a session whose transcripts go with it: removes the transcripts
    /// of its calling agent and of every agent below it. Call it once the
    /// session's tasks are released. Returns what was removed.
    pub(crate) fn end_session(&self, session: &AgentId) -> std::io::Result<Swept> {
        let members: Vec<AgentId> = {
            let mut state = self.lock();
            let Some(sessions) = &mut state.sessions else {
                return Ok(Swept::default());
            };
            let members = sessions
                .iter()
                .filter(|(_, of)| *of == session)
                .map(|(agent, _)| agent.clone())
                .collect();
            sessions.retain(|_, of| of != session);
            members
        };
        let mut swept = Swept::default();
        for agent in members {
            let path = dsh_agent::transcript::transcript_path(&self.data_dir, &agent);
            let bytes = std::fs::metadata(&path).map_or(0, |metadata| metadata.len());
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    swept.files += 1;
                    swept.bytes += bytes;
                }
                // An ACP child keeps no transcript here, and a sweep may
                // have taken an old one already.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        Ok(swept)
    }

    /// Sweeps the data directory now ([`sweep`]), off the runtime's
    /// threads; what was removed is logged, and so is a sweep that failed.
    pub(crate) async fn sweep(self: &Arc<Self>) {
        let retention = self.clone();
        let swept = tokio::task::spawn_blocking(move || {
            let held: HashSet<String> = retention.lock().held.keys().map(|agent| agent.to_string()).collect();
            sweep(&retention.data_dir, retention.policy, SystemTime::now(), |id| {
                held.contains(id)
            })
        })
        .await;
        match swept {
            Ok(Ok(swept)) if swept.files > 0 => {
                tracing::info!("{}", wording::data_swept(&self.data_dir, swept.files, swept.bytes));
            }
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!("{}", wording::data_sweep_failed(&self.data_dir, &error)),
            Err(error) => tracing::warn!("{}", wording::data_sweep_failed(&self.data_dir, &error)),
        }
    }

    /// Sweeps now and then every [`SWEEP_EVERY`] while the retention lives,
    /// for a long-running `dsh`.
    pub(crate) fn sweep_periodically(self: &Arc<Self>) {
        let retention = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(SWEEP_EVERY);
            loop {
                every.tick().await;
                let Some(retention) = Weak::upgrade(&retention) else {
                    return;
                };
                retention.sweep().await;
            }
        });
    }
}

/// An agent's transcript held from sweeps ([`Retention::hold`]) until dropped.
pub(crate) struct Hold {
    retention: Weak<Retention>,
    agent: AgentId,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(retention) = self.retention.upgrade() {
            retention.release(&self.agent);
        }
    }
}

#[cfg(test)]
mod tests;
