//! The subagent sessions an ACP child announces (the Subagents RFD): dsh
//! advertises `clientCapabilities.subagents` to every ACP child, and keeps
//! the sessions it announces, at every depth, with their titles, tasks and
//! states. Each is reported to the progress sink
//! ([`ChildUpdate::Subagent`], [`ChildUpdate::SubagentEnded`]), traced as an
//! `invoke_agent` span under the span that started the child (or under its
//! announcing session's), and recorded with the child's end
//! ([`RemoteSubagent`]).
//!
//! What the child gets wrong is logged once per kind and run, and changes
//! nothing else: an update for a session it never announced, an
//! announcement on a session it never announced, a second terminal state,
//! an announcement past [`MAX_SESSIONS`]. A session still running when the
//! child's run ends (its prompt answered, cancelled past its grace, or its
//! process gone) is closed as `disconnected`.

use std::collections::{HashMap, HashSet};

use agent_client_protocol::schema::MaybeUndefined;
use agent_client_protocol::v1::schema::{IdleStopReason, StateUpdate, SubagentUpdate};
use dsh_subagent_api::RemoteSubagent;

use crate::child_update::{ChildUpdate, ProgressSink, label};
use crate::wording;

/// The most subagent sessions kept for one child: an announcement past it
/// is dropped (logged once), so a flood costs bounded memory.
pub const MAX_SESSIONS: usize = 1024;

/// What a child got wrong, each logged once per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fault {
    UnknownSession,
    UnknownParent,
    SecondEnd,
    Flood,
}

/// One announced session.
struct Session {
    record: RemoteSubagent,
    span: tracing::Span,
}

/// The sessions one child announced.
#[derive(Default)]
pub(crate) struct Announced {
    /// The child's own session, once it is published.
    own: Option<String>,
    sessions: HashMap<String, Session>,
    /// Their ids, in the order announced.
    order: Vec<String>,
    logged: HashSet<Fault>,
    /// The run's id and where its reports go.
    progress: Option<(String, ProgressSink)>,
    /// The span the child's own spans hang under.
    origin: Option<tracing::Span>,
}

impl Announced {
    /// Reports go to `progress`; spans are traced under `origin`.
    pub(crate) fn configure(&mut self, progress: Option<(String, ProgressSink)>, origin: Option<tracing::Span>) {
        self.progress = progress;
        self.origin = origin;
    }

    /// The child's session is published: from now on its updates count.
    pub(crate) fn set_own(&mut self, session: &str) {
        self.own = Some(session.to_owned());
    }

    /// Whether `session` is one the child announced and that still runs:
    /// its updates are the child's own work, not a fault.
    pub(crate) fn is_running(&self, session: &str) -> bool {
        self.sessions
            .get(session)
            .is_some_and(|session| session.record.stop.is_none())
    }

    /// Takes a `session/update` sent on `session`: a `subagent_update`
    /// announces or ends a child session; anything else on a session the
    /// child never announced (or that ended) is logged once.
    pub(crate) fn take(&mut self, session: &str, update: Option<&SubagentUpdate>) {
        let own = self.own.as_deref() == Some(session);
        match update {
            Some(update) if own || self.is_running(session) => {
                let parent = (!own).then(|| session.to_owned());
                self.subagent(parent, update);
            }
            Some(_) => self.fault(Fault::UnknownParent, session),
            None if own || self.is_running(session) => {}
            None => self.fault(Fault::UnknownSession, session),
        }
    }

    /// A `subagent_update` on `parent`'s session (`None`: the child's own).
    fn subagent(&mut self, parent: Option<String>, update: &SubagentUpdate) {
        let id = label(&update.session_id.to_string());
        if !self.sessions.contains_key(&id) {
            if self.sessions.len() >= MAX_SESSIONS {
                return self.fault(Fault::Flood, &id);
            }
            self.announce(id.clone(), parent, update);
        } else if let MaybeUndefined::Value(title) = &update.title {
            self.sessions
                .entry(id.clone())
                .and_modify(|session| session.record.label = Some(label(title)));
        }
        match &update.state {
            MaybeUndefined::Value(StateUpdate::Idle(idle)) => {
                let stop = stop_name(idle.stop_reason.as_ref());
                self.end(&id, stop, true);
            }
            MaybeUndefined::Value(StateUpdate::Running(_)) => self.rerun(&id),
            _ => {}
        }
    }

    fn announce(&mut self, id: String, parent: Option<String>, update: &SubagentUpdate) {
        let mut record = RemoteSubagent::new(id.clone(), parent.clone());
        record.label = value(&update.title).map(label);
        record.task = value(&update.description).map(label);
        let within = parent
            .as_ref()
            .and_then(|parent| self.sessions.get(parent))
            .map(|session| session.span.clone())
            .or_else(|| self.origin.clone());
        let name = record.label.clone().unwrap_or_else(|| id.clone());
        let span = tracing::info_span!(
            target: "dsh::gen_ai",
            parent: within.as_ref().and_then(tracing::Span::id),
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {name}"),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.id = id.as_str(),
            gen_ai.agent.name = name.as_str(),
            dsh.subagent.announced = true,
        );
        self.report(&ChildUpdate::Subagent {
            session: id.clone(),
            parent,
            title: record.label.clone(),
            task: record.task.clone(),
        });
        self.order.push(id.clone());
        self.sessions.insert(id, Session { record, span });
    }

    /// Ends session `id` with `stop`; a second end is a fault when
    /// `from_child` (logged once), and nothing when we close it.
    fn end(&mut self, id: &str, stop: String, from_child: bool) {
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if session.record.stop.is_some() {
            if from_child {
                self.fault(Fault::SecondEnd, id);
            }
            return;
        }
        session.record.stop = Some(stop.clone());
        // Its span ends here.
        session.span = tracing::Span::none();
        self.report(&ChildUpdate::SubagentEnded {
            session: id.to_owned(),
            stop,
        });
    }

    /// A session that ended runs again (a reusable child given more work):
    /// its next end is its own.
    fn rerun(&mut self, id: &str) {
        let Some(session) = self.sessions.get_mut(id) else {
            return;
        };
        if session.record.stop.take().is_none() {
            return;
        }
        let again = ChildUpdate::Subagent {
            session: id.to_owned(),
            parent: session.record.parent.clone(),
            title: session.record.label.clone(),
            task: session.record.task.clone(),
        };
        self.report(&again);
    }

    /// The child's run ended: every session still running is closed as
    /// `disconnected`, deepest first; returns what to record, in the order
    /// announced.
    pub(crate) fn close(&mut self) -> Vec<RemoteSubagent> {
        let open: Vec<String> = self
            .order
            .iter()
            .rev()
            .filter(|id| self.is_running(id))
            .cloned()
            .collect();
        for id in open {
            self.end(&id, wording::SUBAGENT_DISCONNECTED.to_owned(), false);
        }
        self.order
            .iter()
            .filter_map(|id| self.sessions.get(id).map(|session| session.record.clone()))
            .collect()
    }

    fn report(&self, update: &ChildUpdate) {
        if let Some((run, sink)) = &self.progress {
            sink(run, update);
        }
    }

    fn fault(&mut self, fault: Fault, session: &str) {
        if self.logged.insert(fault) {
            let session = label(session);
            let line = match fault {
                Fault::UnknownSession => wording::subagent_unknown_session(&session),
                Fault::UnknownParent => wording::subagent_unknown_parent(&session),
                Fault::SecondEnd => wording::subagent_second_end(&session),
                Fault::Flood => wording::subagent_flood(MAX_SESSIONS),
            };
            tracing::warn!("{line}");
        }
    }
}

fn value(patch: &MaybeUndefined<String>) -> Option<&str> {
    match patch {
        MaybeUndefined::Value(text) => Some(text),
        _ => None,
    }
}

/// How an `idle` state's stop reason reads in dsh's words.
fn stop_name(stop: Option<&IdleStopReason>) -> String {
    match stop {
        Some(IdleStopReason::EndTurn) => "completed".to_owned(),
        Some(IdleStopReason::MaxTokens) => "max-tokens".to_owned(),
        Some(IdleStopReason::MaxTurnRequests) => "max-turns".to_owned(),
        Some(IdleStopReason::Refusal) => "refusal".to_owned(),
        Some(IdleStopReason::Cancelled) => "cancelled".to_owned(),
        Some(IdleStopReason::Error(error)) => match &error.error {
            Some(error) => format!("error: {}", label(&error.message)),
            None => "error".to_owned(),
        },
        Some(IdleStopReason::Other(other)) => label(other.stop_reason.trim_start_matches('_')),
        Some(_) | None => "ended".to_owned(),
    }
}

#[cfg(test)]
mod tests;
