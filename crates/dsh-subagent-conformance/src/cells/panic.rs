//! A panic stays where it happened: a run whose result panics (while the
//! child runs, or once it has answered) reads as a failure to its caller,
//! its child is released once, and the next delegation works.

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::cell::{Checked, Env, Seen, stage};
use crate::observed::Panics;
use crate::wording;

/// `panic.contained`.
pub(crate) fn contained(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        for panics in [Panics::WhileRunning, Panics::AfterResult] {
            env.provider.panic_results(panics);
            let published = env.published().await;
            env.provider.panic_results(Panics::Never);
            let (run, cancel) = published?;
            let settled = stage(
                wording::STAGE_SETTLE,
                env.limits.stage,
                dsh_subagent::settle(run, &cancel),
            )
            .await?;
            let where_ = wording::panic_point(panics == Panics::WhileRunning);
            match settled.result {
                Err(error) if error.to_string().contains(wording::INJECTED_PANIC) => {}
                Err(error) => return Err(Seen::Fail(wording::panic_other_failure(where_, &error))),
                Ok(result) => return Err(Seen::Fail(wording::panic_read_as_result(where_, &result))),
            }
            settled
                .disposed
                .map_err(|error| wording::panic_release_failed(where_, &error))?;
        }
        let (mut run, _cancel) = env.published().await?;
        let next = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
        env.dispose(&mut run).await?;
        next.map_err(|error| wording::next_after_panic(&error))?;
        Ok(None)
    }
    .boxed()
}
