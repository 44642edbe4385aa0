//! The run handle: a published child, its result, and its release.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

use futures::FutureExt;
use futures::future::{BoxFuture, Either};

use crate::{Steerer, SubagentError, SubagentResult, wording};

type Outcome = Result<SubagentResult, SubagentError>;
type ReleaseFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), SubagentError>> + Send>;

enum ResultSlot {
    Pending(BoxFuture<'static, Outcome>),
    /// Boxed: a live run (one per delegation in flight) carries a pointer,
    /// not room for an outcome it does not have yet.
    Ready(Box<Outcome>),
    /// The result future panicked while [`SubagentRun::dispose`] drove it;
    /// the next wait for the result resumes that panic, so the holder sees
    /// it where it reads the result.
    Panicked(Box<dyn Any + Send>),
    /// Moved out by [`SubagentRun::take_result`].
    Taken,
}

/// The release, in place: a `dispose` dropped mid-way leaves it here for
/// the next call to resume.
enum ReleaseSlot {
    /// Not started: the provider's release function.
    Unstarted(ReleaseFn),
    /// Started and not finished.
    Running(BoxFuture<'static, Result<(), SubagentError>>),
    /// Finished: every later `dispose` returns this. The error is boxed, so
    /// a live run (one per delegation in flight) does not carry room for it.
    Done(Result<(), Box<SubagentError>>),
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
///   release code runs exactly once, however often `dispose` is called, and
///   every call sees the same outcome; it takes the handle by `&mut`, so no
///   two calls overlap and nothing is shared. It fails only for a release
///   failure of its own.
/// - [`SubagentRun::steerer`], when the provider offers it, delivers a
///   message into the running turn (strict: joined, or refused at once).
///
/// The holder must call `dispose` on every path: success, failure and abort.
pub struct SubagentRun {
    /// Boxed, not a `String`: a settlement holds the handle for as long as
    /// its child runs, one per delegation in flight.
    id: Box<str>,
    result: ResultSlot,
    release: ReleaseSlot,
    steerer: Option<Steerer>,
}

impl SubagentRun {
    /// A run handle over a provider's result future and release function.
    ///
    /// `dispose` is called at most once, when the first
    /// [`SubagentRun::dispose`] is first polled.
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
            id: id.into().into_boxed_str(),
            result: ResultSlot::Pending(result.boxed()),
            release: ReleaseSlot::Unstarted(Box::new(move || dispose().boxed())),
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

    /// The run's id, as its provider names it. The in-process providers use
    /// the child agent's id (a UUID, which also names its transcript); the
    /// ACP provider `acp-<uuid>`. The service promises no uniqueness of its
    /// own (a test provider may name every run of one parent alike); the
    /// service's run events number runs apart (`RunInfo::run_id`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Waits for the run's outcome. Cancel-safe and repeatable.
    pub async fn result(&mut self) -> Outcome {
        self.settled().await;
        match &self.result {
            ResultSlot::Ready(outcome) => Outcome::clone(outcome),
            ResultSlot::Pending(_) | ResultSlot::Panicked(_) => Err(SubagentError::failed(wording::RUN_NOT_SETTLED)),
            ResultSlot::Taken => Err(SubagentError::failed(wording::RESULT_TAKEN)),
        }
    }

    /// Waits for the run's outcome and moves it out of the handle, for a
    /// holder that reads it once (a settlement): nothing is copied, and an
    /// outcome that arrives here is never stored in the handle. Cancel-safe:
    /// a wait dropped before the outcome arrives loses nothing.
    ///
    /// Once it has returned, the handle has no outcome left:
    /// [`SubagentRun::result`] and this fail, saying so, and
    /// [`SubagentRun::dispose`] releases the child as usual. A result future
    /// that panicked while [`SubagentRun::dispose`] drove it panics here,
    /// once, with the same payload.
    pub async fn take_result(&mut self) -> Outcome {
        std::future::poll_fn(|cx| self.poll_take_result(cx)).await
    }

    /// [`SubagentRun::take_result`] as a poll: for a holder that waits for
    /// the outcome inside a future of its own, which then needs no room for
    /// a wait besides the handle. A delegation in flight is made of such a
    /// future, one per child, so that room counts.
    pub fn poll_take_result(&mut self, cx: &mut Context<'_>) -> Poll<Outcome> {
        if let ResultSlot::Pending(pending) = &mut self.result {
            let outcome = std::task::ready!(pending.as_mut().poll(cx));
            self.result = ResultSlot::Taken;
            return Poll::Ready(outcome);
        }
        // Settled already, taken, or panicked while `dispose` drove it.
        self.resume_panic();
        Poll::Ready(match std::mem::replace(&mut self.result, ResultSlot::Taken) {
            ResultSlot::Ready(outcome) => *outcome,
            ResultSlot::Pending(_) | ResultSlot::Panicked(_) | ResultSlot::Taken => {
                Err(SubagentError::failed(wording::RESULT_TAKEN))
            }
        })
    }

    /// Waits until the run's outcome has settled, without copying it: once
    /// this returns, [`SubagentRun::result`] returns at once. Cancel-safe.
    ///
    /// A result future that panicked while [`SubagentRun::dispose`] drove it
    /// panics here, once, with the same payload.
    pub async fn settled(&mut self) {
        if let ResultSlot::Pending(pending) = &mut self.result {
            self.result = ResultSlot::Ready(Box::new(pending.await));
        }
        self.resume_panic();
    }

    /// Resumes, once, a panic of the result future caught while
    /// [`SubagentRun::dispose`] drove it; the run then reads as failed.
    fn resume_panic(&mut self) {
        if let ResultSlot::Panicked(_) = &self.result {
            let settled = ResultSlot::Ready(Box::new(Err(SubagentError::failed(wording::RUN_PANICKED))));
            if let ResultSlot::Panicked(payload) = std::mem::replace(&mut self.result, settled) {
                std::panic::resume_unwind(payload);
            }
        }
    }

    /// Releases the child: cancels remaining work and waits until it is gone.
    ///
    /// The provider's release runs once, on the first call; every later call
    /// returns its outcome. Cancel-safe: a call dropped mid-way leaves the
    /// release in the handle, and the next call resumes it. While the child
    /// is released, a result still pending is driven too (a provider's
    /// result future may be what notices the cancellation), so a result the
    /// child settles meanwhile is kept and read as usual afterwards.
    pub async fn dispose(&mut self) -> Result<(), SubagentError> {
        if let ReleaseSlot::Unstarted(_) = &self.release {
            let unstarted = std::mem::replace(&mut self.release, ReleaseSlot::Done(Ok(())));
            if let ReleaseSlot::Unstarted(release) = unstarted {
                self.release = ReleaseSlot::Running(release());
            }
        }
        if let ReleaseSlot::Running(release) = &mut self.release {
            // `if let`, not `match`: its scrutinee is dropped before `else`,
            // so no outcome is held across the second await.
            let released = if let Some(released) = release_driving_result(release, &mut self.result).await {
                released
            } else {
                release.await
            };
            self.release = ReleaseSlot::Done(released.map_err(Box::new));
        }
        match &self.release {
            ReleaseSlot::Done(released) => released.as_ref().map_err(|error| SubagentError::clone(error)).copied(),
            // Resolved just above.
            ReleaseSlot::Unstarted(_) | ReleaseSlot::Running(_) => Err(SubagentError::failed(wording::RELEASE_LOST)),
        }
    }

    /// The outcome, moved out of the handle once it has settled (`None`
    /// before): for a holder that has awaited [`SubagentRun::settled`] and
    /// released the run, so the outcome is not copied.
    pub fn into_outcome(self) -> Option<Outcome> {
        match self.result {
            ResultSlot::Ready(outcome) => Some(*outcome),
            ResultSlot::Pending(_) | ResultSlot::Panicked(_) | ResultSlot::Taken => None,
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
            ResultSlot::Panicked(panic) => ResultSlot::Panicked(panic),
            ResultSlot::Taken => ResultSlot::Taken,
        };
        self
    }
}

/// Runs the release while driving a result still pending, so a provider
/// whose result future notices the cancellation gets polled. Returns the
/// release's outcome, or `None` when the release still has to be awaited:
/// no result was pending, or it settled first (it is stored in `result`). Nothing the result
/// produced is held across an await: this future stays small.
async fn release_driving_result(
    release: &mut BoxFuture<'static, Result<(), SubagentError>>,
    result: &mut ResultSlot,
) -> Option<Result<(), SubagentError>> {
    let ResultSlot::Pending(pending) = result else {
        return None;
    };
    let settled = match futures::future::select(release, AssertUnwindSafe(pending).catch_unwind()).await {
        Either::Left((released, _)) => return Some(released),
        Either::Right((settled, _)) => settled,
    };
    *result = match settled {
        Ok(outcome) => ResultSlot::Ready(Box::new(outcome)),
        Err(panic) => ResultSlot::Panicked(panic),
    };
    None
}

impl fmt::Debug for SubagentRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubagentRun")
            .field("id", &self.id)
            .field(
                "settled",
                &matches!(self.result, ResultSlot::Ready(_) | ResultSlot::Taken),
            )
            .field("steerable", &self.steerer.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A release that yields once before it answers, so a result can
    /// settle (or panic) while the release is under way.
    fn yielding_release() -> impl Future<Output = Result<(), SubagentError>> {
        async { Ok(()) }.then(|released| async move {
            tokio::task::yield_now().await;
            released
        })
    }

    /// A run whose result arrives (`"late"`) only once the sender fires.
    fn late_run() -> (futures::channel::oneshot::Sender<()>, SubagentRun) {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let run = SubagentRun::new(
            "r",
            async move {
                let _ = rx.await;
                Ok(SubagentResult::completed("late"))
            },
            || async { Ok(()) },
        );
        (tx, run)
    }

    #[tokio::test]
    async fn dispose_runs_once_however_often_it_is_called() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let mut run = SubagentRun::new("r", async { Ok(SubagentResult::completed("x")) }, move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Err(SubagentError::failed("reap failed"))
        });
        let first = run.dispose();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "dispose is lazy");
        let a = first.await;
        assert_eq!(a, Err(SubagentError::failed("reap failed")));
        assert_eq!(run.dispose().await, a);
        drop(run);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_dropped_dispose_is_resumed_not_restarted() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let mut run = SubagentRun::new("r", async { Ok(SubagentResult::completed("x")) }, move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let _ = rx.await;
                Ok(())
            }
        });
        assert!(futures::poll!(Box::pin(run.dispose())).is_pending());
        tx.send(()).unwrap();
        assert_eq!(run.dispose().await, Ok(()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn dispose_settles_a_pending_result_while_it_releases() {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let mut run = SubagentRun::new(
            "r",
            async { Ok(SubagentResult::new(crate::StopReason::Aborted, Vec::new())) },
            || async move {
                // The release ends only after the result was driven.
                let _ = rx.await;
                Ok(())
            },
        );
        let released = async {
            run.dispose().await.unwrap();
            run.into_outcome()
        };
        let (outcome, ()) = futures::join!(released, async { tx.send(()).unwrap() });
        assert_eq!(outcome.unwrap().unwrap().stop_reason, crate::StopReason::Aborted);
    }

    #[tokio::test]
    async fn a_result_panic_while_releasing_resumes_where_the_result_is_read() {
        let mut run = SubagentRun::new("r", async { panic!("result exploded") }, yielding_release);
        assert_eq!(run.dispose().await, Ok(()), "the release is not the result's panic");
        let panic = AssertUnwindSafe(run.settled()).catch_unwind().await.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"result exploded"));
        assert!(
            run.result().await.is_err(),
            "a panicked result reads as a failure afterwards"
        );
    }

    #[tokio::test]
    async fn a_taken_result_is_moved_out_once_and_the_run_still_releases() {
        let (tx, mut run) = late_run();
        // A wait that is dropped before settlement loses nothing.
        assert!(futures::poll!(Box::pin(run.take_result())).is_pending());
        tx.send(()).unwrap();
        assert_eq!(run.take_result().await.unwrap().text(), "late");
        assert!(
            format!("{run:?}").contains("settled: true"),
            "a taken result had settled"
        );
        let taken = Err(SubagentError::failed(wording::RESULT_TAKEN));
        assert_eq!(run.take_result().await, taken);
        assert_eq!(run.result().await, taken);
        assert_eq!(run.dispose().await, Ok(()));
        assert!(run.into_outcome().is_none());
    }

    #[test]
    fn a_polled_take_waits_for_the_result_then_moves_it_out_once() {
        let (tx, mut run) = late_run();
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        assert!(run.poll_take_result(&mut cx).is_pending());
        tx.send(()).unwrap();
        let Poll::Ready(taken) = run.poll_take_result(&mut cx) else {
            panic!("the result had arrived");
        };
        assert_eq!(taken.unwrap().text(), "late");
        assert_eq!(
            run.poll_take_result(&mut cx),
            Poll::Ready(Err(SubagentError::failed(wording::RESULT_TAKEN)))
        );
    }

    #[tokio::test]
    async fn a_result_settled_by_dispose_can_be_taken() {
        let mut run = SubagentRun::new("r", async { Ok(SubagentResult::completed("x")) }, yielding_release);
        assert_eq!(run.dispose().await, Ok(()));
        assert_eq!(run.take_result().await.unwrap().text(), "x");
    }

    #[tokio::test]
    async fn a_result_panic_while_releasing_resumes_where_it_is_taken() {
        let mut run = SubagentRun::new("r", async { panic!("result exploded") }, yielding_release);
        assert_eq!(run.dispose().await, Ok(()));
        let panic = AssertUnwindSafe(run.take_result()).catch_unwind().await.unwrap_err();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"result exploded"));
        assert_eq!(
            run.take_result().await,
            Err(SubagentError::failed(wording::RUN_PANICKED)),
            "a panicked result reads as a failure afterwards"
        );
    }

    #[tokio::test]
    async fn result_is_cancel_safe_and_repeatable() {
        let (tx, mut run) = late_run();
        // A wait that is dropped before settlement loses nothing.
        assert!(futures::poll!(Box::pin(run.result())).is_pending());
        tx.send(()).unwrap();
        assert_eq!(run.result().await.unwrap().text(), "late");
        assert_eq!(run.result().await.unwrap().text(), "late");
    }
}
