//! Settlement: how a published run is awaited and released, on every route
//! (the `subagent` tool's foreground calls and one-shot tasks, and the
//! control service's continuable activations). How a background run's
//! result and release read as its task's outcome is
//! [`SubagentService::start_as_task`](crate::SubagentService::start_as_task).

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use dsh_subagent_api::{CancellationToken, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tools::panic_message;
use futures::FutureExt;

use crate::wording;

/// How long a release may still run once the holder's token is cancelled.
///
/// After that the release is abandoned (dropped, which cancels it) and the
/// settlement reports [`wording::RELEASE_ABANDONED`]: the child may still be
/// running. Without a cancellation a release is awaited for as long as it
/// takes.
pub const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// A published run, settled: its result and the outcome of its release.
#[derive(Debug)]
pub struct Settled {
    /// The run's result (a panic while awaiting it reads as a failure).
    pub result: Result<SubagentResult, SubagentError>,
    /// The release (`dispose`) outcome.
    pub disposed: Result<(), SubagentError>,
}

/// Awaits a published run's result, then releases it: `dispose` runs exactly
/// once, on every path.
///
/// - The result is awaited against `cancel`, biased towards the result: a
///   provider that reacts to the cancellation reports in its own words.
/// - Once `cancel` fires, the release runs while the result is still
///   awaited, and both are bounded by [`RELEASE_GRACE`]: a result still
///   pending when the release ends reads `aborted`, and a release still
///   pending when the grace ends is abandoned.
/// - A panic in the provider's result or release reads as a failure.
/// - If this future is dropped before it finishes (the caller abandoned the
///   call), the run is released in the background, as after a cancellation.
///   `cancel` is the caller's: it is never cancelled here.
///
/// The grace needs the tokio time driver, and only once `cancel` fires.
pub fn settle(run: SubagentRun, cancel: &CancellationToken) -> impl Future<Output = Settled> + Send + '_ {
    // Armed before the first poll: a settlement dropped unpolled releases too.
    let mut guard = ReleaseOnDrop(Some(run));
    async move {
        let Some(run) = guard.0.as_mut() else {
            // The guard was armed just above; it is never empty here.
            return Settled {
                result: Err(SubagentError::failed(wording::RUN_ALREADY_RELEASED)),
                disposed: Ok(()),
            };
        };
        // While the child runs (the state every delegation in flight is
        // in), this future holds only the wait for its result against the
        // cancellation. What comes after is boxed when it has to wait: the
        // release, its grace timer and their select are not held inline for
        // the whole run.
        // A block of its own, so that nothing of the outcome stays in this
        // future while the rest is awaited.
        let releasing: Releasing<'_> = {
            let waited = awaited(run, cancel).await;
            match waited {
                // The common case: the result is in, and the release ends
                // on its first poll. A release not finished yet is resumed
                // where it stopped (a run's release is cancel-safe).
                Some(Ok(result)) => match guarded(run.dispose(), wording::STAGE_DISPOSE).now_or_never() {
                    Some(disposed) => {
                        // Settled and released: disarm the guard.
                        drop(guard.0.take());
                        return Settled { result, disposed };
                    }
                    None => Box::pin(release_settled(run, cancel, Ok(result))),
                },
                Some(Err(panic)) => Box::pin(release_settled(run, cancel, Err(panic))),
                None => Box::pin(release_cancelled(run)),
            }
        };
        let settled = releasing.await;
        drop(guard.0.take());
        settled
    }
}

type Outcome = Result<SubagentResult, SubagentError>;

/// A panic's payload.
type Panic = Box<dyn Any + Send>;

/// The rest of a settlement, boxed: a release that did not end at once.
type Releasing<'a> = Pin<Box<dyn Future<Output = Settled> + Send + 'a>>;

/// Waits for the run's result against `cancel`, biased towards the result:
/// `None` when `cancel` fired first. A result that is already in (the
/// common case for a quick child) is taken on the first poll, with no wait
/// for the cancellation set up. The outcome is moved out of the run; a
/// panic in the provider's result future is returned as its payload.
async fn awaited(run: &mut SubagentRun, cancel: &CancellationToken) -> Option<Result<Outcome, Panic>> {
    tokio::select! {
        biased;
        // Polled in place: this wait is part of every delegation in flight.
        waited = AssertUnwindSafe(std::future::poll_fn(|cx| run.poll_take_result(cx))).catch_unwind() => Some(waited),
        () = cancel.cancelled() => None,
    }
}

/// After the result: the release, awaited for as long as it takes unless
/// `cancel` fires, then within [`RELEASE_GRACE`]. `waited` is how the wait
/// for the result ended (a panic's payload reads as a failure).
async fn release_settled(run: &mut SubagentRun, cancel: &CancellationToken, waited: Result<Outcome, Panic>) -> Settled {
    let release = guarded(run.dispose(), wording::STAGE_DISPOSE);
    tokio::pin!(release);
    let disposed = tokio::select! {
        biased;
        disposed = &mut release => disposed,
        () = cancel.cancelled() => match tokio::time::timeout(RELEASE_GRACE, release).await {
            Ok(disposed) => disposed,
            Err(_) => Err(release_abandoned()),
        },
    };
    let result = waited.unwrap_or_else(|panic| Err(panicked(wording::STAGE_RUN, &*panic)));
    Settled { result, disposed }
}

/// After a cancellation: the release (which also drives a result still
/// pending, keeping what the child settles meanwhile) within
/// [`RELEASE_GRACE`], then the result as it stands.
async fn release_cancelled(run: &mut SubagentRun) -> Settled {
    let disposed = {
        let release = guarded(run.dispose(), wording::STAGE_DISPOSE);
        tokio::pin!(release);
        // Most releases end at once: the grace timer (a timer-wheel entry
        // registered and removed again) is armed only for one that does not.
        match futures::poll!(release.as_mut()) {
            Poll::Ready(disposed) => disposed,
            Poll::Pending => match tokio::time::timeout(RELEASE_GRACE, release).await {
                Ok(disposed) => disposed,
                Err(_) => Err(release_abandoned()),
            },
        }
    };
    // The result as it stands, moved out rather than copied; a provider
    // that finished releasing first has nothing left to report.
    let result = match AssertUnwindSafe(run.take_result()).catch_unwind().now_or_never() {
        Some(Ok(result)) => result,
        Some(Err(panic)) => Err(panicked(wording::STAGE_RUN, &*panic)),
        None => Ok(aborted()),
    };
    Settled { result, disposed }
}

/// Awaits a provider future; a panic in it reads as a failure of `stage`.
async fn guarded<T>(future: impl Future<Output = Result<T, SubagentError>>, stage: &str) -> Result<T, SubagentError> {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked(stage, &*panic)))
}

fn panicked(stage: &str, payload: &(dyn std::any::Any + Send)) -> SubagentError {
    SubagentError::failed(wording::provider_panicked(stage, &panic_message(payload)))
}

fn aborted() -> SubagentResult {
    SubagentResult::new(StopReason::Aborted, Vec::new())
}

fn release_abandoned() -> SubagentError {
    SubagentError::failed_with_code(
        wording::RELEASE_ABANDONED,
        dsh_subagent_api::ErrorCode::ReleaseAbandoned,
    )
}

/// Releases a run whose settlement was dropped before it finished.
struct ReleaseOnDrop(Option<SubagentRun>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let Some(mut run) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                // As after a cancellation: the release (which cancels what
                // remains of the child) runs while the result is awaited.
                handle.spawn(async move {
                    if let Err(error) = release_cancelled(&mut run).await.disposed {
                        tracing::warn!(run = run.id(), "{}", wording::abandoned_release_failed(&error));
                    }
                });
            }
            Err(_) => {
                // No runtime to finish the release on: start it (its first
                // step cancels the child), then let it go.
                let finished = guarded(run.dispose(), wording::STAGE_DISPOSE).now_or_never().is_some();
                tracing::warn!(
                    run = run.id(),
                    released = finished,
                    "{}",
                    wording::RELEASE_OUTSIDE_RUNTIME
                );
            }
        }
    }
}
