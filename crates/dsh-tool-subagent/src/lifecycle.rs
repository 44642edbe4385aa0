//! One foreground delegation: start, wait, release — on every path.

use std::panic::AssertUnwindSafe;

use dsh_subagent::SubagentService;
use dsh_subagent_api::{CancellationToken, StartRequest, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tools::{ToolError, ToolOutput, panic_message};
use futures::FutureExt;

use crate::{render, wording};

/// Runs one delegation to completion.
///
/// The request's token is the call's own child token: cancelling the call
/// cancels the child, and nothing the tool does cancels the caller. Once the
/// provider publishes a run, `dispose` is awaited exactly once before this
/// returns — on success, on failure and on cancellation. If this future is
/// dropped instead (the harness abandoned the call), the child is cancelled
/// and released in the background.
pub(crate) async fn delegate(
    service: &SubagentService,
    provider: &str,
    request: StartRequest,
) -> Result<ToolOutput, ToolError> {
    let cancel = request.cancel.clone();
    let run = match AssertUnwindSafe(service.start(provider, request)).catch_unwind().await {
        Ok(Ok(run)) => run,
        Ok(Err(error)) => return Err(render::start_failed(error)),
        Err(panic) => return Err(panicked("start", &*panic)),
    };
    let mut guard = RunGuard { run: Some(run), cancel };
    let (result, disposed) = guard.settle().await;
    render::settled(result, disposed)
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

/// Waits for the result, then releases the run; `dispose` is awaited exactly once.
///
/// After a cancellation the provider settles the result as `aborted`; a
/// provider that instead finishes releasing first has nothing left to
/// report, and the run reads as cancelled.
pub(crate) async fn settle(
    run: &mut SubagentRun,
    cancel: &CancellationToken,
) -> (Result<SubagentResult, SubagentError>, Result<(), SubagentError>) {
    let mut dispose = std::pin::pin!(AssertUnwindSafe(run.dispose()).catch_unwind());
    let mut disposed = None;
    let result = tokio::select! {
        biased;
        result = catch_result(run) => result,
        () = cancel.cancelled() => tokio::select! {
            biased;
            result = catch_result(run) => result,
            released = dispose.as_mut() => {
                disposed = Some(released);
                match catch_result(run).now_or_never() {
                    Some(result) => result,
                    None => Ok(SubagentResult::new(StopReason::Aborted, Vec::new())),
                }
            }
        },
    };
    let released = match disposed {
        Some(released) => released,
        None => dispose.await,
    };
    let disposed = released.unwrap_or_else(|panic| {
        Err(SubagentError::failed(wording::provider_panicked(
            "dispose",
            &panic_message(&*panic),
        )))
    });
    (result, disposed)
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
