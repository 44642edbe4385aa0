//! A plain delegation, and its release: the provider is made and named, a
//! run settles, the release runs once, and after it the result is fixed.

use dsh_subagent_api::{StopReason, SubagentProvider};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::cell::{Checked, Env, Seen, stage};
use crate::wording;

/// `provider.made`: a name, and the same capabilities and context every time asked.
pub(crate) fn made(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let provider = &*env.provider;
        if provider.name().trim().is_empty() {
            return Err(Seen::Fail(wording::NO_NAME.to_owned()));
        }
        let capabilities = provider.capabilities();
        let inherits = provider.inherits_parent_context();
        if capabilities != provider.capabilities() || inherits != provider.inherits_parent_context() {
            return Err(Seen::Fail(wording::CHANGING_CLAIMS.to_owned()));
        }
        Ok(Some(wording::made(
            provider.name(),
            capabilities,
            inherits,
            provider.continuation().is_some(),
        )))
    }
    .boxed()
}

/// `delegation.settles`: publish, settle, release, each within its deadline.
pub(crate) fn settles(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, _cancel) = env.published().await?;
        let result = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
        env.dispose(&mut run).await?;
        match result {
            Ok(result) => Ok(Some(wording::settled(&result))),
            Err(error) => Err(Seen::Fail(wording::result_failed(&error))),
        }
    }
    .boxed()
}

/// `delegation.completes` (advisory): the plain delegation answers.
pub(crate) fn completes(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, _cancel) = env.published().await?;
        let result = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
        env.dispose(&mut run).await?;
        match result {
            Ok(result) if result.stop_reason.is_completed() && !result.text().trim().is_empty() => {
                Ok(Some(wording::settled(&result)))
            }
            Ok(result) => Err(Seen::Fail(wording::not_completed(&result))),
            Err(error) => Err(Seen::Fail(wording::result_failed(&error))),
        }
    }
    .boxed()
}

/// `release.once`: a second dispose returns the first one's outcome and
/// releases nothing more (the probe counts it; the leftovers show it).
pub(crate) fn once(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, _cancel) = env.published().await?;
        let _ = stage(wording::STAGE_RESULT, env.limits.stage, run.result()).await?;
        let first = stage(wording::STAGE_DISPOSE, env.limits.stage, run.dispose()).await?;
        let second = stage(wording::STAGE_DISPOSE, env.limits.stage, run.dispose()).await?;
        if first != second {
            return Err(Seen::Fail(wording::second_dispose_differs(&first, &second)));
        }
        first.map_err(|error| wording::release_failed(&error))?;
        Ok(Some(wording::counted_by(env.probe.is_some()).to_owned()))
    }
    .boxed()
}

/// `release.settles-result`: released right after publication, the run's
/// result is settled at once and is no answer.
pub(crate) fn settles_result(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        let (mut run, _cancel) = env.published().await?;
        env.dispose(&mut run).await?;
        let result = stage(wording::STAGE_RESULT_AFTER_RELEASE, env.limits.cancel, run.result()).await?;
        match result {
            Ok(result) if result.stop_reason == StopReason::Completed => {
                Err(Seen::Fail(wording::completed_after_release(&result)))
            }
            Ok(result) => Ok(Some(wording::settled(&result))),
            Err(error) => Ok(Some(wording::result_failed(&error))),
        }
    }
    .boxed()
}
