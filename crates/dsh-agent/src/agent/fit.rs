//! The context fit's part of the agent loop: the turn whose last round
//! of tool results waits for its answer before it is recorded, the estimate
//! and room of a request, the fit of a round, and what a refusal for length
//! changes (see "The context fit" in `docs/design.md`).

use dsh_llm::{ChatRequest, ContextRefusal, Message, ToolCall};
use dsh_tools::ToolResult;

use super::Agent;
use crate::context::{Anchor, Density, Estimate, Room, fit_results, reserve};
use crate::{ContextStop, CountedBy, FoundBy, trace, wording};

/// What the context fit knows of the conversation: the last request the
/// server counted. How the server counts is the runtime's, per model.
#[derive(Clone, Copy, Default)]
pub(super) struct ContextState {
    pub(super) anchor: Option<Anchor>,
}

/// A request as it was sent: what it held, and how the loop estimated it.
#[derive(Clone, Copy)]
pub(super) struct Sent {
    pub(super) anchor: Anchor,
    pub(super) estimate: Estimate,
}

/// The messages of a run's turn, and how many of them the transcript has.
///
/// A round of tool results stays unrecorded until the request that carries
/// it is answered (or the run ends): a refusal for length may still cut them
/// to fit, and the transcript holds what the model was given. Messages
/// after them wait behind them, so the transcript keeps the turn's order.
#[derive(Default)]
pub(super) struct Turn {
    pub(super) messages: Vec<Message>,
    recorded: usize,
    /// Where the round of results waiting for its answer starts.
    pub(super) round: Option<Round>,
}

/// One round of tool calls and their results, in the turn from `start`.
pub(super) struct Round {
    pub(super) start: usize,
    pub(super) calls: Vec<ToolCall>,
    pub(super) results: Vec<ToolResult>,
}

impl Agent {
    /// Records the turn's messages the transcript does not have yet, up to
    /// the round of results still waiting for its answer.
    pub(super) fn record_turn(&self, turn: &mut Turn) {
        let end = turn.round.as_ref().map_or(turn.messages.len(), |round| round.start);
        for message in turn.messages.get(turn.recorded..end).unwrap_or_default() {
            self.record_message(message);
        }
        turn.recorded = turn.recorded.max(end);
    }

    /// The estimate of `request`'s tokens, from the last request the server
    /// counted when this one continues it.
    pub(super) fn estimate(&self, request: &ChatRequest) -> Estimate {
        let anchor = self.lock().context.anchor;
        Estimate::of(anchor, &self.inner.info.model, request)
    }

    /// How the model's server has counted against estimates of
    /// `estimate`'s kind.
    fn density(&self, estimate: Estimate) -> Density {
        self.inner.runtime.learned().density(&self.inner.info.model, estimate)
    }

    /// `estimate` in the server's tokens, as well as the loop can tell: what
    /// a request the server did not count is taken to have cost.
    pub(super) fn estimated_tokens(&self, estimate: Estimate) -> u64 {
        estimate.tokens(self.density(estimate))
    }

    /// The window `request` (estimated as `estimate`) must fit, its reserve
    /// for the answer, and how the server counts against such estimates;
    /// `None` while no window is known.
    pub(super) fn room(&self, request: &ChatRequest, estimate: Estimate) -> Option<Room> {
        let window = self.effective_context_window()?;
        Some(Room {
            window,
            reserve: reserve(window, request.max_tokens),
            density: self.density(estimate),
        })
    }

    /// The server counted the prompt of the request `sent` as `tokens`:
    /// later estimates of the conversation continue from it, and the
    /// model's density learns from it. A count of zero is no count.
    pub(super) fn counted(&self, sent: Sent, tokens: u64) {
        let Some(anchor) = sent.anchor.counted(tokens) else {
            return;
        };
        let estimate = sent.estimate;
        self.inner
            .runtime
            .learned()
            .learn_count(&self.inner.info.model, tokens, estimate);
        self.lock().context.anchor = Some(anchor);
    }

    /// Cuts the round of results waiting in `turn` so that the request that
    /// carries it, with every message after it (a notice, a steered
    /// message), fits the window; nothing happens while no window is known
    /// or when it fits. Run right before each request is built, so that
    /// nothing appended since the results arrived can push it over.
    pub(super) fn fit_pending(&self, turn: &mut Turn) {
        if self.effective_context_window().is_none() {
            return;
        }
        let Some(round) = &mut turn.round else { return };
        // The messages after the round stay in the request: count them
        // with what the results share.
        let mut others = turn.messages[..round.start].to_vec();
        others.extend(turn.messages[round.start + round.calls.len()..].iter().cloned());
        let request = self.request(&others);
        let estimate = self.estimate(&request);
        let Some(room) = self.room(&request, estimate) else {
            return;
        };
        let cut = fit_results(room, estimate, &round.calls, &mut round.results);
        if cut == 0 {
            return;
        }
        trace::record_fitted(room.window, round.results.len(), cut);
        for (offset, (call, result)) in round.calls.iter().zip(&round.results).enumerate() {
            turn.messages[round.start + offset] = Message::tool(call.id.clone(), result.text.clone());
        }
    }

    /// After the server refused a request (estimated as `estimate`, asking
    /// for `max_tokens`) for its length: learns the window it named (logged
    /// at warn when it is new) and what its count says of the density, or,
    /// when it counted nothing, that the request was larger than the
    /// estimate; then says to fit and send once more. A second refusal, or
    /// one while no window is known (named or configured), is the stop.
    pub(super) fn after_refusal(
        &self,
        refusal: &ContextRefusal,
        max_tokens: Option<u64>,
        estimate: Estimate,
        refused_before: bool,
    ) -> Result<(), ContextStop> {
        let model = &self.inner.info.model;
        let learned = self.inner.runtime.learned();
        if let Some(window) = refusal.window
            && learned.learn_window(model, window)
        {
            tracing::warn!(agent = %self.id(), "{}", wording::log_window_learned(window, model));
        }
        let window = self.effective_context_window();
        match (refusal.prompt_tokens, window) {
            (Some(tokens), _) => learned.learn_count(model, tokens, estimate),
            // The server counted more than its window leaves beside the
            // answer it was asked to keep room for.
            (None, Some(window)) => {
                let beside = window.saturating_sub(max_tokens.unwrap_or(0));
                learned.learn_at_least(model, beside.saturating_add(1), estimate);
            }
            (None, None) => {}
        }
        let (request_tokens, counted_by) = match refusal.prompt_tokens {
            Some(tokens) => (tokens, CountedBy::Server),
            None => (self.estimated_tokens(estimate), CountedBy::Estimate),
        };
        let found_by = if refused_before {
            FoundBy::SecondRefusal
        } else {
            FoundBy::Refusal
        };
        let stop = ContextStop::new(
            window,
            window.map_or(max_tokens.unwrap_or(0), |window| reserve(window, max_tokens)),
            request_tokens,
            found_by,
        )
        .counted_by(counted_by);
        if refused_before || window.is_none() {
            return Err(stop);
        }
        Ok(())
    }
}
