//! A gate: a test fixture's way to hold a stage open until the test says go.

use tokio::sync::watch;

/// A latch that holds arrivals until opened, and counts them.
///
/// Clones share the latch. Tests use it to stop a scripted provider at a
/// known point (say, while `start` is pending) and act there.
///
/// The open flag and the arrival count live in separate channels, so an
/// arrival wakes only the tasks waiting in [`Gate::arrived`], never every
/// waiter held at the gate: holding 100,000 waiters costs linear, not
/// quadratic, work.
#[derive(Clone, Debug)]
pub struct Gate {
    open: watch::Sender<bool>,
    arrivals: watch::Sender<usize>,
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
            open: watch::Sender::new(false),
            arrivals: watch::Sender::new(0),
        }
    }

    /// Opens the gate: every waiter, now and later, passes.
    pub fn open(&self) {
        self.open.send_replace(true);
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
        let mut receiver = self.open.subscribe();
        self.arrivals.send_modify(|arrivals| *arrivals += 1);
        let _ = receiver.wait_for(|open| *open).await;
    }
}
