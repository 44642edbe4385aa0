//! The children a prompt announces as ACP subagent sessions, when its
//! client advertised `clientCapabilities.subagents` (the Subagents RFD; see
//! "The Agent Client Protocol: subagent sessions" in `docs/conformance.md`).
//!
//! Each child of the session agent, at every depth, is announced on its
//! immediate parent's session (a `subagent_update` with its title, task,
//! cancel capability and `running` state) before any update bearing its id;
//! its own text and tool calls then go to its own session; its one terminal
//! state (an `idle` state with a stop reason) follows its last update. A
//! child whose prompt ends before it did is closed there, descendants
//! before parents, so every announced child ends before its parent's
//! `session/prompt` returns.
//!
//! A child may report before its start is announced (it works while its
//! provider returns), and a grandchild may start before its parent is
//! announced: what an agent not yet known reports is held, in order and
//! bounded, until its start tells whether it is announced.
//!
//! Background children (a `run_in_background` delegation, a continuable
//! child) are announced too: `dsh acp` runs its agents with
//! `EndOfRun::WaitForBackground`, so a turn waits for them before it
//! answers, and every announced child ends before its parent's
//! `session/prompt` returns, as the RFD's v1 scope asks.

use std::collections::{HashMap, HashSet, VecDeque};

use dsh_subagent::{RunEndInfo, RunInfo};
use dsh_tools::AgentId;

use super::event::{Change, Ending, Event};

/// The stop reason of a child whose end is not known (its process or its
/// record is gone): ACP names no such stop, and reserves names that begin
/// with `_` for an implementation's own.
pub(crate) const DISCONNECTED_STOP: &str = "_disconnected";

/// The most agents whose reports are held before their start is known.
const MAX_HELD_AGENTS: usize = 256;

/// The most reports held for one of them.
const MAX_HELD_PER_AGENT: usize = 512;

/// The most ended children remembered after their prompt, so that a
/// request with one's id is refused as a subagent session's (the oldest
/// are forgotten first).
const MAX_FORMER: usize = 4096;

/// Where a client's request with a session id that is not an open
/// session's stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// An announced child still running.
    Running,
    /// An announced child that has ended.
    Ended,
    /// No announced child has this id.
    Unknown,
}

/// An announced child.
struct Child {
    /// The session whose prompt streams it.
    root: AgentId,
    /// Its immediate parent (a session agent, or another child).
    parent: AgentId,
    /// Its depth below its session (1 for the session agent's own child).
    depth: u64,
    ended: bool,
}

/// What is held for an agent not yet known, in order.
enum Held {
    /// One of its reports (or its descendants').
    Report(AgentId, Event),
    /// A descendant's start.
    Start(RunInfo),
    /// A descendant's end.
    End(RunEndInfo),
}

/// Where a report of an agent goes.
pub(crate) enum Route {
    /// To this prompt's session (a root): the event, for the child's own
    /// session.
    Send(AgentId, Event),
    /// Nowhere now (held, or not announced).
    Nowhere,
}

/// The announced children of the open prompts, and what is held.
#[derive(Default)]
pub(crate) struct Subagents {
    /// The session agents whose prompt is open.
    sessions: HashSet<AgentId>,
    /// Those whose client advertised `subagents`.
    roots: HashSet<AgentId>,
    children: HashMap<AgentId, Child>,
    /// Agents that are not announced (a child of a session whose client
    /// did not ask, a child past a parent that already ended), nor their
    /// descendants.
    ignored: HashSet<AgentId>,
    /// What is held for each agent not yet known.
    held: HashMap<AgentId, VecDeque<Held>>,
    /// Agents started under an agent not yet known: whose queue their
    /// reports join.
    held_under: HashMap<AgentId, AgentId>,
    /// Whether a held report was dropped (logged once).
    dropped: bool,
    /// Children of prompts that have ended, oldest first (bounded).
    former: VecDeque<AgentId>,
    former_ids: HashSet<AgentId>,
}

impl Subagents {
    /// A session's prompt opened: its children are announced when
    /// `announce` (its client advertised `subagents`).
    pub(crate) fn open(&mut self, root: &AgentId, announce: bool) {
        self.sessions.insert(root.clone());
        if announce {
            self.roots.insert(root.clone());
        }
    }

    /// A session's prompt ended: every child of it still running is
    /// closed (`cancelled` when the turn was, `_disconnected` otherwise),
    /// descendants before parents; the updates to send, in order.
    pub(crate) fn close(&mut self, root: &AgentId, cancelled: bool) -> Vec<Event> {
        self.sessions.remove(root);
        if !self.roots.remove(root) {
            return Vec::new();
        }
        let mut open: Vec<(&AgentId, &Child)> = self
            .children
            .iter()
            .filter(|(_, child)| &child.root == root && !child.ended)
            .collect();
        open.sort_by(|(a_id, a), (b_id, b)| b.depth.cmp(&a.depth).then_with(|| a_id.cmp(b_id)));
        let ending = if cancelled {
            Ending::Cancelled
        } else {
            Ending::Disconnected
        };
        let closing = open
            .into_iter()
            .map(|(id, child)| Event::Subagent {
                parent: child.parent.to_string(),
                child: id.to_string(),
                change: Change::Ended(ending.clone()),
            })
            .collect();
        let ended: Vec<AgentId> = self
            .children
            .iter()
            .filter(|(_, child)| &child.root == root)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ended {
            self.children.remove(&id);
            self.remember(id);
        }
        if self.roots.is_empty() {
            // Nothing can be announced any more: nothing is held for later.
            self.ignored.clear();
            self.held.clear();
            self.held_under.clear();
        }
        closing
    }

    /// Where a client's `session/cancel` (or other request) with `id`
    /// stands, when `id` is no open session's.
    pub(crate) fn known(&self, id: &AgentId) -> Known {
        match self.children.get(id) {
            Some(child) if child.ended => Known::Ended,
            Some(_) => Known::Running,
            None if self.former_ids.contains(id) => Known::Ended,
            None => Known::Unknown,
        }
    }

    /// Remembers a child whose prompt ended, within [`MAX_FORMER`].
    fn remember(&mut self, id: AgentId) {
        if self.former_ids.insert(id.clone()) {
            self.former.push_back(id);
        }
        while self.former.len() > MAX_FORMER {
            if let Some(oldest) = self.former.pop_front() {
                self.former_ids.remove(&oldest);
            }
        }
    }

    /// Where a report of `agent` (no session agent) goes: to its session
    /// when it is announced; held when it is not known yet.
    /// The event is made only when it goes somewhere: a report costs
    /// nothing while no session asked for subagents.
    pub(crate) fn route(&mut self, agent: &AgentId, event: impl FnOnce() -> Event) -> Route {
        if self.roots.is_empty() {
            return Route::Nowhere;
        }
        if let Some(child) = self.children.get(agent) {
            if child.ended {
                return Route::Nowhere;
            }
            return Route::Send(child.root.clone(), in_session(agent, event()));
        }
        if self.ignored.contains(agent) {
            return Route::Nowhere;
        }
        let key = self.held_under.get(agent).unwrap_or(agent).clone();
        self.hold(key, Held::Report(agent.clone(), event()));
        Route::Nowhere
    }

    /// A child started: announced when its parent is a session that asked
    /// or an announced child; held when its parent is not known yet. The
    /// events to send, each to its session (the announcement, then what
    /// was held for it).
    pub(crate) fn started(&mut self, run: &RunInfo) -> Vec<(AgentId, Event)> {
        let child = AgentId::new(run.id.as_str());
        let root = if self.roots.contains(&run.parent) {
            Some((run.parent.clone(), 1))
        } else if let Some(parent) = self.children.get(&run.parent) {
            (!parent.ended).then(|| (parent.root.clone(), parent.depth.saturating_add(1)))
        } else if self.roots.is_empty() || self.sessions.contains(&run.parent) || self.ignored.contains(&run.parent) {
            None
        } else {
            // Its parent is not known yet: its start waits with the parent's reports.
            let key = self.held_under.get(&run.parent).unwrap_or(&run.parent).clone();
            self.held_under.insert(child, key.clone());
            self.hold(key, Held::Start(run.clone()));
            return Vec::new();
        };
        let Some((root, depth)) = root else {
            self.ignored.insert(child.clone());
            self.held.remove(&child);
            return Vec::new();
        };
        self.children.insert(
            child.clone(),
            Child {
                root: root.clone(),
                parent: run.parent.clone(),
                depth,
                ended: false,
            },
        );
        let mut sent = vec![(
            root,
            Event::Subagent {
                parent: run.parent.to_string(),
                child: run.id.clone(),
                change: Change::Started {
                    title: run.label.clone(),
                    task: run.task.clone(),
                    cancel: true,
                },
            },
        )];
        sent.extend(self.release(&child));
        sent
    }

    /// A child ended: its terminal state, on its parent's session, when it
    /// was announced.
    pub(crate) fn ended(&mut self, end: &RunEndInfo) -> Vec<(AgentId, Event)> {
        let child = AgentId::new(end.run.id.as_str());
        if let Some(key) = self.held_under.get(&child).cloned() {
            self.hold(key, Held::End(end.clone()));
            return Vec::new();
        }
        self.ignored.remove(&child);
        self.held.remove(&child);
        let Some(announced) = self.children.get_mut(&child).filter(|child| !child.ended) else {
            return Vec::new();
        };
        announced.ended = true;
        let event = Event::Subagent {
            parent: announced.parent.to_string(),
            child: end.run.id.clone(),
            change: Change::Ended(Ending::of_run(end)),
        };
        vec![(announced.root.clone(), event)]
    }

    /// What was held for `agent`, now that it is known: each report routed
    /// again, each descendant's start and end taken in, in order.
    fn release(&mut self, agent: &AgentId) -> Vec<(AgentId, Event)> {
        let mut sent = Vec::new();
        let Some(held) = self.held.remove(agent) else {
            return sent;
        };
        self.held_under.retain(|_, key| key != agent);
        for item in held {
            match item {
                Held::Report(from, event) => {
                    if let Route::Send(root, event) = self.route(&from, || event) {
                        sent.push((root, event));
                    }
                }
                Held::Start(run) => sent.extend(self.started(&run)),
                Held::End(end) => sent.extend(self.ended(&end)),
            }
        }
        sent
    }

    /// Holds `item` for `key`, within the bounds: past them it is dropped
    /// (and that is logged once).
    fn hold(&mut self, key: AgentId, item: Held) {
        let room = self.held.len() < MAX_HELD_AGENTS || self.held.contains_key(&key);
        let queue = room.then(|| self.held.entry(key).or_default());
        match queue {
            Some(queue) if queue.len() < MAX_HELD_PER_AGENT => queue.push_back(item),
            _ => {
                if !self.dropped {
                    self.dropped = true;
                    tracing::warn!("{}", crate::wording::ACP_SUBAGENT_REPORTS_DROPPED);
                }
            }
        }
    }

    /// How many agents have reports held (tests).
    #[cfg(test)]
    pub(crate) fn held_agents(&self) -> usize {
        self.held.len()
    }
}

/// `event` of an announced child, for its own session.
fn in_session(child: &AgentId, event: Event) -> Event {
    Event::InSession {
        session: child.to_string(),
        event: Box::new(event),
    }
}

#[cfg(test)]
mod tests;
