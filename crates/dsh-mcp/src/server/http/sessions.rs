//! The sessions of one HTTP server: each with its own calling agent, at
//! most `max` open at once, each ended exactly once (its calls cancelled,
//! its agent released).
//!
//! rmcp makes a session's handler with a factory that takes no arguments.
//! The request that opens a session is the one whose task runs that factory
//! (rmcp calls it inline, in the request's future), so the front hands the
//! factory a slot for its answer in a task-local ([`Opening`]): which
//! session the request opened, or that the bound refused one. No lock is
//! held while anything waits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::sync::Notify;
use tokio_util::task::TaskTracker;

use crate::server::http::options::SessionAgents;
use crate::server::tool_server::{EndOnDrop, SessionState, WIND_DOWN};
use crate::wording;

tokio::task_local! {
    /// The opening a new-session request waits on, in that request's task.
    static OPENING: Arc<Opening>;
}

/// What the factory did for the request that ran it.
#[derive(Default)]
pub(crate) struct Opening {
    opened: Mutex<Option<Arc<HttpSession>>>,
    refused: AtomicBool,
}

impl Opening {
    /// Runs `request` (a request that may open a session) with this slot
    /// for the factory's answer.
    pub(crate) async fn run<T>(self: &Arc<Self>, request: impl Future<Output = T>) -> T {
        OPENING.scope(self.clone(), request).await
    }

    /// The session the request opened, if it opened one.
    pub(crate) fn opened(&self) -> Option<Arc<HttpSession>> {
        self.opened.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Whether the bound refused the session the request would have opened.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }
}

/// One session over HTTP: its state, its id once rmcp gave it one.
pub(crate) struct HttpSession {
    pub(crate) state: Arc<SessionState>,
    id: OnceLock<String>,
    ended: AtomicBool,
}

/// The sessions of one HTTP server.
pub(crate) struct Sessions {
    agents: Arc<dyn SessionAgents>,
    pub(crate) max: usize,
    /// Sessions opened and not yet ended.
    open: AtomicUsize,
    /// The sessions with an id, by `Mcp-Session-Id`.
    by_id: Mutex<HashMap<String, Arc<HttpSession>>>,
    releases: TaskTracker,
    ended: Notify,
}

impl Sessions {
    pub(crate) fn new(agents: Arc<dyn SessionAgents>, max: usize) -> Self {
        Self {
            agents,
            max: max.max(1),
            open: AtomicUsize::new(0),
            by_id: Mutex::default(),
            releases: TaskTracker::new(),
            ended: Notify::new(),
        }
    }

    fn lock_ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession>>> {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open session with this id.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<HttpSession>> {
        self.lock_ids().get(id).cloned()
    }

    /// Opens a session (rmcp's factory calls this): its calling agent and
    /// its state; refused past the bound. The request's [`Opening`], when
    /// there is one, learns which.
    pub(crate) fn open_session(&self) -> Result<Arc<HttpSession>, String> {
        let opening = OPENING.try_with(Arc::clone).ok();
        // Take a place under the bound first, so that the bound holds
        // however many requests open sessions at once.
        let reserved = self.open.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |open| {
            (open < self.max).then_some(open + 1)
        });
        if reserved.is_err() {
            if let Some(opening) = &opening {
                opening.refused.store(true, Ordering::SeqCst);
            }
            return Err(wording::too_many_sessions(self.max));
        }
        let agent = match self.agents.open() {
            Ok(agent) => agent,
            Err(error) => {
                self.open.fetch_sub(1, Ordering::SeqCst);
                self.ended.notify_waiters();
                return Err(error);
            }
        };
        let session = Arc::new(HttpSession {
            state: Arc::new(SessionState::new(agent)),
            id: OnceLock::new(),
            ended: AtomicBool::new(false),
        });
        if let Some(opening) = opening {
            *opening.opened.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        }
        Ok(session)
    }

    /// Gives `session` the id rmcp answered its `initialize` with, unless
    /// it already ended.
    pub(crate) fn name(&self, session: Arc<HttpSession>, id: String) {
        if session.id.set(id.clone()).is_ok() && !session.ended.load(Ordering::SeqCst) {
            self.lock_ids().insert(id.clone(), session.clone());
            // It may have ended in between: then it is not kept.
            if session.ended.load(Ordering::SeqCst) {
                self.lock_ids().remove(&id);
            }
        }
    }

    /// Ends a session once: cancels its calls now, and in the background
    /// waits for them and releases its agent.
    pub(crate) fn end_session(&self, session: &HttpSession) {
        if session.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        session.state.cancel.cancel();
        if let Some(id) = session.id.get() {
            self.lock_ids().remove(id);
        }
        let state = session.state.clone();
        let agents = self.agents.clone();
        self.releases.spawn(async move {
            state.wind_down().await;
            agents.close(state.agent.clone()).await;
        });
        self.open.fetch_sub(1, Ordering::SeqCst);
        self.ended.notify_waiters();
    }

    /// Ends every session and waits (bounded) for their releases.
    pub(crate) async fn end_all(&self) {
        let deadline = tokio::time::Instant::now() + WIND_DOWN;
        let sessions: Vec<Arc<HttpSession>> = self.lock_ids().values().cloned().collect();
        for session in sessions {
            self.end_session(&session);
        }
        // Sessions rmcp never gave an id end as their handlers go.
        while self.open.load(Ordering::SeqCst) > 0 {
            let ended = self.ended.notified();
            if self.open.load(Ordering::SeqCst) == 0 || tokio::time::timeout_at(deadline, ended).await.is_err() {
                break;
            }
        }
        self.releases.close();
        let _ = tokio::time::timeout_at(deadline, self.releases.wait()).await;
    }
}

/// Ends the session of a handler rmcp dropped.
pub(crate) struct EndWith {
    pub(crate) sessions: Arc<Sessions>,
    pub(crate) session: Arc<HttpSession>,
}

impl EndOnDrop for EndWith {
    fn end(&self, _state: &Arc<SessionState>) {
        self.sessions.end_session(&self.session);
    }
}
