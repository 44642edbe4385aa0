//! A gate: a test fixture's way to hold a stage open until the test says go.

use tokio::sync::watch;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct GateState {
    open: bool,
    arrivals: usize,
}

/// A latch that holds arrivals until opened, and counts them.
///
/// Clones share the latch. Tests use it to stop a scripted provider at a
/// known point (say, while `start` is pending) and act there.
#[derive(Clone, Debug)]
pub struct Gate {
    state: watch::Sender<GateState>,
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
            state: watch::Sender::new(GateState::default()),
        }
    }

    /// Opens the gate: every waiter, now and later, passes.
    pub fn open(&self) {
        self.state.send_modify(|state| state.open = true);
    }

    /// How many waiters have arrived so far.
    pub fn arrivals(&self) -> usize {
        self.state.borrow().arrivals
    }

    /// Waits until at least `count` waiters have arrived.
    pub async fn arrived(&self, count: usize) {
        let mut receiver = self.state.subscribe();
        // The sender lives in `self`, so the wait can only end by the condition.
        let _ = receiver.wait_for(|state| state.arrivals >= count).await;
    }

    /// Arrives and waits until the gate is open.
    pub async fn pass(&self) {
        let mut receiver = self.state.subscribe();
        self.state.send_modify(|state| state.arrivals += 1);
        let _ = receiver.wait_for(|state| state.open).await;
    }
}
