//! Why a run stopped at its context window, as its transcript records it
//! (see "The context fit" in the workspace's `docs/design.md`).

use serde::{Deserialize, Serialize};

use crate::wording;

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
    /// gave one, else the loop's estimate ([`ContextStop::counted_by`]).
    pub request: u64,
    /// Who found that it does not fit.
    pub found_by: FoundBy,
    /// Whose count [`ContextStop::request`] is.
    #[serde(default)]
    pub counted_by: CountedBy,
}

impl ContextStop {
    /// A stop at a window of `window` tokens (`None`: not known) with
    /// `reserve` kept for the answer, for a request of `request` tokens by
    /// the loop's estimate.
    pub fn new(window: Option<u64>, reserve: u64, request: u64, found_by: FoundBy) -> Self {
        Self {
            window,
            reserve,
            request,
            found_by,
            counted_by: CountedBy::Estimate,
        }
    }

    /// The same stop, with `request` counted by `counted_by`.
    #[must_use]
    pub fn counted_by(mut self, counted_by: CountedBy) -> Self {
        self.counted_by = counted_by;
        self
    }

    /// The one line that says why the run stopped: how large the request
    /// was (and by whose count), the window and the reserve (or that the
    /// server named no window), how often the server refused it, and that
    /// the transcript is kept. A child's diagnostic, and what follows
    /// `context-window: ` wherever the stop is shown.
    pub fn line(&self) -> String {
        let size = match self.counted_by {
            CountedBy::Server => wording::context_size_counted(self.request),
            CountedBy::Estimate => wording::context_size_estimated(self.request),
        };
        match (self.found_by, self.window) {
            (FoundBy::Estimate, Some(window)) => wording::context_over(self.request, window, self.reserve),
            (FoundBy::SecondRefusal, Some(window)) => wording::context_refused_twice(&size, window, self.reserve),
            (_, Some(window)) => wording::context_refused(&size, window, self.reserve),
            (_, None) => wording::context_refused_unnamed(&size),
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
    /// The server, which refused it the first time it was sent.
    Refusal,
    /// The server, which refused it again after the loop had fitted it
    /// once more.
    SecondRefusal,
}

/// Whose count a request's size in a [`ContextStop`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CountedBy {
    /// The loop's estimate.
    #[default]
    Estimate,
    /// The server's own count, from its refusal.
    Server,
}
