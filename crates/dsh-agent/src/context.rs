//! The context guard: how the agent loop keeps each request within its
//! model's context window (see "The context guard" in `docs/design.md`).
//!
//! The loop knows a window when one is configured (on the agent, or on the
//! runtime for its model) or learned from a server's refusal that named it
//! ([`LearnedWindows`], shared by the agents of a runtime). Before each
//! request it estimates the request's tokens: the prompt tokens the server
//! reported for an earlier request of the same conversation, plus what was
//! added since at [`BYTES_PER_TOKEN`](dsh_tools::budget::BYTES_PER_TOKEN)
//! bytes a token, measured on the body as sent ([`Estimate`]). The request
//! must leave a reserve for the answer: its `max_tokens` when set, otherwise
//! [`ContextWindow::reserve`]'s default. One turn's tool results that do
//! not fit share the room that is left ([`dsh_tools::budget::fit`]) and are
//! cut to their shares ([`fit_results`]). When even that does not fit, the
//! run stops with [`ContextStop`].

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Mutex, PoisonError};

use dsh_llm::openai::{content_bytes, message_bytes, request_bytes, tools_bytes};
use dsh_llm::{ChatRequest, ToolCall};
use dsh_tools::ToolResult;
use dsh_tools::budget::{bytes_in, fit, tokens_in};
use serde::{Deserialize, Serialize};

use crate::wording;

/// The most tokens kept for the answer of a request that sets no
/// `max_tokens` (and never more than a quarter of the window).
pub const DEFAULT_ANSWER_RESERVE: u64 = 4_096;

/// Tokens added to every estimate for what the body adds around its
/// messages that the count since the last reported request does not see
/// (a longer `max_tokens`, say).
const ESTIMATE_SLACK: u64 = 8;

/// How many times a result is cut again when JSON escaping made its cut
/// text longer than its share.
const RECUTS: usize = 3;

/// A model's context window: the tokens one request (prompt and answer)
/// may take.
///
/// ```
/// use dsh_agent::ContextWindow;
/// let window = ContextWindow::new(24_000).expect("large enough");
/// assert_eq!(window.reserve(None), 4_096);
/// assert_eq!(window.reserve(Some(1_000)), 1_000);
/// assert_eq!(ContextWindow::new(2_048).map(|w| w.reserve(None)), Ok(512));
/// assert!(ContextWindow::new(100).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextWindow(NonZeroU64);

impl ContextWindow {
    /// The smallest window: less cannot hold a system prompt, the tools'
    /// definitions and a task.
    pub const MIN: u64 = 1_024;

    /// A window of `tokens` tokens; refused below [`ContextWindow::MIN`].
    pub const fn new(tokens: u64) -> Result<Self, WindowTooSmall> {
        match NonZeroU64::new(tokens) {
            Some(tokens) if tokens.get() >= Self::MIN => Ok(Self(tokens)),
            _ => Err(WindowTooSmall { tokens }),
        }
    }

    /// The window in tokens.
    pub const fn tokens(self) -> u64 {
        self.0.get()
    }

    /// The tokens kept for the answer of a request: its `max_tokens` when
    /// set, otherwise [`DEFAULT_ANSWER_RESERVE`] and at most a quarter of
    /// the window.
    pub fn reserve(self, max_tokens: Option<u64>) -> u64 {
        reserve(self.tokens(), max_tokens)
    }
}

/// The tokens kept for the answer of a request with this `max_tokens` in a
/// window of `window` tokens (a learned window may be below
/// [`ContextWindow::MIN`]).
pub(crate) fn reserve(window: u64, max_tokens: Option<u64>) -> u64 {
    max_tokens.unwrap_or_else(|| DEFAULT_ANSWER_RESERVE.min(window / 4))
}

/// A context window below [`ContextWindow::MIN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::window_too_small(*tokens, ContextWindow::MIN))]
pub struct WindowTooSmall {
    /// The refused window, in tokens.
    pub tokens: u64,
}

/// Why a run stopped at its context window: no request that fits could be
/// made (see [`AgentStop::ContextWindow`](crate::AgentStop::ContextWindow)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContextStop {
    /// The window in tokens; `None` when the server refused the request
    /// without naming it, and none was known.
    pub window: Option<u64>,
    /// The tokens kept for the answer.
    pub reserve: u64,
    /// The request's size in tokens: the server's count when its refusal
    /// gave one, else the loop's estimate.
    pub request: u64,
    /// Who found that it does not fit.
    pub found_by: FoundBy,
}

impl ContextStop {
    /// A stop at a window of `window` tokens (`None`: not known) with
    /// `reserve` kept for the answer, for a request of `request` tokens.
    pub fn new(window: Option<u64>, reserve: u64, request: u64, found_by: FoundBy) -> Self {
        Self {
            window,
            reserve,
            request,
            found_by,
        }
    }

    /// The one line that says why the run stopped: how large the request
    /// was, the window and the reserve (or that the server named no
    /// window), and that the transcript is kept. A child's diagnostic, and
    /// what follows `context-window: ` wherever the stop is shown.
    pub fn line(&self) -> String {
        match (self.found_by, self.window) {
            (FoundBy::Estimate, Some(window)) => wording::context_over(self.request, window, self.reserve),
            (_, Some(window)) => wording::context_refused(self.request, window, self.reserve),
            (_, None) => wording::context_refused_unnamed(self.request),
        }
    }
}

/// Who found that a request does not fit its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FoundBy {
    /// The loop's estimate, before sending it.
    Estimate,
    /// The server, which refused it.
    Refusal,
}

/// The windows servers named in their refusals, per model name: what every
/// agent of a runtime knows once one of them was refused.
#[derive(Debug, Default)]
pub(crate) struct LearnedWindows(Mutex<HashMap<String, u64>>);

impl LearnedWindows {
    /// The window learned for `model`.
    pub(crate) fn get(&self, model: &str) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(model)
            .copied()
    }

    /// Learns `tokens` as `model`'s window (the smaller, when one is known).
    pub(crate) fn learn(&self, model: &str, tokens: u64) {
        let mut windows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let window = windows.entry(model.to_owned()).or_insert(tokens);
        *window = (*window).min(tokens);
    }
}

/// What the server counted of an earlier request of the conversation: the
/// prompt tokens it reported, and the messages and the bytes of tool
/// definitions that request held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Anchor {
    tokens: u64,
    messages: usize,
    tools: u64,
}

impl Anchor {
    /// The anchor of `request`, whose prompt the server counted as `tokens`.
    pub(crate) fn of(request: &ChatRequest, tokens: u64) -> Self {
        Self {
            tokens,
            messages: request.messages.len(),
            tools: tools_bytes(&request.tools),
        }
    }

    /// The same request, which the server counted as `tokens`.
    pub(crate) fn counted(self, tokens: u64) -> Self {
        Self { tokens, ..self }
    }
}

/// How many of the server's tokens one token of the loop's own count
/// turned out to be: learned from a refusal that counted the prompt, never
/// below one (the estimate only ever grows more careful).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Density {
    server: u64,
    ours: u64,
}

impl Default for Density {
    fn default() -> Self {
        Self { server: 1, ours: 1 }
    }
}

impl Density {
    /// `tokens` of the loop's count in the server's tokens (rounded up).
    fn scale(self, tokens: u64) -> u64 {
        let scaled = (u128::from(tokens) * u128::from(self.server)).div_ceil(u128::from(self.ours));
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// `tokens` of the server's in the loop's count (rounded down).
    fn unscale(self, tokens: u64) -> u64 {
        let unscaled = u128::from(tokens) * u128::from(self.ours) / u128::from(self.server);
        u64::try_from(unscaled).unwrap_or(u64::MAX)
    }

    /// Learns from a refusal: the server counted `server` tokens where the
    /// loop estimated `estimate`; kept when it is the denser.
    pub(crate) fn learn(&mut self, server: u64, estimate: Estimate) {
        let counted = server.saturating_sub(estimate.counted);
        let ours = tokens_in(estimate.bytes);
        if ours > 0 && u128::from(counted) * u128::from(self.ours) > u128::from(self.server) * u128::from(ours) {
            *self = Self { server: counted, ours };
        }
    }
}

/// A request's estimated size: the tokens a server counted of its start,
/// and the bytes since then, which only the loop counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Estimate {
    counted: u64,
    bytes: u64,
}

impl Estimate {
    /// The estimate of `request` for a model named `model`: from `anchor`
    /// when it is a request this one continues, else from the whole body.
    pub(crate) fn of(anchor: Option<Anchor>, model: &str, request: &ChatRequest) -> Self {
        match anchor {
            Some(anchor) if anchor.messages <= request.messages.len() => {
                let added: u64 = request.messages[anchor.messages..].iter().map(message_bytes).sum();
                Self {
                    counted: anchor.tokens,
                    bytes: added + tools_bytes(&request.tools).saturating_sub(anchor.tools),
                }
            }
            _ => Self {
                counted: 0,
                bytes: request_bytes(model, request),
            },
        }
    }

    /// The estimate with `bytes` more.
    pub(crate) fn plus(self, bytes: u64) -> Self {
        Self {
            bytes: self.bytes + bytes,
            ..self
        }
    }

    /// The estimate in tokens, the loop's part scaled by `density`.
    pub(crate) fn tokens(self, density: Density) -> u64 {
        self.counted + density.scale(tokens_in(self.bytes)) + ESTIMATE_SLACK
    }
}

/// What the loop knows about an agent's window: the window, the reserve of
/// the next request, and how its estimates compare with the server's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Room {
    pub(crate) window: u64,
    pub(crate) reserve: u64,
    pub(crate) density: Density,
}

impl Room {
    /// Whether a request of `estimate` fits: `Err` with the stop otherwise.
    pub(crate) fn check(self, estimate: Estimate) -> Result<(), ContextStop> {
        let request = estimate.tokens(self.density);
        if request.saturating_add(self.reserve) <= self.window {
            return Ok(());
        }
        Err(ContextStop {
            window: Some(self.window),
            reserve: self.reserve,
            request,
            found_by: FoundBy::Estimate,
        })
    }

    /// The room left for results beside a request of `estimate`, in the
    /// loop's own tokens.
    fn left(self, estimate: Estimate) -> u64 {
        let used = estimate.tokens(self.density).saturating_add(self.reserve);
        self.density.unscale(self.window.saturating_sub(used))
    }
}

/// Cuts one turn's `results` (answering `calls`, in order) so that a
/// request of `estimate` without them, plus their messages, fits `room`.
/// Returns how many were cut.
pub(crate) fn fit_results(room: Room, estimate: Estimate, calls: &[ToolCall], results: &mut [ToolResult]) -> usize {
    // The results' messages with empty texts belong to the request; their
    // texts are what is shared out.
    let empty: u64 = calls
        .iter()
        .map(|call| message_bytes(&dsh_llm::Message::tool(call.id.clone(), String::new())))
        .sum();
    fit_tool_results(room.left(estimate.plus(empty)), results)
}

/// Cuts one turn's tool results so that their texts, as a request's body
/// carries them (JSON-escaped), take at most `room` tokens together: small
/// results stay whole and the large ones are cut to equal shares of what
/// is left ([`fit`], water-filling), each keeping its head, its tail and a
/// notice ([`ToolResult::cut_to`]; a result its tool cut keeps the call that
/// reads the rest). No result is dropped. Returns how many were cut.
///
/// `room` is what the request leaves for the texts: the window, less the
/// reserve for the answer, less the request's estimate without them. A
/// share smaller than a notice cannot be met (the notice alone is longer);
/// the caller checks the request again once the results are cut.
///
/// ```
/// use dsh_agent::fit_tool_results;
/// use dsh_tools::{ToolOutput, ToolResult};
/// let mut results: Vec<ToolResult> = ["small".to_owned(), "a".repeat(100_000), "b".repeat(100_000)]
///     .into_iter()
///     .map(|text| ToolResult::from_outcome(Ok(ToolOutput::text(text))))
///     .collect();
/// assert_eq!(fit_tool_results(5_000, &mut results), 2);
/// assert_eq!(results[0].text, "small");
/// assert!(results.iter().map(|result| result.text.len()).sum::<usize>() <= 20_000);
/// ```
pub fn fit_tool_results(room: u64, results: &mut [ToolResult]) -> usize {
    let escaped: Vec<u64> = results.iter().map(|result| content_bytes(&result.text)).collect();
    let sizes: Vec<u64> = escaped.iter().map(|bytes| tokens_in(*bytes)).collect();
    let allowances = fit(room, 0, 0, &sizes);
    let mut cut = 0;
    for (((result, size), allowance), mut escaped) in results.iter_mut().zip(sizes).zip(allowances).zip(escaped) {
        if allowance >= size {
            continue;
        }
        cut += 1;
        let target = bytes_in(allowance);
        for recut in 0..RECUTS {
            if recut > 0 {
                escaped = content_bytes(&result.text);
            }
            if escaped <= target {
                break;
            }
            // The text's bytes that escape to `target`, at this text's rate.
            let text = result.text.len() as u64;
            let fits =
                (u128::from(text) * u128::from(target) / u128::from(escaped)).min(u128::from(text.saturating_sub(1)));
            if !result.cut_to(usize::try_from(fits).unwrap_or(usize::MAX)) {
                break;
            }
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_llm::Message;
    use dsh_tools::ToolOutput;

    fn results(texts: &[String]) -> (Vec<ToolCall>, Vec<ToolResult>) {
        let calls = (0..texts.len())
            .map(|index| ToolCall::new(format!("call_{index}"), "t", "{}"))
            .collect();
        let results = texts
            .iter()
            .map(|text| ToolResult::from_outcome(Ok(ToolOutput::text(text.clone()))))
            .collect();
        (calls, results)
    }

    fn request_with(calls: &[ToolCall], results: &[ToolResult]) -> ChatRequest {
        let mut messages = vec![
            Message::system("be brief"),
            Message::user("do four things"),
            Message::assistant_with_tool_calls("", calls.to_vec()),
        ];
        messages.extend(
            calls
                .iter()
                .zip(results)
                .map(|(call, result)| Message::tool(call.id.clone(), result.text.clone())),
        );
        ChatRequest::new(messages)
    }

    #[test]
    fn four_large_results_are_cut_to_fit_beside_a_small_one() {
        let big = |c: char| format!("HEAD-{c}{}TAIL-{c}", c.to_string().repeat(2_000_000));
        let texts = [big('a'), "small".to_owned(), big('b'), big('c')];
        let (calls, mut results) = results(&texts);
        let room = Room {
            window: 24_000,
            reserve: ContextWindow::new(24_000).map_or(0, |w| w.reserve(None)),
            density: Density::default(),
        };
        let base = ChatRequest::new(request_with(&calls, &[]).messages[..3].to_vec());
        let estimate = Estimate::of(None, "m", &base);
        assert_eq!(fit_results(room, estimate, &calls, &mut results), 3);
        assert_eq!(results[1].text, "small", "a small result stays whole");
        for (result, text) in results.iter().zip(&texts) {
            let ends = text.len().min(6);
            assert!(result.text.starts_with(&text[..ends]) && result.text.ends_with(&text[text.len() - ends..]));
        }
        let request = request_with(&calls, &results);
        let sent = request_bytes("m", &request);
        assert!(
            tokens_in(sent) + room.reserve <= room.window,
            "the request ({} tokens) fits 24,000 less the reserve",
            tokens_in(sent)
        );
        assert_eq!(room.check(Estimate::of(None, "m", &request)), Ok(()));
    }

    #[test]
    fn text_that_escapes_is_cut_to_its_escaped_share() {
        let quotes = "\"\n".repeat(500_000);
        let (calls, mut results) = results(std::slice::from_ref(&quotes));
        let room = Room {
            window: 8_000,
            reserve: 1_000,
            density: Density::default(),
        };
        let base = ChatRequest::new(vec![
            Message::user("x"),
            Message::assistant_with_tool_calls("", calls.clone()),
        ]);
        assert_eq!(
            fit_results(room, Estimate::of(None, "m", &base), &calls, &mut results),
            1
        );
        let request = request_with(&calls, &results);
        assert_eq!(room.check(Estimate::of(None, "m", &request)), Ok(()));
    }

    #[test]
    fn an_estimate_continues_from_the_servers_count() {
        let first = ChatRequest::new(vec![Message::user("hello")]);
        let anchor = Anchor::of(&first, 1_000);
        let mut next = first.clone();
        next.messages.push(Message::assistant("x".repeat(400)));
        let estimate = Estimate::of(Some(anchor), "m", &next);
        assert_eq!(estimate.counted, 1_000);
        assert_eq!(estimate.bytes, message_bytes(&next.messages[1]));
        // A request that does not continue the anchored one is counted whole.
        let other = ChatRequest::new(vec![]);
        assert_eq!(Estimate::of(Some(anchor), "m", &other).counted, 0);
    }

    #[test]
    fn a_denser_server_count_makes_later_estimates_larger() {
        let mut density = Density::default();
        let estimate = Estimate {
            counted: 100,
            bytes: 4_000,
        };
        assert_eq!(estimate.tokens(density), 100 + 1_000 + ESTIMATE_SLACK);
        density.learn(1_600, estimate);
        assert_eq!(estimate.tokens(density), 100 + 1_500 + ESTIMATE_SLACK);
        // A sparser count never makes the estimate smaller.
        density.learn(600, estimate);
        assert_eq!(estimate.tokens(density), 100 + 1_500 + ESTIMATE_SLACK);
        assert_eq!(density.unscale(1_500), 1_000);
    }

    #[test]
    fn the_smaller_learned_window_is_kept() {
        let learned = LearnedWindows::default();
        learned.learn("m", 8_192);
        learned.learn("m", 16_384);
        assert_eq!(learned.get("m"), Some(8_192));
        assert_eq!(learned.get("other"), None);
    }
}
