//! The sessions of one `dsh acp` connection, and the turn each may be
//! running.
//!
//! A session runs one prompt at a time. Its turn begins when
//! [`Sessions::begin_turn`] accepts a prompt and ends when the returned
//! [`Turn`] is dropped: after the answer is ready, and equally on every other
//! way out of a prompt (an update that cannot be sent, a task that is dropped
//! with its connection, a panic). So no exit path can leave a session marked
//! running, which would refuse every later prompt of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol as acp;
use dsh_agent::Agent;
use dsh_agent::transcript::TreeLock;
use dsh_tools::CancellationToken;

use super::session_tools::SessionTools;
use crate::retention::Hold;
use crate::wording;

/// One ACP session: a parent agent and its tools (the shared ones and its
/// client's MCP servers).
pub(super) struct Session {
    pub(super) agent: Agent,
    pub(super) tools: SessionTools,
    /// Keeps the agent's transcript from sweeps while the session is open
    /// (with a data directory).
    pub(super) _hold: Option<Hold>,
    /// How its next prompt begins.
    pub(super) next: NextTurn,
    /// Its tree's lock, held while the session is open (with a data
    /// directory): another process cannot load it meanwhile.
    pub(super) lock: Option<TreeLock>,
}

impl Session {
    /// Ends the session's hold on its tree: the lock goes, with its file.
    pub(super) fn unlock(&mut self) {
        if let Some(lock) = self.lock.take() {
            lock.remove();
        }
    }
}

/// How a session's next prompt begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NextTurn {
    /// A new turn, opened by the prompt.
    New,
    /// The tree a `session/load` found interrupted goes on first, as `dsh
    /// run --resume` does ([`Agent::resume`](dsh_agent::Agent::resume)):
    /// the interrupted turn is kept and the prompt joins it, finished
    /// children deliver once, interrupted ones resume.
    Resume,
}

/// A session, and its running turn when it runs one.
struct Entry {
    session: Session,
    turn: Option<Running>,
}

/// The running turn of a session: its number (so that only that turn can
/// end itself) and the token that cancels it.
struct Running {
    number: u64,
    cancel: CancellationToken,
}

#[derive(Default)]
struct State {
    open: HashMap<String, Entry>,
    /// Turns begun on this connection.
    turns: u64,
}

/// The open sessions of a connection, by id.
#[derive(Default)]
pub(super) struct Sessions {
    state: Mutex<State>,
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `session` under `id`, running nothing.
    pub(super) fn insert(&self, id: String, session: Session) {
        self.lock().open.insert(id, Entry { session, turn: None });
    }

    /// Takes out the session `id` to continue it anew (`session/load`), if
    /// it is open; refused while a prompt of it is running.
    pub(super) fn take_idle(&self, id: &str) -> Result<Option<Session>, acp::Error> {
        let mut state = self.lock();
        if state.open.get(id).is_some_and(|entry| entry.turn.is_some()) {
            return Err(already_running());
        }
        Ok(state.open.remove(id).map(|entry| entry.session))
    }

    /// Begins a turn of the session `id`: its agent and the token that
    /// cancels the turn, held until the [`Turn`] drops. Refused when no
    /// session has that id, or one of its prompts is running.
    pub(super) fn begin_turn(self: &Arc<Self>, id: &str) -> Result<Turn, acp::Error> {
        let mut state = self.lock();
        state.turns += 1;
        let number = state.turns;
        let Some(entry) = state.open.get_mut(id) else {
            return Err(acp::Error::new(
                acp::ErrorCode::INVALID_PARAMS,
                wording::unknown_session(&id),
            ));
        };
        if entry.turn.is_some() {
            return Err(already_running());
        }
        let cancel = CancellationToken::new();
        let next = std::mem::replace(&mut entry.session.next, NextTurn::New);
        entry.turn = Some(Running {
            number,
            cancel: cancel.clone(),
        });
        Ok(Turn {
            sessions: self.clone(),
            id: id.to_owned(),
            number,
            agent: entry.session.agent.clone(),
            cancel,
            next,
        })
    }

    /// Cancels the running turn of the session `id` (`session/cancel`), if
    /// any; whether the session is open.
    pub(super) fn cancel_turn(&self, id: &str) -> bool {
        let state = self.lock();
        let Some(entry) = state.open.get(id) else {
            return false;
        };
        if let Some(running) = &entry.turn {
            running.cancel.cancel();
        }
        true
    }

    /// Closes the session `id` (`session/close`): its running turn, if any,
    /// is cancelled; the session is returned to be released.
    pub(super) fn close(&self, id: &str) -> Option<Session> {
        let entry = self.lock().open.remove(id)?;
        if let Some(running) = &entry.turn {
            running.cancel.cancel();
        }
        Some(entry.session)
    }

    /// Closes every session (the connection ended), returning them to be
    /// released.
    pub(super) fn drain(&self) -> Vec<Session> {
        self.lock().open.drain().map(|(_, entry)| entry.session).collect()
    }

    /// Ends turn `number` of the session `id`, unless the session has been
    /// replaced or closed meanwhile.
    fn end_turn(&self, id: &str, number: u64) {
        if let Some(entry) = self.lock().open.get_mut(id)
            && entry.turn.as_ref().is_some_and(|running| running.number == number)
        {
            entry.turn = None;
        }
    }

    /// Whether the session `id` is running a turn.
    #[cfg(test)]
    pub(super) fn running(&self, id: &str) -> bool {
        self.lock().open.get(id).is_some_and(|entry| entry.turn.is_some())
    }
}

fn already_running() -> acp::Error {
    acp::Error::new(acp::ErrorCode::INVALID_REQUEST, wording::PROMPT_ALREADY_RUNNING)
}

/// A session's running turn: the session is marked running until this is
/// dropped, whichever way its prompt ends.
pub(super) struct Turn {
    sessions: Arc<Sessions>,
    id: String,
    number: u64,
    agent: Agent,
    cancel: CancellationToken,
    next: NextTurn,
}

impl Turn {
    /// How the turn begins: new, or resuming what a load found interrupted.
    pub(super) fn next(&self) -> NextTurn {
        self.next
    }

    /// The session's agent.
    pub(super) fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The token that cancels the turn (`session/cancel` fires it).
    pub(super) fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.sessions.end_turn(&self.id, self.number);
    }
}
