//! `acp.subagents-rfd`: the subagent sessions an agent announces, checked
//! against the Subagents RFD as dsh reads it (see "The Agent Client
//! Protocol: subagent sessions" in `docs/conformance.md`). The check
//! advertises `clientCapabilities.subagents`, as dsh does to every ACP
//! child, keeps the order of every `session/update` and of every prompt's
//! answer ([`Trail`]), and judges it when the conversation is over:
//!
//! - each child is announced (a `subagent_update` naming it) on its
//!   parent's session (the prompt's, or a subagent's still running) before
//!   any update bearing its id;
//! - it has exactly one terminal state (an `idle` state) after its last
//!   update; `running` after its end starts it again (a reusable child);
//! - every announced child has ended before its prompt's `session/prompt`
//!   returns.

use std::collections::{HashMap, HashSet};

use dsh_subagent_conformance::Status;
use serde_json::Value;

use crate::wording;

/// The most updates kept for the judgement: past it the rest are not
/// kept, and the requirement is not judged (a flood is its own finding).
pub(super) const MAX_TRAIL: usize = 20_000;

/// The most violations named in the finding (the rest are counted).
const NAMED: usize = 3;

/// The state a `subagent_update` gives its child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum ChildState {
    /// `running`: at work (again).
    Running,
    /// `idle`, with its stop reason: its terminal state.
    Idle(String),
    /// No state, or one the check does not judge.
    Other,
}

/// One thing the agent did, in the order the check read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Seen {
    /// A `session/update` on `session`; for a `subagent_update`, the child
    /// it names and the state it gives it.
    Update {
        session: String,
        kind: String,
        child: Option<(String, ChildState)>,
    },
    /// A `session/prompt` of `session` answered (its stop reason).
    Answered { session: String, stop: String },
}

/// What the agent did, in order, bounded by [`MAX_TRAIL`].
#[derive(Default)]
pub(super) struct Trail {
    seen: Vec<Seen>,
    /// Whether something was not kept.
    overflowed: bool,
}

impl Trail {
    /// Keeps a `session/update`'s params.
    pub(super) fn update(&mut self, params: &Value) {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let update = &params["update"];
        let kind = text(&update["sessionUpdate"]);
        let child = (kind == "subagent_update").then(|| {
            let state = match update["state"]["state"].as_str() {
                Some("running") => ChildState::Running,
                Some("idle") => ChildState::Idle(stop_reason(&update["state"])),
                _ => ChildState::Other,
            };
            (text(&update["sessionId"]), state)
        });
        self.push(Seen::Update {
            session: text(&params["sessionId"]),
            kind,
            child,
        });
    }

    /// Keeps a prompt's answer.
    pub(super) fn answered(&mut self, session: &str, answer: &Result<Value, Value>) {
        let stop = match answer {
            Ok(result) => result["stopReason"].as_str().unwrap_or("no stopReason").to_owned(),
            Err(_) => "an error".to_owned(),
        };
        self.push(Seen::Answered {
            session: session.to_owned(),
            stop,
        });
    }

    fn push(&mut self, seen: Seen) {
        if self.seen.len() < MAX_TRAIL {
            self.seen.push(seen);
        } else {
            self.overflowed = true;
        }
    }

    /// The finding: PASS (with a note) when children were announced and
    /// every rule held, FAIL naming what broke one, SKIPPED when nothing
    /// was announced.
    pub(super) fn judge(&self, roots: &[String]) -> Result<Option<String>, (Status, String)> {
        let mut judge = Judge {
            roots: roots.iter().cloned().collect(),
            ..Judge::default()
        };
        for seen in &self.seen {
            judge.take(seen);
        }
        judge.finish();
        if !judge.faults.is_empty() {
            let named: Vec<&str> = judge.faults.iter().take(NAMED).map(String::as_str).collect();
            let more = judge.faults.len().saturating_sub(NAMED);
            return Err((Status::Fail, wording::check_rfd_broken(&named, more)));
        }
        if self.overflowed {
            return Err((Status::Skipped, wording::check_rfd_overflow(MAX_TRAIL)));
        }
        if judge.order.is_empty() {
            return Err((Status::Skipped, wording::CHECK_RFD_NONE.to_owned()));
        }
        let mut stops: Vec<(String, usize)> = Vec::new();
        for stop in &judge.stops {
            match stops.iter_mut().find(|(seen, _)| seen == stop) {
                Some((_, count)) => *count += 1,
                None => stops.push((stop.clone(), 1)),
            }
        }
        Ok(Some(wording::check_rfd_followed(judge.order.len(), judge.runs, &stops)))
    }
}

/// The stop reason of an `idle` state, as it reads.
fn stop_reason(state: &Value) -> String {
    match &state["stopReason"] {
        Value::String(reason) => reason.clone(),
        Value::Null => "no stopReason".to_owned(),
        other => other.to_string(),
    }
}

/// One announced child.
struct Child {
    /// The session it was announced on.
    parent: String,
    ended: bool,
}

/// The rules, applied in order.
#[derive(Default)]
struct Judge {
    /// The sessions the check opened.
    roots: HashSet<String>,
    children: HashMap<String, Child>,
    /// The children, in the order announced.
    order: Vec<String>,
    /// Updates on sessions not (yet) announced: the session and the kind.
    early: Vec<(String, String)>,
    /// Children reported still running when their prompt answered.
    open_at_answer: HashSet<String>,
    /// Each terminal state's stop reason.
    stops: Vec<String>,
    /// The runs announced: each child's first, and each `running` after an end.
    runs: usize,
    faults: Vec<String>,
}

impl Judge {
    fn take(&mut self, seen: &Seen) {
        match seen {
            Seen::Update {
                session,
                kind,
                child: Some((child, state)),
            } if kind == "subagent_update" => self.subagent(session, child, state),
            Seen::Update { session, kind, .. } => self.own_update(session, kind),
            Seen::Answered { session, stop } => self.answered(session, stop),
        }
    }

    /// A `subagent_update` for `child` on `session`.
    fn subagent(&mut self, session: &str, child: &str, state: &ChildState) {
        if child.is_empty() {
            return self.fault(wording::check_rfd_no_child(session));
        }
        if self.roots.contains(child) {
            return self.fault(wording::check_rfd_root_announced(child));
        }
        let announcer_ended = self.children.get(session).is_some_and(|announcer| announcer.ended);
        if announcer_ended {
            self.fault(wording::check_rfd_on_ended(child, session));
        } else if !self.roots.contains(session) && !self.children.contains_key(session) {
            self.fault(wording::check_rfd_on_unknown(child, session));
        }
        let Some(ended) = self.children.get(child).map(|known| known.ended) else {
            return self.announce(session, child, state);
        };
        match (ended, state) {
            (true, ChildState::Running) => {
                self.runs += 1;
                self.set_ended(child, false);
            }
            (true, ChildState::Idle(_)) => self.fault(wording::check_rfd_second_end(child)),
            (true, ChildState::Other) => self.fault(wording::check_rfd_after_end(child, "subagent_update")),
            (false, ChildState::Idle(stop)) => {
                self.set_ended(child, true);
                self.stops.push(stop.clone());
            }
            (false, _) => {}
        }
    }

    fn set_ended(&mut self, child: &str, ended: bool) {
        if let Some(known) = self.children.get_mut(child) {
            known.ended = ended;
        }
    }

    /// `child`'s first `subagent_update`: its announcement.
    fn announce(&mut self, session: &str, child: &str, state: &ChildState) {
        if let Some(at) = self.early.iter().position(|(early, _)| early == child) {
            let (_, kind) = self.early.remove(at);
            self.fault(wording::check_rfd_before_announce(child, &kind));
        }
        let ended = matches!(state, ChildState::Idle(_));
        if let ChildState::Idle(stop) = state {
            self.stops.push(stop.clone());
        }
        self.runs += 1;
        self.order.push(child.to_owned());
        self.children.insert(
            child.to_owned(),
            Child {
                parent: session.to_owned(),
                ended,
            },
        );
    }

    /// Any other update on `session`: the prompt's own, or a child's.
    fn own_update(&mut self, session: &str, kind: &str) {
        if self.roots.contains(session) {
            return;
        }
        match self.children.get(session) {
            Some(child) if child.ended => self.fault(wording::check_rfd_after_end(session, kind)),
            Some(_) => {}
            None if self.early.iter().any(|(early, _)| early == session) => {}
            None => self.early.push((session.to_owned(), kind.to_owned())),
        }
    }

    /// `session`'s prompt answered `stop`: every child under it has ended.
    fn answered(&mut self, session: &str, stop: &str) {
        let open: Vec<String> = self
            .order
            .iter()
            .filter(|child| {
                self.children.get(*child).is_some_and(|known| !known.ended)
                    && self.root_of(child) == Some(session)
                    && !self.open_at_answer.contains(*child)
            })
            .cloned()
            .collect();
        for child in open {
            self.fault(wording::check_rfd_open_at_answer(&child, stop));
            self.open_at_answer.insert(child);
        }
    }

    /// The prompt's session a child was announced under, at any depth.
    fn root_of<'a>(&'a self, child: &'a str) -> Option<&'a str> {
        let mut at = child;
        for _ in 0..=self.children.len() {
            if self.roots.contains(at) {
                return Some(at);
            }
            at = &self.children.get(at)?.parent;
        }
        None
    }

    /// Updates on sessions never announced.
    fn finish(&mut self) {
        for (session, kind) in std::mem::take(&mut self.early) {
            self.fault(wording::check_rfd_never_announced(&session, &kind));
        }
    }

    fn fault(&mut self, fault: String) {
        if !self.faults.contains(&fault) {
            self.faults.push(fault);
        }
    }
}

#[cfg(test)]
mod tests;
