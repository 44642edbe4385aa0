//! Cancellation and abandonment at every point of a child's life: before,
//! during and after its start, during and after its result, and the
//! caller's wait dropped.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use dsh_subagent_api::{ErrorCode, StopReason, SubagentError, SubagentRun};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::cell::{Checked, Env, Seen, panic_text, stage};
use crate::wording;

/// How long a cell lets a pending stage run before it cancels or drops it.
const WHILE_PENDING: Duration = Duration::from_millis(20);

/// A start that failed: passes only as a clean cancellation (`ABORTED`).
fn refused_as_aborted(error: &SubagentError) -> Checked {
    if error.code() == ErrorCode::Aborted {
        Ok(Some(wording::refused_aborted(error)))
    } else {
        Err(Seen::Fail(wording::refused_not_aborted(error)))
    }
}

/// A run whose token is cancelled: its result must settle `aborted`
/// within the cancel deadline; it is then released.
async fn must_abort(env: &Env, run: &mut SubagentRun) -> Checked {
    let result = stage(wording::STAGE_RESULT_AFTER_CANCEL, env.limits.cancel, run.result()).await;
    env.dispose(run).await?;
    match result? {
        Ok(result) if result.stop_reason == StopReason::Aborted => Ok(Some(wording::settled(&result))),
        Ok(result) => Err(Seen::Fail(wording::settled_not_aborted(&result))),
        Err(error) => Err(Seen::Fail(wording::result_failed(&error))),
    }
}

/// `cancel.before-start`: a token cancelled before the start.
pub(crate) fn before_start(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (request, cancel) = env.request();
        cancel.cancel();
        match env.start(request).await? {
            Err(error) => refused_as_aborted(&error),
            Ok(mut run) => must_abort(env, &mut run).await,
        }
    }
    .boxed()
}

/// How a start went when the cell stepped in after its first poll.
enum FirstPoll {
    /// It was over at once (with this outcome).
    Done(Result<SubagentRun, SubagentError>),
    /// It was pending; the start future is still there.
    Pending,
}

/// `cancel.during-start`: the token cancelled while the start is pending.
pub(crate) fn during_start(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (request, cancel) = env.request();
        let name = env.name();
        let mut start = Box::pin(env.service.start(&name, request));
        match first_poll(&mut start).await? {
            FirstPoll::Done(Err(error)) => Err(Seen::Fail(wording::start_refused(&error))),
            FirstPoll::Done(Ok(mut run)) => {
                env.processes.sample();
                cancel.cancel();
                let checked = must_abort(env, &mut run).await?;
                Ok(Some(wording::published_at_once(checked.as_deref())))
            }
            FirstPoll::Pending => {
                env.processes.sample();
                cancel.cancel();
                match stage(wording::STAGE_START_AFTER_CANCEL, env.limits.cancel, start).await? {
                    Err(error) => refused_as_aborted(&error),
                    Ok(mut run) => {
                        let _ = env.dispose(&mut run).await;
                        Err(Seen::Fail(wording::PUBLISHED_AFTER_CANCEL.to_owned()))
                    }
                }
            }
        }
    }
    .boxed()
}

/// Lets a start run for [`WHILE_PENDING`]: `Pending` when it is still not
/// over (the future is kept for the cell to cancel or drop).
async fn first_poll<F>(start: &mut std::pin::Pin<Box<F>>) -> Result<FirstPoll, String>
where
    F: Future<Output = Result<SubagentRun, SubagentError>>,
{
    match tokio::time::timeout(WHILE_PENDING, AssertUnwindSafe(start.as_mut()).catch_unwind()).await {
        Ok(Ok(started)) => Ok(FirstPoll::Done(started)),
        Ok(Err(panic)) => Err(wording::stage_panicked(wording::STAGE_START, &panic_text(&*panic))),
        Err(_) => Ok(FirstPoll::Pending),
    }
}

/// `drop.start`: the start future dropped while it is pending.
pub(crate) fn start_dropped(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (request, _cancel) = env.request();
        let name = env.name();
        let mut start = Box::pin(env.service.start(&name, request));
        match first_poll(&mut start).await? {
            FirstPoll::Done(Err(error)) => Err(Seen::Fail(wording::start_refused(&error))),
            FirstPoll::Done(Ok(mut run)) => {
                env.processes.sample();
                let _ = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
                env.dispose(&mut run).await?;
                Ok(Some(wording::NOTHING_TO_DROP.to_owned()))
            }
            FirstPoll::Pending => {
                env.processes.sample();
                drop(start);
                Ok(Some(wording::DROPPED_PENDING.to_owned()))
            }
        }
    }
    .boxed()
}

/// `cancel.after-publication`: the token cancelled as soon as the run is published.
pub(crate) fn after_publication(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, cancel) = env.published().await?;
        cancel.cancel();
        must_abort(env, &mut run).await
    }
    .boxed()
}

/// `cancel.during-result`: the token cancelled while the result is pending.
pub(crate) fn during_result(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, cancel) = env.published().await?;
        let early = tokio::time::timeout(WHILE_PENDING, AssertUnwindSafe(run.result()).catch_unwind()).await;
        match early {
            Err(_) => {
                cancel.cancel();
                must_abort(env, &mut run).await
            }
            Ok(Err(panic)) => Err(Seen::Fail(wording::stage_panicked(
                wording::STAGE_RESULT,
                &panic_text(&*panic),
            ))),
            Ok(Ok(settled)) => {
                cancel.cancel();
                env.dispose(&mut run).await?;
                Ok(Some(wording::settled_before_cancel(&settled)))
            }
        }
    }
    .boxed()
}

/// `cancel.after-result`: a cancellation once the result is in changes it not.
pub(crate) fn after_result(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, cancel) = env.published().await?;
        let first = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
        cancel.cancel();
        env.dispose(&mut run).await?;
        let again = stage(wording::STAGE_RESULT_AFTER_RELEASE, env.limits.cancel, run.result()).await?;
        if first != again {
            return Err(Seen::Fail(wording::result_changed(&first, &again)));
        }
        Ok(None)
    }
    .boxed()
}

/// `drop.caller`: the caller's settlement dropped mid-run; the service
/// releases the child in the background.
pub(crate) fn caller_dropped(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (run, cancel) = env.published().await?;
        let settling = dsh_subagent::settle(run, &cancel);
        let early = tokio::time::timeout(WHILE_PENDING, AssertUnwindSafe(settling).catch_unwind()).await;
        let note = match early {
            Err(_) => wording::DROPPED_MID_RUN,
            Ok(Err(panic)) => {
                return Err(Seen::Fail(wording::stage_panicked(
                    wording::STAGE_SETTLE,
                    &panic_text(&*panic),
                )));
            }
            Ok(Ok(_settled)) => wording::SETTLED_BEFORE_DROP,
        };
        // The release runs in a task of its own, which abandons it (the
        // child may still run) at the release grace: it must end before.
        let bound = env.limits.cancel.min(dsh_subagent::RELEASE_GRACE) * 9 / 10;
        if !env.tasks_back(bound).await {
            return Err(Seen::Fail(wording::background_release_pending(bound)));
        }
        Ok(Some(note.to_owned()))
    }
    .boxed()
}
