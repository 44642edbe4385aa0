//! The teardown ladder: end of input, then SIGTERM to the group, then
//! SIGKILL, each rung given its grace; done once the direct child is reaped
//! and nothing of the group still runs.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::{Child, Ladder, SignalError, wording};

/// The longest pause between two looks at a group whose direct child has
/// exited but whose other members have not (they send no event).
const POLL: Duration = Duration::from_millis(10);

/// The first such pause; each later one doubles, up to [`POLL`].
const FIRST_POLL: Duration = Duration::from_micros(250);

/// How far a teardown had to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Teardown {
    /// The group was gone within the EOF grace.
    Eof,
    /// The group exited after SIGTERM.
    Terminated,
    /// The group exited after SIGKILL.
    Killed,
}

/// Why a teardown failed. Its `Display` is a neutral text; callers that
/// name the child their own way read the fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TeardownError {
    /// The system refused to signal the group.
    #[error("{}", wording::cannot_signal(group, error))]
    Signal {
        /// The group id.
        group: i32,
        /// What the system said.
        error: SignalError,
    },
    /// Something of the group still ran `waited` after SIGKILL.
    #[error("{}", wording::survived_kill(group, *waited))]
    SurvivedKill {
        /// The group id.
        group: i32,
        /// How long the teardown waited after SIGKILL.
        waited: Duration,
    },
}

impl Child {
    /// Tears the child down, once its stdin is closed (the caller owns the
    /// pipe and drops it first): waits [`Ladder::eof_grace`] for the group
    /// to go, then SIGTERMs the group and waits [`Ladder::term_grace`], then
    /// SIGKILLs it and waits [`Ladder::kill_wait`].
    ///
    /// Returns once the direct child is reaped and no member of the group
    /// still runs: a zombie left to another reaper counts as gone, and
    /// zombies that are our own children (orphans reparented to us as PID 1
    /// or a subreaper) are collected on the way.
    pub async fn teardown(&self, ladder: &Ladder) -> Result<Teardown, TeardownError> {
        let failed = |error: SignalError| TeardownError::Signal {
            group: self.group.id(),
            error,
        };
        if self.wait_gone(ladder.eof_grace).await.map_err(failed)? {
            return Ok(Teardown::Eof);
        }
        self.group.signal(Some(Signal::SIGTERM)).map_err(failed)?;
        if self.wait_gone(ladder.term_grace).await.map_err(failed)? {
            return Ok(Teardown::Terminated);
        }
        self.group.signal(Some(Signal::SIGKILL)).map_err(failed)?;
        if self.wait_gone(ladder.kill_wait).await.map_err(failed)? {
            return Ok(Teardown::Killed);
        }
        Err(TeardownError::SurvivedKill {
            group: self.group.id(),
            waited: ladder.kill_wait,
        })
    }

    /// Waits up to `limit` until the direct child is reaped and no member of
    /// the group still runs ([`ProcessGroup::alive`](crate::ProcessGroup)).
    ///
    /// The direct child's exit is an event (its waiter wakes us), so it is
    /// awaited, not polled: a child that exits at once is seen at once.
    /// Other members of the group send no event; they are looked for after
    /// it, at pauses from [`FIRST_POLL`] doubling up to [`POLL`].
    async fn wait_gone(&self, limit: Duration) -> Result<bool, SignalError> {
        let deadline = tokio::time::Instant::now() + limit;
        if tokio::time::timeout_at(deadline, self.exited()).await.is_err() {
            return Ok(false);
        }
        let mut pause = FIRST_POLL;
        loop {
            if !self.group.alive()? {
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
}
