//! The requests in flight to each model of the client's endpoint, and the
//! limit on them: none until one is configured, learned or kept.
//!
//! A server that serves one request at a time and interrupts a running
//! stream when another arrives (llama-cpp-python's default
//! `interrupt_requests`) cuts every parallel child's stream, and their
//! retries cut each other again. Once a stream is cut while another
//! request to the same model is in flight, the model's slot allows one
//! request at a time, and the cut request waits for it instead of racing
//! its sibling. Where no limit was ever set, taking a place is one
//! uncontended lock and a count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Concurrency;

/// Where a model's limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The client's configuration: never lowered by what is kept, only by
    /// a cut that proves it too high.
    Configured,
    /// A cut seen by this client.
    Learned,
    /// An earlier run's, handed to the client at its start.
    Kept,
}

/// The slots of every model of one endpoint.
#[derive(Debug)]
pub(crate) struct Slots {
    configured: Option<Concurrency>,
    models: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Slots {
    /// Slots whose every model starts at `configured`, when set.
    pub(crate) fn new(configured: Option<Concurrency>) -> Self {
        Self {
            configured,
            models: Mutex::default(),
        }
    }

    /// The slot of `model`, made on first use.
    pub(crate) fn of(&self, model: &str) -> Arc<Slot> {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = models.get(model) {
            return Arc::clone(slot);
        }
        let limit = self.configured.map(|limit| (limit, Source::Configured));
        let slot = Arc::new(Slot::new(limit));
        models.insert(model.to_owned(), Arc::clone(&slot));
        slot
    }

    /// `model`'s limit when the server taught it, here or in an earlier run.
    pub(crate) fn learned(&self, model: &str) -> Option<Concurrency> {
        let models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        let (limit, source) = models.get(model)?.limit()?;
        (source != Source::Configured).then_some(limit)
    }
}

/// One model's requests in flight, and its limit.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Mutex<State>,
    /// Told when a place is given back under a limit.
    freed: Notify,
}

#[derive(Debug)]
struct State {
    /// Requests in flight, those taken before a limit was set included.
    running: usize,
    limit: Option<(Concurrency, Source)>,
}

impl Slot {
    fn new(limit: Option<(Concurrency, Source)>) -> Self {
        Self {
            state: Mutex::new(State { running: 0, limit }),
            freed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limit and where it came from, when there is one.
    pub(crate) fn limit(&self) -> Option<(Concurrency, Source)> {
        self.state().limit
    }

    /// A place among the requests in flight, and how long it was waited
    /// for (zero when one was free at once). Dropping the wait gives up
    /// nothing: a place is counted only once it is handed out.
    pub(crate) async fn take(self: &Arc<Self>) -> (Place, Duration) {
        if let Some(place) = self.try_take() {
            return (place, Duration::ZERO);
        }
        let began = Instant::now();
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Listening before looking: a place freed in between is heard.
            freed.as_mut().enable();
            if let Some(place) = self.try_take() {
                return (place, began.elapsed());
            }
            freed.await;
        }
    }

    fn try_take(self: &Arc<Self>) -> Option<Place> {
        let mut state = self.state();
        if state.limit.is_some_and(|(limit, _)| state.running >= limit.count()) {
            return None;
        }
        state.running += 1;
        Some(Place(Arc::clone(self)))
    }

    /// Whether a request besides the caller's own place is in flight.
    pub(crate) fn others_in_flight(&self) -> bool {
        self.state().running > 1
    }

    /// One request at a time from now on, after a cut beside another
    /// request; `true` when that lowered the limit (to be said once).
    pub(crate) fn one_at_a_time(&self) -> bool {
        let mut state = self.state();
        if state.limit.is_some_and(|(limit, _)| limit == Concurrency::ONE) {
            return false;
        }
        state.limit = Some((Concurrency::ONE, Source::Learned));
        true
    }

    /// Takes `limit`, kept from an earlier run, unless the configuration
    /// or this client's own lesson already set one; `true` when taken.
    pub(crate) fn keep(&self, limit: Concurrency) -> bool {
        let mut state = self.state();
        if state.limit.is_some_and(|(_, source)| source != Source::Kept) {
            return false;
        }
        state.limit = Some((limit, Source::Kept));
        drop(state);
        self.freed.notify_waiters();
        true
    }
}

/// A request's place among those in flight, given back when dropped.
#[derive(Debug)]
pub(crate) struct Place(Arc<Slot>);

impl Drop for Place {
    fn drop(&mut self) {
        let limited = {
            let mut state = self.0.state();
            state.running = state.running.saturating_sub(1);
            state.limit.is_some()
        };
        if limited {
            self.0.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_limit_nobody_waits_and_one_at_a_time_queues_the_rest() {
        let slots = Slots::new(None);
        let slot = slots.of("m");
        let (first, waited) = slot.take().await;
        assert!(waited.is_zero());
        let (second, _) = slot.take().await;
        assert!(slot.others_in_flight());
        assert!(slot.one_at_a_time());
        assert!(!slot.one_at_a_time(), "said once");
        assert_eq!(slots.learned("m"), Some(Concurrency::ONE));
        // Both places taken before the limit must be given back first.
        let waiting = tokio::spawn({
            let slot = Arc::clone(&slot);
            async move { slot.take().await.1 }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(first);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        drop(second);
        assert!(waiting.await.unwrap() >= Duration::from_millis(20));
        // Another model has its own slot.
        assert_eq!(slots.learned("other"), None);
    }

    #[tokio::test]
    async fn a_configured_limit_is_not_kept_over_and_a_dropped_wait_takes_nothing() {
        let slots = Slots::new(Concurrency::new(2).ok());
        let slot = slots.of("m");
        assert!(!slot.keep(Concurrency::ONE));
        assert_eq!(slots.learned("m"), None, "configured, not learned");
        let (_a, _) = slot.take().await;
        let (_b, _) = slot.take().await;
        let waiting = tokio::time::timeout(Duration::from_millis(5), slot.take()).await;
        assert!(waiting.is_err());
        assert_eq!(slot.state().running, 2);
        let kept = Slots::new(None);
        assert!(kept.of("m").keep(Concurrency::ONE));
        assert_eq!(kept.learned("m"), Some(Concurrency::ONE));
    }
}
