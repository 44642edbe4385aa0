//! The context fit's part of the agent loop: the turn whose last round
//! of tool results waits for its answer before it is recorded, the estimate
//! and room of a request, the fit of a round, and what a refusal for length
//! changes (see "The context fit" in `docs/design.md`).

use dsh_llm::{ChatRequest, ContextRefusal, LlmError, Message, ToolCall};
use dsh_tools::{CancellationToken, ToolResult};

use super::Agent;
use crate::context::{Anchor, Density, Estimate, Room, WindowLearned, answer_reserve, fit_results};
use crate::transcript::{FittedResult, TranscriptEntry};
use crate::{ContextStop, CountedBy, FoundBy, trace, wording};

/// What the context fit knows of the conversation: the last request the
/// server counted. How the server counts is the runtime's, per model.
#[derive(Clone, Copy, Default)]
pub(super) struct ContextState {
    pub(super) anchor: Option<Anchor>,
    /// The round (by where it starts in the request) whose results, cut to
    /// fit, the server was asked to count.
    pub(super) sampled: Option<usize>,
}

/// A request as it was sent: what it held, and how the loop estimated it.
#[derive(Clone, Copy)]
pub(super) struct Sent {
    pub(super) anchor: Anchor,
    pub(super) estimate: Estimate,
}

/// The messages of a run's turn, and the round of tool results waiting for
/// the answer to the request that carries them.
///
/// Every message is recorded in the transcript when it joins the turn; a
/// tool result when its call returns, whole. A refusal for length may
/// still cut the round's results to fit: the cut texts are then recorded
/// too ([`TranscriptEntry::Fitted`](crate::transcript::TranscriptEntry::Fitted)),
/// so that the transcript holds what the model was given.
#[derive(Default)]
pub(super) struct Turn {
    pub(super) messages: Vec<Message>,
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
    /// Appends `message` to the turn, recorded in the transcript with the
    /// background tasks whose notices it delivers.
    pub(super) fn say(&self, turn: &mut Turn, message: Message, notices: &[String]) {
        self.record_message(&message, notices);
        turn.messages.push(message);
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
            reserve: answer_reserve(window, request.max_tokens),
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

    /// Asks the model's server to count, when the fit would otherwise cut
    /// a round of results or stop on an estimate that no count anchors, and
    /// the server's streamed answers count nothing (llama-cpp-python):
    /// without a count the estimate never learns how the server counts, and
    /// a request is cut far below its window. With a round of results
    /// waiting, two asks: the request up to the round, each result empty
    /// (every call keeps its answer), whose count anchors the estimate of
    /// the conversation from there; then the request with the results cut
    /// to fit on that count, whose count teaches how the server counts the
    /// text they add, so that the round is then cut on the server's count.
    /// Without a round, the whole request. Asked once per round (a refit
    /// after a refusal does not ask again), never again of a server that
    /// gave no count.
    pub(super) async fn count_when_it_matters(&self, turn: &Turn, cancel: &CancellationToken) {
        if !self.inner.runtime.learned().asks_to_count(&self.inner.info.model) {
            return;
        }
        let request = self.request(&turn.messages);
        let estimate = self.estimate(&request);
        if self
            .room(&request, estimate)
            .is_none_or(|room| room.check(estimate).is_ok())
        {
            return;
        }
        let Some(round) = &turn.round else {
            let prefix = request.messages.len();
            if !self.counts_up_to(prefix) {
                self.count_prefix(request, prefix, cancel).await;
            }
            return;
        };
        let mut messages = turn.messages[..round.start].to_vec();
        messages.extend(
            round
                .calls
                .iter()
                .map(|call| Message::tool(call.id.clone(), String::new())),
        );
        let empty = self.request(&messages);
        let prefix = empty.messages.len() - round.calls.len();
        if self.lock().context.sampled == Some(prefix) {
            return;
        }
        if !self.counts_up_to(prefix) && !self.count_prefix(empty, prefix, cancel).await {
            return;
        }
        let Some((estimate, room)) = self.without_round(turn, round) else {
            return;
        };
        let mut results = round.results.clone();
        fit_results(room, estimate, &round.calls, &mut results);
        let mut messages = turn.messages.clone();
        for (offset, (call, result)) in round.calls.iter().zip(&results).enumerate() {
            messages[round.start + offset] = Message::tool(call.id.clone(), result.text.clone());
        }
        let candidate = self.request(&messages);
        let estimate = self.estimate(&candidate);
        self.lock().context.sampled = Some(prefix);
        if let Some(tokens) = self.ask_count(candidate, estimate, cancel).await {
            let model = &self.inner.info.model;
            self.inner.runtime.learned().learn_count(model, tokens, estimate);
        }
    }

    /// Whether the last count covers the first `messages` messages.
    fn counts_up_to(&self, messages: usize) -> bool {
        self.lock().context.anchor.is_some_and(|anchor| anchor.covers(messages))
    }

    /// Asks the server to count `request`, whose count covers its first
    /// `prefix` messages: the anchor of later estimates, and a lesson for
    /// the density. Whether it counted.
    async fn count_prefix(&self, request: ChatRequest, prefix: usize, cancel: &CancellationToken) -> bool {
        let estimate = self.estimate(&request);
        let anchor = Anchor::prefix(&request, prefix);
        let Some(tokens) = self.ask_count(request, estimate, cancel).await else {
            return false;
        };
        let model = &self.inner.info.model;
        self.inner.runtime.learned().learn_count(model, tokens, estimate);
        if let Some(anchor) = anchor.counted(tokens) {
            self.lock().context.anchor = Some(anchor);
        }
        true
    }

    /// The server's count of `request` (estimated as `estimate`), or none:
    /// a server that gives none is not asked again (logged at warn), one
    /// that took too long is, at the next round.
    async fn ask_count(&self, request: ChatRequest, estimate: Estimate, cancel: &CancellationToken) -> Option<u64> {
        let model = &self.inner.info.model;
        let count = self.inner.runtime.model().count_prompt(request, cancel.clone()).await;
        let tokens = match count {
            Err(LlmError::Cancelled) => return None,
            // A slow server may count later: asked again at the next round.
            Err(error @ LlmError::Timeout { .. }) => {
                let why = error.to_string();
                tracing::warn!(agent = %self.id(), "{}", wording::log_prompt_not_counted_yet(model, &why));
                return None;
            }
            Ok(tokens) => tokens.ok_or_else(|| wording::NO_USAGE.to_owned()),
            Err(LlmError::ContextLength { refusal, .. }) => refusal
                .prompt_tokens
                .ok_or_else(|| wording::REFUSED_UNCOUNTED.to_owned()),
            Err(error) => Err(error.to_string()),
        };
        match tokens {
            Ok(tokens) => {
                let estimated = self.estimated_tokens(estimate);
                tracing::info!(agent = %self.id(), "{}", wording::log_prompt_counted(tokens, estimated, model));
                Some(tokens)
            }
            Err(why) => {
                self.inner.runtime.learned().never_counts(model);
                tracing::warn!(agent = %self.id(), "{}", wording::log_prompt_not_counted(model, &why));
                None
            }
        }
    }

    /// The estimate and the room of the request `turn` makes without its
    /// `round` of results (the messages after the round kept); `None` while
    /// no window is known.
    fn without_round(&self, turn: &Turn, round: &Round) -> Option<(Estimate, Room)> {
        let mut others = turn.messages[..round.start].to_vec();
        others.extend(turn.messages[round.start + round.calls.len()..].iter().cloned());
        let request = self.request(&others);
        let estimate = self.estimate(&request);
        let room = self.room(&request, estimate)?;
        Some((estimate, room))
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
        let Some(round) = &turn.round else { return };
        // The messages after the round stay in the request: count them
        // with what the results share.
        let Some((estimate, room)) = self.without_round(turn, round) else {
            return;
        };
        let Some(round) = &mut turn.round else { return };
        let cut = fit_results(room, estimate, &round.calls, &mut round.results);
        if cut == 0 {
            return;
        }
        trace::record_fitted(room.window, round.results.len(), cut);
        let mut fitted = Vec::new();
        for (offset, (call, result)) in round.calls.iter().zip(&round.results).enumerate() {
            let message = &mut turn.messages[round.start + offset];
            if message.content() != result.text {
                fitted.push(FittedResult::new(call.id.clone(), result.text.clone()));
                *message = Message::tool(call.id.clone(), result.text.clone());
            }
        }
        if !fitted.is_empty() {
            self.record(&TranscriptEntry::Fitted { results: fitted });
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
        if let Some(window) = refusal.window {
            match learned.learn_window(model, window) {
                WindowLearned::Same => {}
                WindowLearned::New => {
                    tracing::warn!(agent = %self.id(), "{}", wording::log_window_learned(window, model));
                }
                WindowLearned::InPlaceOfKept(kept) => {
                    let line = wording::log_kept_window_corrected(window, kept, model);
                    tracing::warn!(agent = %self.id(), "{line}");
                }
            }
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
            window.map_or(max_tokens.unwrap_or(0), |window| answer_reserve(window, max_tokens)),
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
