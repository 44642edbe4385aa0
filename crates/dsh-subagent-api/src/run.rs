//! The run handle: a published child, its result, and its release.

use std::fmt;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::{Steerer, SubagentError, SubagentResult};

type DisposeFuture = Shared<BoxFuture<'static, Result<(), SubagentError>>>;
type ReleaseFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), SubagentError>> + Send>;

/// The release: only the provider's function until the first `dispose`, so
/// a live run does not hold the release's future (or its sharing machinery).
enum DisposeSlot {
    Unstarted(ReleaseFn),
    /// Driven by [`SubagentRun::poll_dispose`] alone: no sharing machinery
    /// until a [`SubagentRun::dispose`] future asks for it.
    Running(BoxFuture<'static, Result<(), SubagentError>>),
    Started(DisposeFuture),
    /// Finished, as seen by [`SubagentRun::poll_dispose`].
    Done(Result<(), SubagentError>),
    /// Transient, under the lock only.
    Taken,
}

enum ResultSlot {
    Pending(BoxFuture<'static, Result<SubagentResult, SubagentError>>),
    Ready(Result<SubagentResult, SubagentError>),
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
///
/// - [`SubagentRun::steerer`], when the provider offers it, delivers a
///   message into the running turn (strict: joined, or refused at once).
///
/// The holder must call `dispose` on every path: success, failure and abort.
pub struct SubagentRun {
    id: String,
    result: ResultSlot,
    dispose: Mutex<DisposeSlot>,
    steerer: Option<Steerer>,
}

impl SubagentRun {
    /// A run handle over a provider's result future and release function.
    ///
    /// `dispose` is called at most once, on the first poll of the first
    /// [`SubagentRun::dispose`] future (or the first
    /// [`SubagentRun::poll_dispose`]).
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
        R: Future<Output = Result<SubagentResult, SubagentError>> + Send + 'static,
        D: FnOnce() -> DF + Send + 'static,
        DF: Future<Output = Result<(), SubagentError>> + Send + 'static,
    {
        Self {
            id: id.into(),
            result: ResultSlot::Pending(result.boxed()),
            dispose: Mutex::new(DisposeSlot::Unstarted(Box::new(move || dispose().boxed()))),
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
    pub async fn result(&mut self) -> Result<SubagentResult, SubagentError> {
        std::future::poll_fn(|cx| self.poll_result(cx).map(Clone::clone)).await
    }

    /// Polls the run's outcome without copying it: the poll-based form of
    /// [`SubagentRun::result`], for hand-written futures. Cancel-safe and
    /// repeatable; once ready, every later poll is ready with the same outcome.
    pub fn poll_result(&mut self, cx: &mut Context<'_>) -> Poll<&Result<SubagentResult, SubagentError>> {
        if let ResultSlot::Pending(pending) = &mut self.result {
            let outcome = ready!(pending.poll_unpin(cx));
            self.result = ResultSlot::Ready(outcome);
        }
        match &self.result {
            ResultSlot::Ready(outcome) => Poll::Ready(outcome),
            ResultSlot::Pending(_) => Poll::Pending,
        }
    }

    /// Consumes the handle and returns its outcome, if the result has already
    /// settled (without copying it). The holder must have released the run
    /// first.
    pub fn into_settled_result(self) -> Option<Result<SubagentResult, SubagentError>> {
        match self.result {
            ResultSlot::Ready(outcome) => Some(outcome),
            ResultSlot::Pending(_) => None,
        }
    }

    /// The outcome, if the result has already been awaited to completion.
    pub fn settled_result(&self) -> Option<&Result<SubagentResult, SubagentError>> {
        match &self.result {
            ResultSlot::Ready(outcome) => Some(outcome),
            ResultSlot::Pending(_) => None,
        }
    }

    /// Releases the child: cancels remaining work and waits until it is gone.
    ///
    /// The returned future owns what it needs, so it may outlive the handle.
    pub fn dispose(&self) -> impl Future<Output = Result<(), SubagentError>> + Send + 'static + use<> {
        let mut slot = self.dispose.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = match std::mem::replace(&mut *slot, DisposeSlot::Taken) {
            DisposeSlot::Started(shared) => shared,
            // Lazy: the release itself runs on the first poll.
            DisposeSlot::Unstarted(release) => async move { release().await }.boxed().shared(),
            // Already under way through `poll_dispose`: share the same release.
            DisposeSlot::Running(running) => running.shared(),
            DisposeSlot::Done(outcome) => futures::future::ready(outcome).boxed().shared(),
            DisposeSlot::Taken => futures::future::ready(Err(SubagentError::failed("subagent run release was lost")))
                .boxed()
                .shared(),
        };
        *slot = DisposeSlot::Started(shared.clone());
        shared
    }

    /// Polls the release: the poll-based form of [`SubagentRun::dispose`],
    /// for a holder that drives the release itself. The release runs exactly
    /// once whichever form starts it, and both forms see the same outcome;
    /// this one allocates nothing to share it unless a `dispose` future is
    /// also taken.
    pub fn poll_dispose(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SubagentError>> {
        let slot = self.dispose.get_mut().unwrap_or_else(PoisonError::into_inner);
        loop {
            let outcome = match slot {
                DisposeSlot::Unstarted(_) => {
                    if let DisposeSlot::Unstarted(release) = std::mem::replace(slot, DisposeSlot::Taken) {
                        *slot = DisposeSlot::Running(release());
                    }
                    continue;
                }
                DisposeSlot::Running(running) => ready!(running.poll_unpin(cx)),
                DisposeSlot::Started(shared) => ready!(shared.poll_unpin(cx)),
                DisposeSlot::Done(outcome) => return Poll::Ready(outcome.clone()),
                DisposeSlot::Taken => Err(SubagentError::failed("subagent run release was lost")),
            };
            *slot = DisposeSlot::Done(outcome.clone());
            return Poll::Ready(outcome);
        }
    }

    /// Wraps the result future, for layers that observe settlement (lifecycle events).
    #[must_use]
    pub fn map_result<F, Fut>(mut self, wrap: F) -> Self
    where
        F: FnOnce(BoxFuture<'static, Result<SubagentResult, SubagentError>>) -> Fut,
        Fut: Future<Output = Result<SubagentResult, SubagentError>> + Send + 'static,
    {
        self.result = match self.result {
            ResultSlot::Pending(pending) => ResultSlot::Pending(wrap(pending).boxed()),
            ResultSlot::Ready(outcome) => ResultSlot::Pending(wrap(futures::future::ready(outcome).boxed()).boxed()),
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
    async fn poll_dispose_and_dispose_share_one_release() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let mut run = SubagentRun::new("r", async { Ok(SubagentResult::completed("x")) }, move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = rx.await;
            Err(SubagentError::failed("reap failed"))
        });
        // Started by `poll_dispose`, then shared with a `dispose` future.
        assert!(
            std::future::poll_fn(|cx| Poll::Ready(run.poll_dispose(cx)))
                .await
                .is_pending()
        );
        let shared = run.dispose();
        tx.send(()).unwrap();
        let polled = std::future::poll_fn(|cx| run.poll_dispose(cx)).await;
        assert_eq!(shared.await, polled);
        assert_eq!(run.dispose().await, polled);
        assert_eq!(std::future::poll_fn(|cx| run.poll_dispose(cx)).await, polled);
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
        assert!(run.settled_result().is_some());
        assert_eq!(run.into_settled_result().unwrap().unwrap().text(), "late");
    }
}
