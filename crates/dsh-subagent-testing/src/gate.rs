//! A gate: a test fixture's way to hold a stage open until the test says go.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, watch};

/// A latch that holds arrivals until opened, and counts them.
///
/// Clones share the latch. Tests use it to stop a scripted provider at a
/// known point (say, while `start` is pending) and act there.
///
/// The open flag and the arrival count are kept apart, so an arrival wakes
/// only the tasks waiting in [`Gate::arrived`], never every waiter held at
/// the gate: holding 100,000 waiters costs linear, not quadratic, work. A
/// held waiter is one flag check and one `Notify` registration (~100 B of
/// future, where a `watch` wait took ~180 B).
#[derive(Clone, Debug)]
pub struct Gate {
    open: Arc<Opening>,
    arrivals: watch::Sender<usize>,
}

/// The open flag and the waiters to wake when it is set.
#[derive(Debug, Default)]
struct Opening {
    open: AtomicBool,
    opened: Notify,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            open: Arc::default(),
            arrivals: watch::Sender::new(0),
        }
    }

    /// Opens the gate: every waiter, now and later, passes.
    pub fn open(&self) {
        self.open.open.store(true, Ordering::SeqCst);
        self.open.opened.notify_waiters();
    }

    /// How many waiters have arrived so far.
    pub fn arrivals(&self) -> usize {
        *self.arrivals.borrow()
    }

    /// Waits until at least `count` waiters have arrived.
    pub async fn arrived(&self, count: usize) {
        let mut receiver = self.arrivals.subscribe();
        // The sender lives in `self`, so the wait can only end by the condition.
        let _ = receiver.wait_for(|arrivals| *arrivals >= count).await;
    }

    /// Arrives and waits until the gate is open.
    pub async fn pass(&self) {
        // Registered before the flag is read: an `open` in between still
        // wakes it (`notify_waiters` reaches every `Notified` created
        // before it).
        let opened = self.open.opened.notified();
        self.arrivals.send_modify(|arrivals| *arrivals += 1);
        if self.open.open.load(Ordering::SeqCst) {
            return;
        }
        opened.await;
    }
}
