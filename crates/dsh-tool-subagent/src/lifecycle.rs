//! One foreground delegation: start, wait, release — on every path.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

use dsh_subagent::{SubagentService, settle};
use dsh_subagent_api::{StartRequest, TextSource, trace};
use dsh_tools::{ToolError, ToolOutput, panic_message};
use futures::FutureExt;

use crate::{render, wording};

/// What one foreground delegation produced: what the model reads, and,
/// for a completed answer the provider keeps, where it can be read again.
pub(crate) type Delegated = (Result<ToolOutput, ToolError>, Option<Arc<dyn TextSource>>);

/// Runs one delegation to completion.
///
/// The request carries the call's token: cancelling the call cancels the
/// child, and the tool never cancels it, so nothing the tool does cancels
/// the caller. Once the provider publishes a run, [`settle`] releases it
/// exactly once — on success, on failure, on cancellation, and in the
/// background when the harness drops this future mid-run.
///
/// Once the token is cancelled the call always returns, however the provider
/// behaves: a `start` still pending after the cancellation is dropped, which
/// is a cancellation under the provider contract
/// ([`wording::START_ABANDONED`]); a result or release still pending
/// [`dsh_subagent::RELEASE_GRACE`] later is abandoned
/// ([`wording::RELEASE_ABANDONED`]).
pub(crate) fn delegate<'a>(
    service: &'a SubagentService,
    provider: &'a str,
    request: StartRequest,
) -> impl Future<Output = Delegated> + Send + 'a {
    let cancel = request.cancel.clone();
    // Started here and boxed, so the request is not held by the returned
    // future for the whole run: the box is freed once the provider answers.
    // The stage events need the provider's name only here, so the boxed
    // start carries it, not the returned future. The start is made here
    // (its checks and its place in its tree's queue), and mapped rather
    // than awaited in an `async` block, which would hold the start's future
    // twice (as a capture and as the awaited value) while a call waits.
    let start = Box::pin(service.start(provider, request).map(move |started| {
        let run = started?;
        trace::started(provider, &run);
        trace::published(&run);
        Ok(run)
    }));
    async move {
        // Scoped, so neither the start's outcome nor the run stays in this
        // future (held for every delegation in flight) while the run settles.
        let settling = {
            // A start that is done at once is taken on the first poll, with
            // no wait for the cancellation set up. Otherwise biased: after a
            // cancellation the start is polled once more first, so a provider
            // that reacts to the token (or finishes) reports in its own words.
            let mut starting = AssertUnwindSafe(start).catch_unwind();
            let started = if let Poll::Ready(started) = futures::poll!(&mut starting) {
                started
            } else {
                tokio::select! {
                    biased;
                    started = starting => started,
                    () = cancel.cancelled() => {
                        let abandoned = ToolError::new(wording::START_ABANDONED).with_code(dsh_subagent_api::ErrorCode::Aborted);
                        return (Err(abandoned), None);
                    }
                }
            };
            match started {
                Ok(Ok(run)) => settle(run, &cancel),
                Ok(Err(error)) => return (Err(render::start_failed(error)), None),
                Err(panic) => {
                    let message = wording::provider_panicked(wording::STAGE_START, &panic_message(&*panic));
                    return (
                        Err(ToolError::new(message).with_code(crate::ErrorCode::ProviderPanicked)),
                        None,
                    );
                }
            }
        };
        let settled = settling.await;
        trace::settled(&settled.result);
        trace::disposed(&settled.disposed);
        render::settled(settled.result, settled.disposed)
    }
}
