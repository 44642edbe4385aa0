//! The queue between the recorders and the writer thread: a recorder
//! hands each ended exchange on without waiting, the writer takes what
//! gathered on a tick of its own, and hands the written ones back emptied,
//! for the stream to fill again.
//!
//! While exchanges come, nothing the stream does wakes the writer: a
//! wake-up at the moment an exchange ends (a system call, and a thread
//! woken beside the one running the model's stream) cost a delegation on a
//! 1 ms model about as much as all its recording besides. Only a writer
//! that found nothing for [`IDLE`] sleeps until the next exchange wakes it.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::capture::Capture;
use super::format::Level;
use crate::wording;

/// How often the writer takes what gathered, while exchanges come: one
/// write per tick, not per exchange, and an exchange on disk at most a
/// tick after it ended.
const TICK: Duration = Duration::from_millis(2);

/// How long the writer goes on ticking with nothing to write before it
/// sleeps until a recorder wakes it: a model slower than this pays one
/// wake-up per call, a negligible share of such a call.
const IDLE: Duration = Duration::from_millis(100);

/// What the writer thread is handed.
pub(super) enum Message {
    Header(Level),
    /// Boxed, so that handing one on moves a pointer.
    Exchange(Box<Capture>),
}

impl Message {
    /// About the bytes it holds, for [`Queue::limit`].
    fn bytes(&self) -> usize {
        match self {
            Message::Header(_) => 0,
            Message::Exchange(exchange) => exchange.bytes(),
        }
    }
}

/// The most bytes the emptied exchanges kept for reuse hold: room for
/// every exchange in flight between the stream and the writer (a tick's
/// worth, and many more), so that in a steady run none is freed on the
/// writer's thread only to be allocated again on the stream's.
const SPARE_BYTES: usize = 8 << 20;

/// How a recording ends.
pub(super) enum Closing {
    /// Its run ended: the cassette is whole.
    Finish,
    /// Its run was stopped early, for this reason: replay refuses it.
    Interrupted(String),
}

/// Why the writer stops.
pub(super) enum Ending {
    /// The recording was closed this way.
    Closed(Closing),
    /// The last recorder is gone without closing it.
    Abandoned,
}

/// The most bytes of ended exchanges that wait for the writer. Past it the
/// disk has fallen that far behind the model: rather than block the stream
/// or hold ever more memory, the recording stops, as on a failed write
/// (the cassette stays unfinished, and finishing it says why).
pub(super) const PENDING_BYTES: usize = 256 << 20;

/// Why a recording stopped before it was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// A write failed (the writer holds its error).
    WriteFailed,
    /// More than [`Queue::limit`] bytes waited for the writer.
    FellBehind,
}

/// What the recorders hand the writer, and how it is woken.
#[derive(Debug)]
pub(super) struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
    /// The most bytes that wait for the writer ([`PENDING_BYTES`]).
    pub(super) limit: usize,
}

#[derive(Default)]
pub(super) struct QueueState {
    pub(super) pending: Vec<Message>,
    /// The bytes the exchanges in `pending` hold (about).
    pending_bytes: usize,
    ending: Option<Ending>,
    /// The writer sleeps until something arrives (a recorder wakes it),
    /// having found nothing for [`IDLE`].
    parked: bool,
    /// Why the recording stopped before it was closed, if it did: what
    /// arrives from then on is dropped (the error is reported when the
    /// recording is closed).
    stopped: Option<Stopped>,
    /// The bytes the exchanges in `spare` hold.
    spare_bytes: usize,
    /// Exchanges written and emptied, to be filled again.
    #[expect(
        clippy::vec_box,
        reason = "the boxes are what is handed on: reused, not allocated per exchange"
    )]
    pub(super) spare: Vec<Box<Capture>>,
}

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueState")
            .field("pending", &self.pending.len())
            .field("ended", &self.ending.is_some())
            .field("stopped", &self.stopped)
            .finish()
    }
}

impl Queue {
    pub(super) fn new(limit: usize) -> Self {
        Queue {
            state: Mutex::default(),
            wake: Condvar::new(),
            limit,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `message` to the writer; never blocks on it, and makes a
    /// system call only when the writer sleeps, idle for [`IDLE`]. When
    /// it would put more than [`Queue::limit`] bytes in wait, the
    /// recording stops instead: what waits is dropped, and so is what
    /// comes after.
    pub(super) fn push(&self, message: Message) {
        let bytes = message.bytes();
        let mut state = self.lock();
        if state.ending.is_some() || state.stopped.is_some() {
            return;
        }
        if state.pending_bytes.saturating_add(bytes) > self.limit {
            state.stopped = Some(Stopped::FellBehind);
            state.pending_bytes = 0;
            let dropped = std::mem::take(&mut state.pending);
            drop(state);
            drop(dropped);
            tracing::warn!(limit = self.limit, "{}", wording::LOG_CASSETTE_FELL_BEHIND);
            return;
        }
        state.pending_bytes += bytes;
        state.pending.push(message);
        let wake = std::mem::take(&mut state.parked);
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Tells the writer to end (the first ending counts).
    pub(super) fn end(&self, ending: Ending) {
        let mut state = self.lock();
        if state.ending.is_none() {
            state.ending = Some(ending);
        }
        drop(state);
        self.wake.notify_one();
    }

    /// The writer's next batch, swapped into `batch` (empty, so the two
    /// vectors take turns and neither grows again): what gathered by the
    /// next [`TICK`] that finds something, or at once when the recording
    /// ends. After [`IDLE`] of ticks that found nothing, waits to be woken
    /// instead (then lets more gather for a tick). Returns the ending, if
    /// it came.
    pub(super) fn next_batch(&self, batch: &mut Vec<Message>) -> Option<Ending> {
        let mut state = self.lock();
        let mut idle = Duration::ZERO;
        while state.ending.is_none() {
            if idle >= IDLE {
                state.parked = true;
                while state.pending.is_empty() && state.ending.is_none() {
                    state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                }
                state.parked = false;
                idle = Duration::ZERO;
            }
            state = self.sleep_tick(state);
            if !state.pending.is_empty() {
                break;
            }
            idle += TICK;
        }
        std::mem::swap(&mut state.pending, batch);
        state.pending_bytes = 0;
        state.ending.take()
    }

    /// Sleeps one [`TICK`], unless the recording ends first.
    fn sleep_tick<'a>(&'a self, mut state: MutexGuard<'a, QueueState>) -> MutexGuard<'a, QueueState> {
        let deadline = Instant::now() + TICK;
        while state.ending.is_none() {
            let Some(left) = deadline
                .checked_duration_since(Instant::now())
                .filter(|left| !left.is_zero())
            else {
                break;
            };
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state
    }

    /// Whether the writer sleeps until a recorder wakes it.
    #[cfg(test)]
    pub(super) fn parked(&self) -> bool {
        self.lock().parked
    }

    /// Whether the writer fell [`Queue::limit`] bytes behind.
    pub(super) fn fell_behind(&self) -> bool {
        self.lock().stopped == Some(Stopped::FellBehind)
    }

    /// An empty exchange to fill: one the writer handed back, or a new one.
    pub(super) fn spare(&self) -> Box<Capture> {
        let mut state = self.lock();
        let exchange = state.spare.pop();
        if let Some(exchange) = &exchange {
            state.spare_bytes = state.spare_bytes.saturating_sub(exchange.held);
        }
        drop(state);
        exchange.unwrap_or_default()
    }

    /// Keeps written exchanges, emptied, for reuse, up to [`SPARE_BYTES`];
    /// empties them without the lock, so a recorder never waits on it.
    pub(super) fn give_back(&self, written: impl Iterator<Item = Box<Capture>>) {
        let mut room = SPARE_BYTES.saturating_sub(self.lock().spare_bytes);
        let (mut emptied, mut bytes) = (Vec::new(), 0);
        for exchange in written.filter_map(Capture::reclaimed) {
            if exchange.held > room {
                break;
            }
            room -= exchange.held;
            bytes += exchange.held;
            emptied.push(exchange);
        }
        let mut state = self.lock();
        state.spare_bytes += bytes;
        state.spare.append(&mut emptied);
    }

    /// A write failed: drop what arrives from now on.
    pub(super) fn fail(&self) {
        let mut state = self.lock();
        state.stopped = Some(Stopped::WriteFailed);
        state.pending = Vec::new();
        state.pending_bytes = 0;
    }
}
