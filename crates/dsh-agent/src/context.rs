//! The context fit: how the agent loop keeps each request within its
//! model's context window (see "The context fit" in `docs/design.md`).
//!
//! The loop knows a window when one is configured (on the agent, or on the
//! runtime for its model) or learned from a server's refusal that named it
//! ([`Learned`], shared by the agents of a runtime). Right before each
//! request is sent it estimates the request's tokens: the prompt tokens the
//! server reported for an earlier request of the same conversation, plus
//! what was added since at
//! [`BYTES_PER_TOKEN`](dsh_tools::budget::BYTES_PER_TOKEN) bytes a token,
//! measured on the body as sent ([`Estimate`]) and scaled by how the
//! model's server has counted so far ([`Density`]). The request
//! must leave a reserve for the answer: its `max_tokens` when set, otherwise
//! [`answer_reserve`]'s default. One turn's tool results that do
//! not fit share the room that is left ([`dsh_tools::budget::fit`]) and are
//! cut to their shares ([`fit_results`]). When even that does not fit, the
//! run stops with [`ContextStop`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use dsh_llm::openai::{content_bytes, message_bytes, request_bytes, tools_bytes};
use dsh_llm::{ChatRequest, ToolCall};
pub use dsh_subagent_api::ContextWindow;
use dsh_tools::ToolResult;
use dsh_tools::budget::{bytes_in, fit, tokens_in};
use dsh_transcript::{ContextStop, FoundBy};

use crate::kept::KeptModel;
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

/// The tokens kept for the answer of a request with this `max_tokens` in a
/// window of `window` tokens: its `max_tokens` when set, otherwise
/// [`DEFAULT_ANSWER_RESERVE`] and at most a quarter of the window (a
/// learned window may be below [`ContextWindow::MIN`]).
///
/// ```
/// use dsh_agent::answer_reserve;
/// assert_eq!(answer_reserve(24_000, None), 4_096);
/// assert_eq!(answer_reserve(24_000, Some(1_000)), 1_000);
/// assert_eq!(answer_reserve(2_048, None), 512);
/// ```
pub fn answer_reserve(window: u64, max_tokens: Option<u64>) -> u64 {
    max_tokens.unwrap_or_else(|| DEFAULT_ANSWER_RESERVE.min(window / 4))
}

/// What servers taught the agents of a runtime, per model: the window a
/// refusal named, and how the server counts tokens against the loop's
/// estimate. Shared by the agents of one runtime, which all talk to its
/// one model client (one endpoint); each model keeps its own. What an
/// earlier run kept ([`crate::kept`]) starts it, and what changes since is
/// kept again.
#[derive(Debug, Default)]
pub(crate) struct Learned(Mutex<HashMap<String, Taught>>);

/// A learned window, and whether it was kept from an earlier run (the
/// server has not named it to this one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) tokens: u64,
    pub(crate) kept: bool,
}

/// What a refusal's window changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowLearned {
    /// It was known already.
    Same,
    /// It is new for the model.
    New,
    /// It replaced the window an earlier run kept.
    InPlaceOfKept(u64),
}

/// Where a model's server gives its count of a request's prompt tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Counts {
    /// No answer of it was read yet.
    #[default]
    Unknown,
    /// In its streamed answers' usage.
    InStreams,
    /// Not in its streams (llama-cpp-python): the context fit asks it to
    /// count a request it would otherwise cut or stop on an unchecked
    /// estimate.
    WhenAsked,
    /// Neither in its streams nor when asked: the estimate stands alone.
    Never,
}

/// What was learned about one model.
#[derive(Clone, Debug, Default)]
struct Taught {
    /// Where its server counts.
    counts: Counts,
    /// The window the latest refusal named.
    window: Option<Window>,
    /// The most requests its endpoint takes at once, when the client learned it.
    concurrency: Option<dsh_llm::Concurrency>,
    /// Whether it taught something not kept yet.
    changed: bool,
    /// How the server counted whole requests the loop estimated whole.
    whole: Samples,
    /// How it counted what was added since a request it had counted.
    added: Samples,
}

impl Taught {
    fn samples(&mut self, estimate: Estimate) -> &mut Samples {
        if estimate.anchored() {
            &mut self.added
        } else {
            &mut self.whole
        }
    }

    /// The density for estimates of `estimate`'s kind: the densest of its
    /// latest counts; without one, the other kind's when that is denser
    /// than four bytes a token (a server that counts more of one kind
    /// likely counts more of the other), else four bytes a token (a sparser
    /// count of the other kind may come from what only it holds, such as
    /// tool definitions a chat template leaves out).
    fn density(&self, estimate: Estimate) -> Density {
        let (own, other) = if estimate.anchored() {
            (&self.added, &self.whole)
        } else {
            (&self.whole, &self.added)
        };
        own.density().unwrap_or_else(|| {
            let default = Density::default();
            other.density().filter(|other| other.denser(default)).unwrap_or(default)
        })
    }
}

impl Learned {
    fn taught<T>(&self, model: &str, read: impl FnOnce(&mut Taught) -> T) -> T {
        let mut taught = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        read(taught.entry(model.to_owned()).or_default())
    }

    /// The window learned for `model`.
    pub(crate) fn window(&self, model: &str) -> Option<Window> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(model)
            .and_then(|taught| taught.window)
    }

    /// Learns `tokens` as `model`'s window, in place of any learned or kept
    /// before (the server's latest word): what that changed.
    pub(crate) fn learn_window(&self, model: &str, tokens: u64) -> WindowLearned {
        self.taught(model, |taught| {
            let learned = Window { tokens, kept: false };
            let was = taught.window.replace(learned);
            taught.changed |= was.is_none_or(|was| was.tokens != tokens);
            match was {
                Some(was) if was.tokens == tokens => WindowLearned::Same,
                Some(Window { tokens, kept: true }) => WindowLearned::InPlaceOfKept(tokens),
                _ => WindowLearned::New,
            }
        })
    }

    /// Learns from an answer of `model`'s server whether its streams count
    /// the prompt (`counted`). A server that did not count when asked is
    /// not asked again.
    pub(crate) fn answered(&self, model: &str, counted: bool) {
        self.taught(model, |taught| {
            taught.counts = match (counted, taught.counts) {
                (true, _) => Counts::InStreams,
                (false, Counts::Never) => Counts::Never,
                (false, _) => Counts::WhenAsked,
            };
        });
    }

    /// Whether `model`'s server is to be asked to count: its streams do not.
    pub(crate) fn asks_to_count(&self, model: &str) -> bool {
        self.taught(model, |taught| taught.counts == Counts::WhenAsked)
    }

    /// `model`'s server gave no count when asked: it is not asked again.
    pub(crate) fn never_counts(&self, model: &str) {
        self.taught(model, |taught| taught.counts = Counts::Never);
    }

    /// How `model`'s server counts against estimates of `estimate`'s kind.
    pub(crate) fn density(&self, model: &str, estimate: Estimate) -> Density {
        self.taught(model, |taught| taught.density(estimate))
    }

    /// Learns from the server's count (`server` prompt tokens) of a request
    /// the loop estimated as `estimate`.
    /// A kept window smaller than the count proves the server's window
    /// larger now (restarted with another): it is forgotten, and the log
    /// says so.
    pub(crate) fn learn_count(&self, model: &str, server: u64, estimate: Estimate) {
        let sample = Density::sample(server.saturating_sub(estimate.counted), tokens_in(estimate.bytes));
        self.taught(model, |taught| {
            if let Some(kept) = taught.window.filter(|window| window.kept && window.tokens < server) {
                tracing::warn!("{}", wording::log_kept_window_forgotten(server, kept.tokens, model));
                taught.window = None;
                taught.changed = true;
            }
            if let Some(sample) = sample {
                taught.samples(estimate).push(sample);
                taught.changed = true;
            }
        });
    }

    /// Learns from a refusal that did not count the request: the server
    /// counted more than `at_least` tokens of a request the loop estimated
    /// as `estimate`. Only a lower bound, so learned with a quarter more,
    /// and only when it says the estimate was too low.
    pub(crate) fn learn_at_least(&self, model: &str, at_least: u64, estimate: Estimate) {
        let ours = tokens_in(estimate.bytes);
        let server = at_least.saturating_sub(estimate.counted);
        self.taught(model, |taught| {
            if server <= taught.density(estimate).scale(ours) {
                return;
            }
            if let Some(sample) = Density::sample(server.saturating_add(server / 4), ours) {
                taught.samples(estimate).push(sample);
                taught.changed = true;
            }
        });
    }

    /// Starts `model` from what an earlier run kept of it: its window
    /// (marked kept), its limit and its counts.
    pub(crate) fn keep(&self, model: &str, kept: &KeptModel) {
        self.taught(model, |taught| {
            taught.window = kept.window.map(|tokens| Window { tokens, kept: true });
            taught.concurrency = kept.concurrency;
            taught.whole = Samples(kept.whole.iter().filter_map(|sample| Density::kept(*sample)).collect());
            taught.added = Samples(kept.added.iter().filter_map(|sample| Density::kept(*sample)).collect());
        });
    }

    /// What changed since it was last kept, per model, with each model's
    /// `concurrency` as the client knows it now (a change counts too); the
    /// models taken are marked kept.
    pub(crate) fn to_keep(
        &self,
        concurrency: impl Fn(&str) -> Option<dsh_llm::Concurrency>,
    ) -> BTreeMap<String, KeptModel> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = BTreeMap::new();
        for (model, taught) in all.iter_mut() {
            let limit = concurrency(model);
            if !taught.changed && limit == taught.concurrency {
                continue;
            }
            taught.changed = false;
            taught.concurrency = limit;
            let kept = KeptModel {
                window: taught.window.map(|window| window.tokens),
                concurrency: limit,
                whole: taught
                    .whole
                    .0
                    .iter()
                    .map(|density| [density.server, density.ours])
                    .collect(),
                added: taught
                    .added
                    .0
                    .iter()
                    .map(|density| [density.server, density.ours])
                    .collect(),
            };
            changed.insert(model.clone(), kept);
        }
        changed
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
    /// What `request` holds, before the server counted it.
    pub(crate) fn of(request: &ChatRequest) -> Self {
        Self {
            tokens: 0,
            messages: request.messages.len(),
            tools: tools_bytes(&request.tools),
        }
    }

    /// The first `messages` messages of `request` (which holds more, whose
    /// count covers them), before the server counted it.
    pub(crate) fn prefix(request: &ChatRequest, messages: usize) -> Self {
        Self {
            messages: messages.min(request.messages.len()),
            ..Self::of(request)
        }
    }

    /// Whether its count covers the first `messages` messages of the
    /// conversation's requests.
    pub(crate) fn covers(self, messages: usize) -> bool {
        self.messages >= messages
    }

    /// The same request, whose prompt the server counted as `tokens`; none
    /// for a count of zero, which no real prompt has (a server that reports
    /// a zero anchors nothing, or the whole conversation would be left out
    /// of the next estimate).
    pub(crate) fn counted(self, tokens: u64) -> Option<Self> {
        (tokens > 0).then_some(Self { tokens, ..self })
    }
}

/// The fewest tokens of the loop's own count a server's count must cover to
/// teach a density: below it, the few tokens a chat template adds around
/// each message outweigh the text.
const MIN_SAMPLE: u64 = 64;

/// How many of a model's latest counts its estimates follow (the densest
/// of them): enough to ride out one sparse count, few enough to follow a
/// server that counts less than four bytes a token within a few requests.
const SAMPLES: usize = 4;

/// Percent added to a learned density, so that an estimate that tracks the
/// server stays just above its count.
const MARGIN_PERCENT: u64 = 3;

/// How far a learned density may stray from four bytes a token, either way.
const MAX_SKEW: u64 = 8;

/// How many of the server's tokens one token of the loop's own count (four
/// bytes of the body) turned out to be, as a ratio.
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
    /// The density of a count of `server` tokens where the loop counted
    /// `ours`, with [`MARGIN_PERCENT`] added and at most [`MAX_SKEW`] from
    /// one; `None` when `ours` is too small to tell ([`MIN_SAMPLE`]) or
    /// the server counted nothing.
    fn sample(server: u64, ours: u64) -> Option<Self> {
        if ours < MIN_SAMPLE || server == 0 {
            return None;
        }
        let server = server.saturating_mul(100 + MARGIN_PERCENT).div_ceil(100);
        let server = server.clamp(ours.div_ceil(MAX_SKEW), ours.saturating_mul(MAX_SKEW));
        Some(Self { server, ours })
    }

    /// A density kept from an earlier run, `[server, ours]`, when a learned
    /// one can be that ([`kept_sample`]).
    fn kept([server, ours]: [u64; 2]) -> Option<Self> {
        kept_sample([server, ours]).then_some(Self { server, ours })
    }

    /// Whether it counts more of the server's tokens per token than `other`.
    fn denser(self, other: Self) -> bool {
        u128::from(self.server) * u128::from(other.ours) > u128::from(other.server) * u128::from(self.ours)
    }

    /// `tokens` of the loop's count in the server's tokens (rounded up).
    fn scale(self, tokens: u64) -> u64 {
        let scaled = (u128::from(tokens) * u128::from(self.server)).div_ceil(u128::from(self.ours));
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// `bytes` of text the loop wrote down (an answer the server did not
    /// count), in the server's tokens.
    pub(crate) fn tokens_of(self, bytes: u64) -> u64 {
        self.scale(tokens_in(bytes))
    }

    /// `tokens` of the server's in the loop's count (rounded down).
    fn unscale(self, tokens: u64) -> u64 {
        let unscaled = u128::from(tokens) * u128::from(self.ours) / u128::from(self.server);
        u64::try_from(unscaled).unwrap_or(u64::MAX)
    }
}

/// Whether `[server, ours]`, kept from an earlier run, is a density a
/// count can have taught: enough of the loop's own count behind it, and
/// within [`MAX_SKEW`] of four bytes a token either way. Another is left
/// out, never learned.
fn kept_sample([server, ours]: [u64; 2]) -> bool {
    ours >= MIN_SAMPLE && server >= ours.div_ceil(MAX_SKEW) && server <= ours.saturating_mul(MAX_SKEW)
}

/// A model's latest densities, newest last.
#[derive(Clone, Debug, Default)]
struct Samples(Vec<Density>);

impl Samples {
    /// The densest of them; `None` while there is none.
    fn density(&self) -> Option<Density> {
        self.0
            .iter()
            .copied()
            .reduce(|densest, sample| if sample.denser(densest) { sample } else { densest })
    }

    fn push(&mut self, sample: Density) {
        if self.0.len() == SAMPLES {
            self.0.remove(0);
        }
        self.0.push(sample);
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

    /// Whether it continues from a count the server reported.
    pub(crate) fn anchored(self) -> bool {
        self.counted > 0
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
        Err(ContextStop::new(
            Some(self.window),
            self.reserve,
            request,
            FoundBy::Estimate,
        ))
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
mod tests;
