//! One foreground delegation: start, wait, release — on every path.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use dsh_subagent::SubagentService;
use dsh_subagent_api::{CancellationToken, StartRequest, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tools::{ToolError, ToolOutput, panic_message};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::{render, wording};

/// How long a release may still run once the call's token is cancelled.
///
/// After that the release is abandoned (dropped, which cancels it) and the
/// call returns an error saying the child may still be running. Without a
/// cancellation a release is awaited for as long as it takes.
pub const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// Runs one delegation to completion.
///
/// The request's token is the call's own child token: cancelling the call
/// cancels the child, and nothing the tool does cancels the caller. Once the
/// provider publishes a run, `dispose` is called exactly once before this
/// returns — on success, on failure and on cancellation. If this future is
/// dropped instead (the harness abandoned the call), the child is cancelled
/// and released in the background.
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
/// provider answers, so an in-flight delegation holds little memory.
pub(crate) fn delegate<'a>(
    service: &'a SubagentService,
    provider: &'a str,
    request: StartRequest,
) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send + 'a {
    let cancel = request.cancel.clone();
    let starting = AssertUnwindSafe(service.start(provider, request))
        .catch_unwind()
        .boxed();
    async move {
        let run = start(starting, &cancel).await?;
        let mut guard = RunGuard { run: Some(run), cancel };
        let (result, disposed) = guard.settle().await;
        render::settled(result, disposed)
    }
}

type Starting<'a> = BoxFuture<'a, std::thread::Result<Result<SubagentRun, SubagentError>>>;

/// Waits for the start; a start that ignores the cancellation is dropped.
async fn start(starting: Starting<'_>, cancel: &CancellationToken) -> Result<SubagentRun, ToolError> {
    // Biased: after a cancellation the start is polled once more first, so a
    // provider that reacts to the token (or finishes) reports in its own words.
    let outcome = tokio::select! {
        biased;
        outcome = starting => outcome,
        () = cancel.cancelled() => {
            return Err(ToolError::new(wording::START_ABANDONED).with_code("ABORTED"));
        }
    };
    match outcome {
        Ok(Ok(run)) => Ok(run),
        Ok(Err(error)) => Err(render::start_failed(error)),
        Err(panic) => Err(panicked("start", &*panic)),
    }
}

/// Owns a published run until it is released.
struct RunGuard {
    run: Option<SubagentRun>,
    cancel: CancellationToken,
}

impl RunGuard {
    async fn settle(&mut self) -> (Result<SubagentResult, SubagentError>, Result<(), SubagentError>) {
        match self.run.as_mut() {
            Some(run) => {
                let settled = settle(run, &self.cancel).await;
                self.run = None;
                settled
            }
            None => (Err(SubagentError::failed("subagent run was already released")), Ok(())),
        }
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let Some(mut run) = self.run.take() else { return };
        // The call was abandoned mid-run: stop the child, then settle and
        // release it exactly as a finished call would.
        self.cancel.cancel();
        let cancel = self.cancel.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let (_, Err(error)) = settle(&mut run, &cancel).await {
                        tracing::warn!(
                            run = run.id(),
                            "subagent release after an abandoned call failed: {error}"
                        );
                    }
                });
            }
            Err(_) => tracing::warn!(
                run = run.id(),
                "subagent call abandoned outside a tokio runtime; the child was cancelled but not released"
            ),
        }
    }
}

/// Waits for the result, then releases the run; `dispose` is called exactly once.
///
/// After a cancellation the provider settles the result as `aborted`; a
/// provider that instead finishes releasing first has nothing left to
/// report, and the run reads as cancelled. A result or release still pending
/// [`RELEASE_GRACE`] after the cancellation is abandoned.
pub(crate) async fn settle(
    run: &mut SubagentRun,
    cancel: &CancellationToken,
) -> (Result<SubagentResult, SubagentError>, Result<(), SubagentError>) {
    let mut dispose = std::pin::pin!(AssertUnwindSafe(run.dispose()).catch_unwind());
    // Lazy: the timer is created on its first poll, which only the
    // cancellation path reaches, and only while something is still pending.
    let mut grace = Grace::default();
    let mut disposed = None;
    let result = tokio::select! {
        biased;
        result = catch_result(run) => result,
        () = cancel.cancelled() => tokio::select! {
            biased;
            result = catch_result(run) => result,
            released = dispose.as_mut() => {
                disposed = Some(caught_release(released));
                match catch_result(run).now_or_never() {
                    Some(result) => result,
                    None => Ok(SubagentResult::new(StopReason::Aborted, Vec::new())),
                }
            }
            () = &mut grace => {
                disposed = Some(Err(release_abandoned()));
                Ok(SubagentResult::new(StopReason::Aborted, Vec::new()))
            }
        },
    };
    let disposed = match disposed {
        Some(disposed) => disposed,
        None => tokio::select! {
            biased;
            released = dispose.as_mut() => caught_release(released),
            () = cancel.cancelled() => tokio::select! {
                biased;
                released = dispose.as_mut() => caught_release(released),
                () = &mut grace => Err(release_abandoned()),
            },
        },
    };
    (result, disposed)
}

fn caught_release(
    released: Result<Result<(), SubagentError>, Box<dyn std::any::Any + Send>>,
) -> Result<(), SubagentError> {
    released.unwrap_or_else(|panic| {
        Err(SubagentError::failed(wording::provider_panicked(
            "dispose",
            &panic_message(&*panic),
        )))
    })
}

fn release_abandoned() -> SubagentError {
    SubagentError::failed_with_code(wording::RELEASE_ABANDONED, "RELEASE_ABANDONED")
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

async fn catch_result(run: &mut SubagentRun) -> Result<SubagentResult, SubagentError> {
    match AssertUnwindSafe(run.result()).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(SubagentError::failed(wording::provider_panicked(
            "the run",
            &panic_message(&*panic),
        ))),
    }
}

fn panicked(stage: &str, payload: &(dyn std::any::Any + Send)) -> ToolError {
    ToolError::new(wording::provider_panicked(stage, &panic_message(payload))).with_code("PROVIDER_PANICKED")
}
