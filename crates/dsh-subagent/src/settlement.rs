//! Settlement: how a published run is awaited and released, on every route
//! (the `subagent` tool's foreground calls and one-shot tasks, and the
//! control service's continuable activations), and how a background run's
//! result and release read as its task's outcome (docs/contract.md,
//! "Background tasks").

use std::panic::AssertUnwindSafe;
use std::task::Poll;
use std::time::Duration;

use dsh_subagent_api::{CancellationToken, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tasks::TaskOutcome;
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
        let settled = match guard.0.as_mut() {
            Some(run) => settle_run(run, cancel).await,
            // The guard was armed just above; it is never empty here.
            None => Settling::Done(Settled {
                result: Err(SubagentError::failed(wording::RUN_ALREADY_RELEASED)),
                disposed: Ok(()),
            }),
        };
        // Settled and released: disarm the guard, and move the outcome out
        // of the run instead of copying it.
        let run = guard.0.take();
        match settled {
            Settling::Released(disposed) => Settled {
                result: run
                    .and_then(SubagentRun::into_outcome)
                    .unwrap_or_else(|| Err(SubagentError::failed(wording::RUN_NOT_SETTLED))),
                disposed,
            },
            Settling::Done(settled) => settled,
        }
    }
}

/// How [`settle_run`] ended.
enum Settling {
    /// The result settled in the run (read it from there) and the release
    /// ended with this.
    Released(Result<(), SubagentError>),
    /// The whole settlement: after a panic in the result, or a cancellation
    /// whose result did not settle.
    Done(Settled),
}

async fn settle_run(run: &mut SubagentRun, cancel: &CancellationToken) -> Settling {
    // A result that is already in (the common case for a quick child) is
    // taken on the first poll, with no wait for the cancellation set up.
    // Only a panic payload is held across the release, not the outcome: the
    // run keeps that until it is moved out at the end. A cancellation before
    // the result goes to the boxed cancel path: it is rare, and this future
    // (held for every delegation in flight) stays sized for the common path.
    let waited = {
        let mut waiting = std::pin::pin!(AssertUnwindSafe(run.settled()).catch_unwind());
        if let Poll::Ready(waited) = futures::poll!(waiting.as_mut()) {
            Some(waited)
        } else {
            tokio::select! {
                biased;
                waited = waiting => Some(waited),
                () = cancel.cancelled() => None,
            }
        }
    };
    let Some(waited) = waited else {
        return Box::pin(release_cancelled(run)).await;
    };
    // Boxed: the release's future is not held inline by this one (held for
    // every delegation in flight) next to the wait for a cancellation.
    let mut release = Box::pin(guarded(run.dispose(), wording::STAGE_DISPOSE));
    let disposed = tokio::select! {
        biased;
        disposed = &mut release => disposed,
        () = cancel.cancelled() => match tokio::time::timeout(RELEASE_GRACE, release).await {
            Ok(disposed) => disposed,
            Err(_) => Err(release_abandoned()),
        },
    };
    match waited {
        Ok(()) => Settling::Released(disposed),
        Err(panic) => Settling::Done(Settled {
            result: Err(panicked(wording::STAGE_RUN, &*panic)),
            disposed,
        }),
    }
}

/// After a cancellation: the release (which also drives a result still
/// pending, keeping what the child settles meanwhile) within
/// [`RELEASE_GRACE`], then the result as it stands.
async fn release_cancelled(run: &mut SubagentRun) -> Settling {
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
    // The result as it stands, moved out at the end rather than copied; a
    // provider that finished releasing first has nothing left to report.
    match AssertUnwindSafe(run.settled()).catch_unwind().now_or_never() {
        Some(Ok(())) => Settling::Released(disposed),
        Some(Err(panic)) => Settling::Done(Settled {
            result: Err(panicked(wording::STAGE_RUN, &*panic)),
            disposed,
        }),
        None => Settling::Done(Settled {
            result: Ok(aborted()),
            disposed,
        }),
    }
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
                    let disposed = match release_cancelled(&mut run).await {
                        Settling::Released(disposed) | Settling::Done(Settled { disposed, .. }) => disposed,
                    };
                    if let Err(error) = disposed {
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

/// Maps a settled and released run to its task's outcome.
///
/// `completed` → completed with the text; `aborted` → killed; any other stop
/// reason → failed with the reason (and `; diagnostic: …`; partial output is
/// not included); a rejected result → failed with the error. A failed
/// release is appended (`…; dispose failed: …`), and turns a completed or
/// killed task into a failed one: the release happened before the outcome
/// is reported.
pub fn task_outcome(result: Result<SubagentResult, SubagentError>, disposed: Result<(), SubagentError>) -> TaskOutcome {
    let outcome = match result {
        Ok(result) => match result.stop_reason {
            StopReason::Completed => TaskOutcome::Completed { output: result.text() },
            StopReason::Aborted => TaskOutcome::Killed,
            reason => TaskOutcome::Failed {
                detail: failed_run_detail(&reason, result.diagnostic.as_deref()),
            },
        },
        Err(error) => TaskOutcome::Failed {
            detail: error.to_string(),
        },
    };
    match (outcome, disposed) {
        (outcome, Ok(())) => outcome,
        (TaskOutcome::Failed { detail }, Err(error)) => TaskOutcome::Failed {
            detail: dispose_failed_detail(Some(&detail), &error.to_string()),
        },
        (_, Err(error)) => TaskOutcome::Failed {
            detail: dispose_failed_detail(None, &error.to_string()),
        },
    }
}

/// The outcome of a background run whose start failed: `killed` when the
/// task was killed and the provider rolled back cleanly; otherwise `failed`
/// with the error. A failed rollback stays `failed` even after a kill, and
/// its detail carries both errors.
pub fn start_failed_outcome(error: &SubagentError, killed: bool) -> TaskOutcome {
    if killed && !matches!(error, SubagentError::RollbackFailed { .. }) {
        return TaskOutcome::Killed;
    }
    TaskOutcome::Failed {
        detail: error.to_string(),
    }
}

/// The detail of a task whose run failed, from its stop reason.
fn failed_run_detail(reason: &StopReason, diagnostic: Option<&str>) -> String {
    match diagnostic {
        Some(diagnostic) => wording::failed_run_detail(reason, diagnostic),
        None => reason.to_string(),
    }
}

/// The detail of a task whose release failed, after what went wrong before it.
fn dispose_failed_detail(previous: Option<&str>, error: &str) -> String {
    match previous {
        Some(previous) => wording::dispose_failed_after(previous, error),
        None => wording::dispose_failed(error),
    }
}

#[cfg(test)]
mod tests {
    use dsh_subagent_api::ContentBlock;

    use super::*;

    fn result(reason: &str) -> Result<SubagentResult, SubagentError> {
        Ok(SubagentResult::new(
            StopReason::parse(reason),
            vec![ContentBlock::text("partial")],
        ))
    }

    #[test]
    fn stop_reasons_map_to_task_outcomes() {
        assert_eq!(
            task_outcome(result("completed"), Ok(())),
            TaskOutcome::Completed {
                output: "partial".into()
            }
        );
        assert_eq!(task_outcome(result("aborted"), Ok(())), TaskOutcome::Killed);
        for reason in ["error", "max-tokens", "refusal", "paused"] {
            assert_eq!(
                task_outcome(result(reason), Ok(())),
                TaskOutcome::Failed { detail: reason.into() }
            );
        }
    }

    #[test]
    fn rejections_release_failures_and_diagnostics_stay_separate_from_output() {
        let failed = |m: &str| SubagentError::failed(m);
        assert_eq!(
            task_outcome(Err(failed("transport gone")), Ok(())),
            TaskOutcome::Failed {
                detail: "transport gone".into()
            }
        );
        assert_eq!(
            task_outcome(result("completed"), Err(failed("reap failed"))),
            TaskOutcome::Failed {
                detail: "dispose failed: reap failed".into()
            }
        );
        assert_eq!(
            task_outcome(Err(failed("result failed")), Err(failed("reap failed"))),
            TaskOutcome::Failed {
                detail: "result failed; dispose failed: reap failed".into()
            }
        );
        let diagnosed = Ok(
            SubagentResult::new(StopReason::Error, vec![ContentBlock::text("partial")])
                .with_diagnostic("Claude Code denied a tool request"),
        );
        assert_eq!(
            task_outcome(diagnosed, Ok(())),
            TaskOutcome::Failed {
                detail: "error; diagnostic: Claude Code denied a tool request".into()
            }
        );
    }

    #[test]
    fn a_killed_start_reads_killed_unless_its_rollback_failed() {
        let aborted = SubagentError::aborted("start aborted before publication");
        assert_eq!(start_failed_outcome(&aborted, true), TaskOutcome::Killed);
        assert_eq!(
            start_failed_outcome(&aborted, false),
            TaskOutcome::Failed {
                detail: "start aborted before publication".into()
            }
        );
        let double = SubagentError::rollback_failed(aborted, SubagentError::failed("cleanup also failed"));
        assert_eq!(double.code(), "ROLLBACK_FAILED");
        for killed in [true, false] {
            assert_eq!(
                start_failed_outcome(&double, killed),
                TaskOutcome::Failed {
                    detail: "start aborted before publication; rollback failed: cleanup also failed".into()
                }
            );
        }
    }
}
