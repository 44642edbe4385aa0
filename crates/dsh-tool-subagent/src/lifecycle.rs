//! One foreground delegation: start, wait, release — on every path.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use dsh_subagent::SubagentService;
use dsh_subagent_api::{CancellationToken, StartRequest, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tools::{ToolError, ToolOutput, panic_message};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::{render, trace, wording};

/// How long a release may still run once the call's token is cancelled.
///
/// After that the release is abandoned (dropped, which cancels it) and the
/// call returns an error saying the child may still be running. Without a
/// cancellation a release is awaited for as long as it takes.
pub const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// Runs one delegation to completion.
///
/// The request carries the call's token: cancelling the call cancels the
/// child, and the tool never cancels it, so nothing the tool does cancels
/// the caller. Once the provider publishes a run, `dispose` is called
/// exactly once before this returns — on success, on failure and on
/// cancellation. If this future is dropped instead (the harness abandoned
/// the call), the child is released in the background: `dispose` cancels
/// what remains of it (the provider contract), exactly as after a
/// cancellation.
///
/// Once the token is cancelled the call always returns, however the provider
/// behaves:
/// - a `start` still pending on the first poll after the cancellation is
///   dropped, which is a cancellation under the provider contract
///   ([`wording::START_ABANDONED`]);
/// - a result or release still pending [`RELEASE_GRACE`] after the
///   cancellation is abandoned ([`wording::RELEASE_ABANDONED`]).
///
/// The grace timer is created only on that cancellation path, so runtimes
/// without the time driver work as long as nothing is cancelled (and fall
/// back to a timer thread when something is).
///
/// Only small handles stay in the returned future while the child runs: the
/// start (request and all) lives in its own allocation, freed once the
/// provider answers, and the wait is a hand-written state machine
/// ([`Settle`]) that holds the run, the token and nothing else until a
/// cancellation needs more.
pub(crate) fn delegate<'a>(service: &'a SubagentService, provider: &'a str, request: StartRequest) -> Delegation<'a> {
    let cancel = request.cancel.clone();
    Delegation::Starting {
        starting: Box::pin(service.start(provider, request)),
        provider,
        cancel,
        cancelled: None,
    }
}

type Starting<'a> = Pin<Box<dyn Future<Output = Result<SubagentRun, SubagentError>> + Send + 'a>>;
type Cancelled = Pin<Box<WaitForCancellationFutureOwned>>;

/// One foreground delegation: the start, then the settlement of its run.
// The whole future is boxed once by `Tool::execute`; boxing `Settle` too
// would add an allocation per call and save nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Delegation<'a> {
    Starting {
        starting: Starting<'a>,
        provider: &'a str,
        cancel: CancellationToken,
        /// Registered on the token only while the start is pending.
        cancelled: Option<Cancelled>,
    },
    Settling(Settle),
    Done,
}

impl Future for Delegation<'_> {
    type Output = Result<ToolOutput, ToolError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Delegation::Starting {
            starting,
            provider,
            cancel,
            cancelled,
        } = this
        {
            // Biased: after a cancellation the start is polled once more
            // first, so a provider that reacts to the token (or finishes)
            // reports in its own words.
            let started = match catch_unwind(AssertUnwindSafe(|| starting.as_mut().poll(cx))) {
                Ok(Poll::Ready(Ok(run))) => Ok(run),
                Ok(Poll::Ready(Err(error))) => Err(render::start_failed(error)),
                Ok(Poll::Pending) => {
                    if !is_cancelled(cancel, cancelled, cx) {
                        return Poll::Pending;
                    }
                    // A start that ignores the cancellation is dropped.
                    Err(ToolError::new(wording::START_ABANDONED).with_code(dsh_subagent_api::ErrorCode::Aborted))
                }
                Err(panic) => Err(panicked("start", &*panic)),
            };
            match started {
                // The finished start (request and all) is freed here, and
                // the token moves on to the settlement (no clone).
                Ok(run) => {
                    trace::started(provider, &run);
                    trace::published(&run, None);
                    if let Delegation::Starting { cancel, .. } = std::mem::replace(this, Delegation::Done) {
                        *this = Delegation::Settling(Settle::new(run, cancel));
                    }
                }
                Err(error) => {
                    *this = Delegation::Done;
                    return Poll::Ready(Err(error));
                }
            }
        }
        match this {
            Delegation::Settling(settle) => {
                let (result, disposed) = std::task::ready!(Pin::new(settle).poll(cx));
                trace::settled(&result);
                trace::disposed(&disposed);
                *this = Delegation::Done;
                Poll::Ready(render::settled(result, disposed))
            }
            Delegation::Starting { .. } | Delegation::Done => Poll::Pending,
        }
    }
}

/// Whether the token is cancelled; if not, the task is woken when it is.
fn is_cancelled(cancel: &CancellationToken, cancelled: &mut Option<Cancelled>, cx: &mut Context<'_>) -> bool {
    if cancel.is_cancelled() {
        return true;
    }
    cancelled
        .get_or_insert_with(|| Box::pin(cancel.clone().cancelled_owned()))
        .as_mut()
        .poll(cx)
        .is_ready()
}

/// Waits for a published run's result, then releases it: `dispose` is called
/// exactly once, and the output is the result and the release outcome.
///
/// After a cancellation the provider settles the result as `aborted`; a
/// provider that instead finishes releasing first has nothing left to
/// report, and the run reads as cancelled. A result or release still pending
/// [`RELEASE_GRACE`] after the cancellation is abandoned.
///
/// If it is dropped before it finishes (the harness abandoned the call), the
/// child is settled and released in the background as after a cancellation:
/// the release (which cancels what remains of the child) runs while the
/// result is awaited. The call's token is the caller's, so it is never
/// cancelled here.
pub(crate) struct Settle {
    run: Option<SubagentRun>,
    cancel: CancellationToken,
    /// Registered on the token only while something is pending.
    cancelled: Option<Cancelled>,
    /// Lazy: the timer is created on its first poll, which only the
    /// cancellation path reaches, and only while something is still pending.
    grace: Grace,
    /// Whether the result has settled (its outcome stays in the run, or in
    /// `outcome` when the run could not give one).
    settled: bool,
    /// Boxed: set only on the rare paths (a panic, an abandoned result), so
    /// a live settlement stays small.
    outcome: Option<Box<Result<SubagentResult, SubagentError>>>,
    disposed: Option<Result<(), SubagentError>>,
    /// A settlement already running in the background: dropping it does not respawn it.
    detached: bool,
    /// The call was abandoned: the settlement proceeds as if cancelled.
    abandoned: bool,
}

type Settled = (Result<SubagentResult, SubagentError>, Result<(), SubagentError>);

impl Settle {
    /// A settlement whose drop abandons nothing: dropping it drops the run.
    pub(crate) fn detached(run: SubagentRun, cancel: CancellationToken) -> Self {
        let mut settle = Self::new(run, cancel);
        settle.detached = true;
        settle
    }

    pub(crate) fn new(run: SubagentRun, cancel: CancellationToken) -> Self {
        Self {
            run: Some(run),
            cancel,
            cancelled: None,
            grace: Grace::default(),
            settled: false,
            outcome: None,
            disposed: None,
            detached: false,
            abandoned: false,
        }
    }

    /// Polls the run's result; a panic settles it as a failure.
    fn poll_result(
        run: &mut SubagentRun,
        outcome: &mut Option<Box<Result<SubagentResult, SubagentError>>>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        match catch_unwind(AssertUnwindSafe(|| run.poll_result(cx).is_ready())) {
            Ok(true) => Poll::Ready(()),
            Ok(false) => Poll::Pending,
            Err(panic) => {
                *outcome = Some(Box::new(Err(SubagentError::failed(wording::provider_panicked(
                    "the run",
                    &panic_message(&*panic),
                )))));
                Poll::Ready(())
            }
        }
    }

    fn poll_dispose(run: &mut SubagentRun, cx: &mut Context<'_>) -> Poll<Result<(), SubagentError>> {
        match catch_unwind(AssertUnwindSafe(|| run.poll_dispose(cx))) {
            Ok(poll) => poll,
            Err(panic) => Poll::Ready(Err(SubagentError::failed(wording::provider_panicked(
                "dispose",
                &panic_message(&*panic),
            )))),
        }
    }
}

impl Future for Settle {
    type Output = Settled;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Settled> {
        let this = &mut *self;
        let Some(run) = this.run.as_mut() else {
            return Poll::Ready((Err(SubagentError::failed("subagent run was already released")), Ok(())));
        };
        if !this.settled {
            if Self::poll_result(run, &mut this.outcome, cx).is_ready() {
                this.settled = true;
            } else {
                if !this.abandoned && !is_cancelled(&this.cancel, &mut this.cancelled, cx) {
                    return Poll::Pending;
                }
                // Cancelled or abandoned: the release runs while the result is awaited.
                if let Poll::Ready(disposed) = Self::poll_dispose(run, cx) {
                    this.disposed = Some(disposed);
                    let mut noop = Context::from_waker(std::task::Waker::noop());
                    if Self::poll_result(run, &mut this.outcome, &mut noop).is_pending() {
                        this.outcome = Some(Box::new(Ok(aborted())));
                    }
                } else if Pin::new(&mut this.grace).poll(cx).is_ready() {
                    this.disposed = Some(Err(release_abandoned()));
                    this.outcome = Some(Box::new(Ok(aborted())));
                } else {
                    return Poll::Pending;
                }
                this.settled = true;
            }
        }
        if this.disposed.is_none() {
            match Self::poll_dispose(run, cx) {
                Poll::Ready(disposed) => this.disposed = Some(disposed),
                Poll::Pending => {
                    if !(this.abandoned || is_cancelled(&this.cancel, &mut this.cancelled, cx))
                        || Pin::new(&mut this.grace).poll(cx).is_pending()
                    {
                        return Poll::Pending;
                    }
                    this.disposed = Some(Err(release_abandoned()));
                }
            }
        }
        let disposed = this.disposed.take().unwrap_or(Ok(()));
        let run = this.run.take();
        let result = match this.outcome.take() {
            Some(outcome) => *outcome,
            None => run
                .and_then(SubagentRun::into_settled_result)
                .unwrap_or_else(|| Err(SubagentError::failed("subagent run result was not settled"))),
        };
        Poll::Ready((result, disposed))
    }
}

impl Drop for Settle {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        let Some(run) = self.run.take() else { return };
        // The call was abandoned mid-run: settle and release the child as
        // after a cancellation (the release stops it). The token is the
        // caller's: it is not ours to cancel.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let mut settle = Settle::new(run, self.cancel.clone());
                settle.settled = self.settled;
                settle.outcome = self.outcome.take();
                settle.disposed = self.disposed.take();
                settle.detached = true;
                settle.abandoned = true;
                handle.spawn(async move {
                    let id = settle.run.as_ref().map(|run| run.id().to_owned()).unwrap_or_default();
                    if let (_, Err(error)) = settle.await {
                        tracing::warn!(run = id, "subagent release after an abandoned call failed: {error}");
                    }
                });
            }
            Err(_) => {
                // No runtime to finish the release on: start it (its first
                // step cancels the child), then let it go.
                let mut run = run;
                let mut noop = Context::from_waker(std::task::Waker::noop());
                let started = self.disposed.is_some() || Self::poll_dispose(&mut run, &mut noop).is_ready();
                tracing::warn!(
                    run = run.id(),
                    released = started,
                    "subagent call abandoned outside a tokio runtime; the child's release was started but not awaited"
                );
            }
        }
    }
}

fn aborted() -> SubagentResult {
    SubagentResult::new(StopReason::Aborted, Vec::new())
}

fn release_abandoned() -> SubagentError {
    SubagentError::failed_with_code(wording::RELEASE_ABANDONED, crate::ErrorCode::ReleaseAbandoned)
}

/// Completes [`RELEASE_GRACE`] after its first poll, and holds nothing (no
/// timer, no memory beyond a pointer) until then.
#[derive(Default)]
struct Grace(Option<BoxFuture<'static, ()>>);

impl Future for Grace {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.get_or_insert_with(|| release_grace().boxed()).poll_unpin(cx)
    }
}

/// Completes [`RELEASE_GRACE`] after its first poll.
///
/// A tokio timer when the runtime has the time driver; otherwise (tokio
/// panics when a timer is created without it) a short-lived thread.
async fn release_grace() {
    match std::panic::catch_unwind(|| tokio::time::sleep(RELEASE_GRACE)) {
        Ok(sleep) => sleep.await,
        Err(_) => {
            let (done, elapsed) = futures::channel::oneshot::channel::<()>();
            let timer = std::thread::Builder::new()
                .name("dsh-subagent-release-grace".to_owned())
                .spawn(move || {
                    std::thread::sleep(RELEASE_GRACE);
                    let _ = done.send(());
                });
            // If no thread can be started the grace ends at once: the call
            // must still return.
            if timer.is_ok() {
                let _ = elapsed.await;
            }
        }
    }
}

fn panicked(stage: &str, payload: &(dyn std::any::Any + Send)) -> ToolError {
    ToolError::new(wording::provider_panicked(stage, &panic_message(payload)))
        .with_code(crate::ErrorCode::ProviderPanicked)
}
