//! Every text of this crate a person reads: what is wrong with a node's
//! record, and why a tree could not be loaded.

use std::path::Path;

use crate::node::Problem;

/// A node's problem, in one line.
impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&problem(self))
    }
}

fn problem(problem: &Problem) -> String {
    match problem {
        Problem::Missing { path } => format!("no transcript at {path}"),
        Problem::Unreadable { message } => format!("transcript unreadable: {message}"),
        Problem::Torn { message } => format!("torn transcript: {message}"),
        Problem::Foreign { message } => format!("not this agent's transcript: {message}"),
        Problem::ParentMissing { parent } => format!("its parent {parent} has no transcript here"),
        Problem::Cycle { child } => format!("names {child} as its child, which is already above it; not followed"),
        Problem::TooDeep { limit } => format!("children deeper than {limit} levels are not shown"),
    }
}

/// A transcript whose first entry is not a header.
pub(crate) const NO_HEADER: &str = "its first line is not a transcript header";

/// A transcript whose header names another agent.
pub(crate) fn other_agent(id: &str) -> String {
    format!("its header names agent {id}")
}

/// No agent has a transcript in the data directory.
pub(crate) fn no_agents(dir: &Path) -> String {
    format!("no top-level agent has a transcript in {}", dir.display())
}

/// The agent asked for has no transcript.
pub(crate) fn unknown_agent(id: &str, dir: &Path) -> String {
    format!("no agent {id:?} has a transcript in {}", dir.display())
}

/// An agent id that cannot name a transcript file.
pub(crate) fn bad_agent_id(id: &str) -> String {
    format!("{id:?} is not an agent id (letters, digits, '-', '_', '.' and ':' only)")
}

/// The transcripts' directory could not be listed.
pub(crate) fn unlistable(dir: &Path, error: &std::io::Error) -> String {
    format!("cannot list {}: {error}", dir.display())
}

/// A child whose header names another parent than the one that names it.
pub(crate) fn other_parent(parent: &str) -> String {
    format!("its header names {parent} as its parent")
}

/// Where a child in another process ran, for [`Place::Elsewhere`](crate::Place::Elsewhere):
/// its provider, and its session there when known.
pub(crate) fn ran_elsewhere(provider: &str, session: Option<&str>) -> String {
    match session {
        Some(session) => format!("{provider}, session {session}"),
        None => provider.to_owned(),
    }
}

/// A turn a process stopped resumably (`--no-wait`, a signal).
pub(crate) const STOPPED_RESUMABLY: &str = "stopped resumably; `dsh run --resume` goes on with it";

/// A turn left open that no process runs now: a crash cut it short.
pub(crate) const NOT_RUNNING: &str = "its process ended before the turn did; `dsh run --resume` goes on with it";

/// Where a subagent session that an agent in another process announced
/// ran, for [`Place::Elsewhere`](crate::Place::Elsewhere): a session of
/// that agent (its node's id).
pub(crate) fn announced_by(agent: &str) -> String {
    format!("a subagent session of {agent}")
}
