//! The context guard's part of the agent loop: the turn whose last round
//! of tool results waits for its answer before it is recorded, the estimate
//! and room of a request, the fit of a round, and what a refusal for length
//! changes (see "The context guard" in `docs/design.md`).

use dsh_llm::{ChatRequest, ContextRefusal, Message, ToolCall};
use dsh_tools::ToolResult;

use super::Agent;
use crate::context::{Anchor, Density, Estimate, Room, fit_results, reserve};
use crate::{ContextStop, FoundBy, trace};

/// What the context guard knows of the conversation: the last request the
/// server counted, and how its counts compare with the loop's estimates.
#[derive(Clone, Copy, Default)]
pub(super) struct ContextState {
    pub(super) anchor: Option<Anchor>,
    pub(super) density: Density,
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

    /// The window `request` must fit, its reserve for the answer, and how
    /// the loop's estimates compare with the server's; `None` while no
    /// window is known.
    pub(super) fn room(&self, request: &ChatRequest) -> Option<Room> {
        let window = self.effective_context_window()?;
        Some(Room {
            window,
            reserve: reserve(window, request.max_tokens),
            density: self.lock().context.density,
        })
    }

    /// Cuts one round of `results` (answering `calls`) so that the request
    /// carrying them, after the turn's `messages`, fits the window; nothing
    /// happens while no window is known or when they fit.
    pub(super) fn fit_round(&self, messages: &[Message], calls: &[ToolCall], results: &mut [ToolResult]) {
        // Without a window there is nothing to fit: the request is not built.
        if self.effective_context_window().is_none() {
            return;
        }
        let request = self.request(messages);
        let Some(room) = self.room(&request) else { return };
        let cut = fit_results(room, self.estimate(&request), calls, results);
        if cut > 0 {
            trace::record_fitted(room.window, results.len(), cut);
        }
    }

    /// After the server refused a request for its length: learns the window
    /// it named, cuts the round of results the request carried to fit it,
    /// and says to send once more. A second refusal, or one that names no
    /// window (and none is known), is the stop.
    pub(super) fn after_refusal(
        &self,
        refusal: &ContextRefusal,
        estimate: Estimate,
        refused_before: bool,
        turn: &mut Turn,
    ) -> Result<(), ContextStop> {
        let model = &self.inner.info.model;
        if let Some(window) = refusal.window {
            self.inner.runtime.learn_window(model, window);
        }
        if let Some(tokens) = refusal.prompt_tokens {
            self.lock().context.density.learn(tokens, estimate);
        }
        let density = self.lock().context.density;
        let window = self.effective_context_window();
        let request = self.request(&turn.messages);
        let stop = ContextStop {
            window,
            reserve: window.map_or(request.max_tokens.unwrap_or(0), |window| {
                reserve(window, request.max_tokens)
            }),
            request: refusal.prompt_tokens.unwrap_or_else(|| estimate.tokens(density)),
            found_by: FoundBy::Refusal,
        };
        if refused_before || refusal.window.is_none() {
            return Err(stop);
        }
        if let Some(round) = &mut turn.round {
            let before = &turn.messages[..round.start];
            // The messages after the round (notices, steered ones) stay in
            // the request: count them with what the results share.
            let mut others = before.to_vec();
            others.extend(turn.messages[round.start + round.calls.len()..].iter().cloned());
            let request = self.request(&others);
            if let Some(room) = self.room(&request) {
                let cut = fit_results(room, self.estimate(&request), &round.calls, &mut round.results);
                trace::record_fitted(room.window, round.results.len(), cut);
            }
            for (offset, (call, result)) in round.calls.iter().zip(&round.results).enumerate() {
                turn.messages[round.start + offset] = Message::tool(call.id.clone(), result.text.clone());
            }
        }
        Ok(())
    }
}
