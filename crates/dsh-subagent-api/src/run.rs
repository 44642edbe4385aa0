//! The run handle: a published child, its result, and its release.

use std::fmt;
use std::future::Future;
use std::sync::{Mutex, OnceLock, PoisonError};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::{Steerer, SubagentError, SubagentResult};

type Outcome = Result<SubagentResult, SubagentError>;
type Release = Shared<BoxFuture<'static, Result<(), SubagentError>>>;
type ReleaseFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), SubagentError>> + Send>;

enum ResultSlot {
    Pending(BoxFuture<'static, Outcome>),
    /// Boxed: a live run (one per delegation in flight) carries a pointer,
    /// not room for an outcome it does not have yet.
    Ready(Box<Outcome>),
}

/// A published child run. Ownership of the child passes to the holder.
///
/// - [`SubagentRun::result`] settles once, with the child's
///   [`SubagentResult`]. Child-level failures are results (`error`,
///   `aborted`, …); `Err` is kept for infrastructure faults that no stop
///   reason describes. It is cancel-safe: a dropped wait loses nothing, and
///   every later call returns the same outcome.
/// - [`SubagentRun::dispose`] cancels whatever remains, waits for the result
///   to settle and for the child's resources to be released. The provider's
///   release code runs exactly once, however often and however concurrently
///   `dispose` is called; every caller sees the same outcome. It fails only for
///   a release failure of its own.
/// - [`SubagentRun::steerer`], when the provider offers it, delivers a
///   message into the running turn (strict: joined, or refused at once).
///
/// The holder must call `dispose` on every path: success, failure and abort.
pub struct SubagentRun {
    id: String,
    result: ResultSlot,
    /// The provider's release function, until the first `dispose` takes it.
    release_fn: Mutex<Option<ReleaseFn>>,
    /// The one release every `dispose` shares, made by the first of them.
    release: OnceLock<Release>,
    steerer: Option<Steerer>,
}

impl SubagentRun {
    /// A run handle over a provider's result future and release function.
    ///
    /// `dispose` is called at most once, by the first
    /// [`SubagentRun::dispose`]; the future it returns runs when that (or
    /// any later) `dispose` future is first polled.
    ///
    /// ```
    /// use dsh_subagent_api::{SubagentRun, SubagentResult};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let mut run = SubagentRun::new(
    ///     "child-1",
    ///     async { Ok(SubagentResult::completed("done")) },
    ///     || async { Ok(()) },
    /// );
    /// assert_eq!(run.result().await.unwrap().text(), "done");
    /// run.dispose().await.unwrap();
    /// run.dispose().await.unwrap(); // idempotent
    /// # });
    /// ```
    pub fn new<R, D, DF>(id: impl Into<String>, result: R, dispose: D) -> Self
    where
        R: Future<Output = Outcome> + Send + 'static,
        D: FnOnce() -> DF + Send + 'static,
        DF: Future<Output = Result<(), SubagentError>> + Send + 'static,
    {
        Self {
            id: id.into(),
            result: ResultSlot::Pending(result.boxed()),
            release_fn: Mutex::new(Some(Box::new(move || dispose().boxed()))),
            release: OnceLock::new(),
            steerer: None,
        }
    }

    /// Offers live delivery into this run's turn (see [`Steerer`]).
    #[must_use]
    pub fn with_steerer(mut self, steerer: Steerer) -> Self {
        self.steerer = Some(steerer);
        self
    }

    /// The run's live-delivery handle, when its provider accepts messages
    /// mid-turn. Clone it to steer while another task awaits the result.
    pub fn steerer(&self) -> Option<&Steerer> {
        self.steerer.as_ref()
    }

    /// The run's id: the child's id for a local child, a parent-unique id otherwise.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Waits for the run's outcome. Cancel-safe and repeatable.
    pub async fn result(&mut self) -> Outcome {
        self.settled().await;
        match &self.result {
            ResultSlot::Ready(outcome) => Outcome::clone(outcome),
            ResultSlot::Pending(_) => Err(SubagentError::failed("subagent run result was not settled")),
        }
    }

    /// Waits until the run's outcome has settled, without copying it: once
    /// this returns, [`SubagentRun::result`] returns at once. Cancel-safe.
    pub async fn settled(&mut self) {
        if let ResultSlot::Pending(pending) = &mut self.result {
            self.result = ResultSlot::Ready(Box::new(pending.await));
        }
    }

    /// Releases the child: cancels remaining work and waits until it is gone.
    ///
    /// The returned future owns what it needs, so it may outlive the handle.
    pub fn dispose(&self) -> impl Future<Output = Result<(), SubagentError>> + Send + 'static + use<> {
        self.release
            .get_or_init(|| {
                let release = self.release_fn.lock().unwrap_or_else(PoisonError::into_inner).take();
                match release {
                    Some(release) => release().shared(),
                    None => futures::future::ready(Err(SubagentError::failed("subagent run release was lost")))
                        .boxed()
                        .shared(),
                }
            })
            .clone()
    }

    /// The outcome, moved out of the handle once it has settled (`None`
    /// before): for a holder that has awaited [`SubagentRun::settled`] and
    /// released the run, so the outcome is not copied.
    pub fn into_outcome(self) -> Option<Outcome> {
        match self.result {
            ResultSlot::Ready(outcome) => Some(*outcome),
            ResultSlot::Pending(_) => None,
        }
    }

    /// Wraps the result future, for layers that observe settlement (lifecycle events).
    #[must_use]
    pub fn map_result<F, Fut>(mut self, wrap: F) -> Self
    where
        F: FnOnce(BoxFuture<'static, Outcome>) -> Fut,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        self.result = match self.result {
            ResultSlot::Pending(pending) => ResultSlot::Pending(wrap(pending).boxed()),
            ResultSlot::Ready(outcome) => ResultSlot::Pending(wrap(futures::future::ready(*outcome).boxed()).boxed()),
        };
        self
    }
}

impl fmt::Debug for SubagentRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubagentRun")
            .field("id", &self.id)
            .field("settled", &matches!(self.result, ResultSlot::Ready(_)))
            .field("steerable", &self.steerer.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn dispose_runs_once_however_often_it_is_called() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let run = SubagentRun::new("r", async { Ok(SubagentResult::completed("x")) }, move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Err(SubagentError::failed("reap failed"))
        });
        let first = run.dispose();
        let second = run.dispose();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "dispose is lazy");
        let (a, b) = futures::join!(first, second);
        assert_eq!(a, b);
        assert_eq!(run.dispose().await, a);
        drop(run);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn result_is_cancel_safe_and_repeatable() {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let mut run = SubagentRun::new(
            "r",
            async move {
                let _ = rx.await;
                Ok(SubagentResult::completed("late"))
            },
            || async { Ok(()) },
        );
        // A wait that is dropped before settlement loses nothing.
        assert!(futures::poll!(Box::pin(run.result())).is_pending());
        tx.send(()).unwrap();
        assert_eq!(run.result().await.unwrap().text(), "late");
        assert_eq!(run.result().await.unwrap().text(), "late");
    }
}
