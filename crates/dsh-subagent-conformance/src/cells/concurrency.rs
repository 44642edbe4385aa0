//! Distinct starts are independent: many at once, half of them cancelled,
//! and only those abort.

use std::collections::BTreeSet;

use dsh_subagent_api::{CancellationToken, StopReason, SubagentRun};
use futures::FutureExt;
use futures::future::{BoxFuture, join_all};

use crate::cell::{Checked, Env, Seen, stage};
use crate::wording;

/// How many runs the ids cell starts at once.
const ID_RUNS: usize = 8;

/// Starts `count` runs at once; every one must publish. The runs whose
/// index `cancelled` names are cancelled as soon as each is published
/// (not once all are: a child that answered meanwhile has nothing left to
/// cancel).
async fn start_many(
    env: &Env,
    count: usize,
    cancelled: impl Fn(usize) -> bool,
) -> Result<Vec<(SubagentRun, CancellationToken)>, Seen> {
    let starts = (0..count).map(|index| {
        let cancel_now = cancelled(index);
        async move {
            let (request, cancel) = env.request();
            let started = env.start(request).await;
            if cancel_now {
                cancel.cancel();
            }
            (started, cancel)
        }
    });
    let mut runs = Vec::with_capacity(count);
    let mut first_failure = None;
    for (index, (started, cancel)) in join_all(starts).await.into_iter().enumerate() {
        match started {
            Ok(Ok(run)) => runs.push((run, cancel)),
            Ok(Err(error)) => {
                first_failure.get_or_insert_with(|| wording::one_of_many_refused(index, count, &error));
            }
            Err(seen) => {
                first_failure.get_or_insert_with(|| wording::one_of_many(index, count, &seen));
            }
        }
    }
    match first_failure {
        None => Ok(runs),
        Some(seen) => {
            release_all(env, &mut runs).await;
            Err(Seen::Fail(seen))
        }
    }
}

async fn release_all(env: &Env, runs: &mut [(SubagentRun, CancellationToken)]) -> Vec<Result<(), String>> {
    join_all(runs.iter_mut().map(|(run, _)| env.dispose(run))).await
}

/// `concurrency.independent`: every other run cancelled at once; the
/// cancelled ones abort, the others do not.
pub(crate) fn independent(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let count = env.limits.concurrent;
        let mut runs = start_many(env, count, |index| index % 2 == 1).await?;
        let deadline = env.limits.stage.max(env.limits.cancel);
        let results = join_all(
            runs.iter_mut()
                .map(|(run, _)| stage(wording::STAGE_RESULT, deadline, run.result())),
        )
        .await;
        let released = release_all(env, &mut runs).await;
        let mut completed = 0;
        for (index, result) in results.into_iter().enumerate() {
            let cancelled = index % 2 == 1;
            let reason = match result {
                Ok(Ok(result)) => result.stop_reason,
                Ok(Err(error)) => return Err(Seen::Fail(wording::one_of_many_failed(index, count, &error))),
                Err(seen) => return Err(Seen::Fail(wording::one_of_many(index, count, &seen))),
            };
            match (cancelled, &reason) {
                (true, StopReason::Aborted) => {}
                (false, StopReason::Aborted) => {
                    return Err(Seen::Fail(wording::uncancelled_aborted(index, count)));
                }
                (true, other) => return Err(Seen::Fail(wording::cancelled_not_aborted(index, count, other))),
                (false, other) => completed += usize::from(other.is_completed()),
            }
        }
        if let Some((index, Err(seen))) = released.into_iter().enumerate().find(|(_, r)| r.is_err()) {
            return Err(Seen::Fail(wording::one_of_many(index, count, &seen)));
        }
        Ok(Some(wording::independent(count, completed)))
    }
    .boxed()
}

/// `run.ids-distinct` (advisory): runs in flight together have distinct ids.
pub(crate) fn distinct_ids(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let mut runs = start_many(env, ID_RUNS, |_| false).await?;
        let ids: BTreeSet<String> = runs.iter().map(|(run, _)| run.id().to_owned()).collect();
        for (_, cancel) in &runs {
            cancel.cancel();
        }
        for released in release_all(env, &mut runs).await {
            released?;
        }
        if ids.len() < ID_RUNS {
            return Err(Seen::Fail(wording::ids_repeat(ids.len(), ID_RUNS)));
        }
        Ok(None)
    }
    .boxed()
}
