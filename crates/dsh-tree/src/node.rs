//! The model: a tree of nodes, each with its turns, tokens, result and
//! problems. Serialized as is for `dsh tree --json` ([`TREE_FORMAT_VERSION`]).

use dsh_llm::Cost;
use serde::Serialize;

use crate::cost;

/// The version of the tree's JSON shape. It changes only when a field
/// changes meaning or goes away; new fields may appear within a version.
pub const TREE_FORMAT_VERSION: u32 = 1;

/// How many levels below the root are shown; deeper children are reported
/// as a [`Problem::TooDeep`] on the node where showing stopped.
pub const MAX_SHOWN_DEPTH: usize = 256;

/// A delegation tree: one agent (a top-level agent, usually) and every
/// agent below it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Tree {
    /// [`TREE_FORMAT_VERSION`].
    pub version: u32,
    /// The root agent and, through its children, the whole tree.
    pub root: Node,
}

impl Tree {
    /// A tree of `root`, in the current shape.
    pub fn new(root: Node) -> Self {
        Self {
            version: TREE_FORMAT_VERSION,
            root,
        }
    }

    /// Every node, depth first, parents before their children, with its
    /// depth below the root (0 for the root).
    pub fn walk(&self) -> Vec<(usize, &Node)> {
        let mut nodes = Vec::new();
        let mut stack = vec![(0, &self.root)];
        while let Some((level, node)) = stack.pop() {
            nodes.push((level, node));
            stack.extend(node.children.iter().rev().map(|child| (level + 1, child)));
        }
        nodes
    }

    /// The earliest and latest times of any node, in milliseconds since the
    /// Unix epoch (a queue wait counted from its start), when any is known.
    pub fn span_ms(&self) -> Option<(u64, u64)> {
        let mut span: Option<(u64, u64)> = None;
        for (_, node) in self.walk() {
            for turn in &node.turns {
                for time in [turn.queued_since_ms(), turn.started_at_ms, turn.ended_at_ms]
                    .into_iter()
                    .flatten()
                    .chain(turn.calls_at_ms.iter().copied())
                {
                    span = Some(span.map_or((time, time), |(first, last)| (first.min(time), last.max(time))));
                }
            }
        }
        span
    }
}

/// One agent of the tree.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Node {
    /// The agent's id.
    pub id: String,
    /// Its delegation depth (0 for a top-level agent).
    pub depth: u64,
    /// The tool whose call started it (`subagent`, `subagent_fork`, an ACP
    /// agent's tool); absent for a top-level agent, or when not recorded.
    pub tool: Option<String>,
    /// Its display label (the delegation's `description`).
    pub label: Option<String>,
    /// What it was asked, as its parent described it: only for a subagent
    /// session an agent in another process announced (its task there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The registered name of the provider that ran it.
    pub provider: Option<String>,
    /// The model it used, when known.
    pub model: Option<String>,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_at_ms: Option<u64>,
    /// Where its record is.
    pub place: Place,
    /// Its runs, in order: one for a child started once, one per
    /// continuation of a continued child, one per prompt of a resumed parent.
    pub turns: Vec<Turn>,
    /// The tokens of its own model calls, over every turn; `None` when no
    /// call reported any.
    pub tokens: Option<Tokens>,
    /// Its tokens and every descendant's.
    pub subtree_tokens: Option<Tokens>,
    /// What its own tokens cost, only where a price is known (never a
    /// made-up price); shown as `{"amount", "estimated"}`.
    #[serde(serialize_with = "cost::shown")]
    pub cost: Option<Cost>,
    /// What its subtree's tokens cost, only where every price is known.
    #[serde(serialize_with = "cost::shown")]
    pub subtree_cost: Option<Cost>,
    /// Its (first) result's size in full and as its parent's model read it.
    pub result: Option<ResultSize>,
    /// Its task (the id `task_output` takes): the background task that ran
    /// it, or the task that keeps its foreground result cut to its budget.
    pub task_id: Option<String>,
    /// What is wrong with its record; the rest of the node is what could
    /// be read.
    pub problems: Vec<Problem>,
    /// Its children, in the order they began.
    pub children: Vec<Node>,
}

impl Node {
    /// A node that knows only its id and depth.
    pub fn new(id: impl Into<String>, depth: u64, place: Place) -> Self {
        Self {
            id: id.into(),
            depth,
            tool: None,
            label: None,
            task: None,
            provider: None,
            model: None,
            created_at_ms: None,
            place,
            turns: Vec::new(),
            tokens: None,
            subtree_tokens: None,
            cost: None,
            subtree_cost: None,
            result: None,
            task_id: None,
            problems: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Its label, or its id when it has none.
    pub fn name(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.id)
    }

    /// How its last turn ended (or that it has not ended), when it has one.
    pub fn ending(&self) -> Option<&Ending> {
        self.turns.last().map(|turn| &turn.ending)
    }

    /// Its model calls over every turn.
    pub fn model_calls(&self) -> u32 {
        self.turns.iter().map(|turn| turn.model_calls).sum()
    }

    /// Its time waiting for a slot over every turn, in milliseconds.
    pub fn queued_ms(&self) -> Option<u64> {
        sum(self.turns.iter().map(|turn| turn.queued_ms))
    }

    /// Its time running over every turn, in milliseconds (a turn still
    /// running counts up to `now_ms`).
    pub fn running_ms(&self, now_ms: u64) -> Option<u64> {
        sum(self.turns.iter().map(|turn| turn.running_ms(now_ms)))
    }

    /// Sets [`tokens`](Self::tokens) from the turns, and
    /// [`subtree_tokens`](Self::subtree_tokens) from them and the
    /// children's (whose own totals must be set already).
    ///
    /// Its [`cost`](Self::cost) and [`subtree_cost`](Self::subtree_cost)
    /// too, each only where every part that spent tokens has a cost.
    pub fn total(&mut self) {
        self.tokens = self
            .turns
            .iter()
            .fold(None, |total, turn| Tokens::add(total, turn.tokens));
        self.subtree_tokens = self
            .children
            .iter()
            .fold(self.tokens, |total, child| Tokens::add(total, child.subtree_tokens));
        self.cost = cost::of_parts(self.turns.iter().map(|turn| (turn.tokens.is_some(), turn.cost)));
        let children = self
            .children
            .iter()
            .map(|child| (child.subtree_tokens.is_some(), child.subtree_cost));
        self.subtree_cost = cost::of_parts(std::iter::once((self.tokens.is_some(), self.cost)).chain(children));
    }
}

/// The sum of the known values; `None` when none is known.
fn sum(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.flatten().reduce(u64::saturating_add)
}

/// Where a node's record is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Place {
    /// Its transcript, at this path.
    Transcript {
        /// The file.
        path: String,
    },
    /// Seen only in live events, in this process.
    Live,
    /// It ran in another process (an ACP agent) whose records are not
    /// read here: what is shown is what its parent recorded.
    Elsewhere {
        /// Where it ran, in words: its provider, and its session there
        /// when known.
        ran: String,
    },
}

/// One run of an agent: its wait, its time running, its model calls and
/// tokens, and how it ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Turn {
    /// How it ended, or that it has not.
    pub ending: Ending,
    /// How long its start waited for a slot of the tree, when it waited.
    pub queued_ms: Option<u64>,
    /// When it began running, in milliseconds since the Unix epoch.
    pub started_at_ms: Option<u64>,
    /// When it ended.
    pub ended_at_ms: Option<u64>,
    /// Its model calls.
    pub model_calls: u32,
    /// When each model call ended, when recorded.
    pub calls_at_ms: Vec<u64>,
    /// The tokens of its model calls, when any reported them.
    pub tokens: Option<Tokens>,
    /// What its model calls cost, where their model's price is known.
    #[serde(serialize_with = "cost::shown")]
    pub cost: Option<Cost>,
    /// The size of its final answer, in bytes.
    pub answer_bytes: Option<u64>,
}

impl Turn {
    /// A turn that ended (or stands) so, with nothing else known yet.
    pub fn new(ending: Ending) -> Self {
        Self {
            ending,
            ..Self::default()
        }
    }

    /// When its wait for a slot began (its start less its wait).
    pub fn queued_since_ms(&self) -> Option<u64> {
        Some(self.started_at_ms?.saturating_sub(self.queued_ms?))
    }

    /// How long it ran (up to `now_ms` when it has not ended).
    pub fn running_ms(&self, now_ms: u64) -> Option<u64> {
        let started = self.started_at_ms?;
        let ended = match self.ending {
            Ending::Running => self.ended_at_ms.unwrap_or(now_ms),
            _ => self.ended_at_ms?,
        };
        Some(ended.saturating_sub(started))
    }
}

/// How a turn ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Ending {
    /// Waiting for a slot of its tree.
    Queued,
    /// Running: a process runs its tree now, and its record ends before
    /// the turn did.
    #[default]
    Running,
    /// It gave its final answer.
    Completed,
    /// It stopped for another reason.
    Stopped {
        /// The stop's name: `cancelled`, `aborted`, `error`, `max-tokens`,
        /// `max-turns`, `refusal`, `context-window`, a token budget, …
        reason: String,
        /// What the stop says beyond its name (an error's message).
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The turn was cut short and no process runs it: a crash, or a
    /// resumable stop; a resume goes on with it (an older transcript's
    /// resume abandoned it).
    Interrupted {
        /// What the repair found.
        detail: String,
    },
    /// It left the queue before it started (its call was cancelled).
    Withdrawn,
}

impl Ending {
    /// Reads a transcript's stop (`completed`, `error: …`, `max-turns (16)`, …).
    pub fn from_stop(stop: &str) -> Self {
        if stop == "completed" {
            return Self::Completed;
        }
        let (reason, detail) = match stop.split_once(": ") {
            Some((reason, detail)) => (reason, Some(detail.to_owned())),
            None => (stop, None),
        };
        Self::Stopped {
            reason: reason.to_owned(),
            detail,
        }
    }

    /// Whether the turn failed (an error, an answer the server cut off, a
    /// withdrawal, or an interruption), as against finishing or stopping at
    /// a limit.
    pub fn is_failure(&self) -> bool {
        match self {
            Self::Stopped { reason, .. } => reason == "error" || reason == dsh_transcript::wording::ANSWER_CUT_STOP,
            Self::Interrupted { .. } => true,
            _ => false,
        }
    }
}

/// Tokens spent by model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Tokens {
    /// Tokens in the requests.
    pub input: u64,
    /// Tokens generated.
    pub output: u64,
    /// Input tokens the server read from its cache, where it reports them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
    /// Whether some of these counts are estimates (a server that reported
    /// no usage), not the server's own.
    pub estimated: bool,
}

impl Tokens {
    /// Counts as the server reported them.
    pub fn reported(input: u64, output: u64) -> Self {
        Self {
            input,
            output,
            cached: None,
            estimated: false,
        }
    }

    /// Marks these counts as estimated.
    #[must_use]
    pub fn estimated(mut self) -> Self {
        self.estimated = true;
        self
    }

    /// Sets the cached input tokens.
    #[must_use]
    pub fn with_cached(mut self, cached: u64) -> Self {
        self.cached = Some(cached);
        self
    }

    /// The model client's usage of one run, estimated when the agent loop
    /// estimated some of it (`"counted":"estimated"` in a transcript).
    ///
    /// ```
    /// use dsh_llm::{Counted, Usage};
    /// use dsh_tree::Tokens;
    /// assert!(!Tokens::from_usage(&Usage::reported(100, 20)).estimated);
    /// let estimated = Usage { counted: Counted::Estimated, ..Usage::reported(100, 20) };
    /// assert_eq!(Tokens::from_usage(&estimated), Tokens::reported(100, 20).estimated());
    /// ```
    pub fn from_usage(usage: &dsh_llm::Usage) -> Self {
        let mut tokens = Self::reported(usage.prompt_tokens, usage.completion_tokens);
        tokens.cached = usage.cached_tokens;
        if usage.is_estimated() {
            tokens.estimated()
        } else {
            tokens
        }
    }

    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// The sum of two counts, either of which may be unknown; estimated
    /// when either is.
    pub fn add(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Self {
                input: a.input.saturating_add(b.input),
                output: a.output.saturating_add(b.output),
                cached: match (a.cached, b.cached) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
                },
                estimated: a.estimated || b.estimated,
            }),
            (one, None) | (None, one) => one,
        }
    }
}

/// A result's size in full, and as the parent's model read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResultSize {
    /// The full answer, in bytes.
    pub full_bytes: Option<u64>,
    /// What the parent's model read, in bytes (with a cut's notice).
    pub shown_bytes: Option<u64>,
    /// Whether it was cut to its budget.
    pub cut: bool,
}

impl ResultSize {
    /// A result of `full_bytes` of which `shown_bytes` were read; cut when
    /// fewer were read than there were.
    pub fn new(full_bytes: Option<u64>, shown_bytes: Option<u64>) -> Self {
        let cut = matches!((full_bytes, shown_bytes), (Some(full), Some(shown)) if shown < full);
        Self {
            full_bytes,
            shown_bytes,
            cut,
        }
    }

    /// A result its tool reports as cut.
    pub fn cut(full_bytes: u64, shown_bytes: u64) -> Self {
        Self {
            full_bytes: Some(full_bytes),
            shown_bytes: Some(shown_bytes),
            cut: true,
        }
    }
}

/// What is wrong with a node's record. The node shows what could be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Problem {
    /// Its parent names it, but its transcript is not there.
    Missing {
        /// Where it was looked for.
        path: String,
    },
    /// Its transcript could not be read (an I/O error, or a corrupt line).
    Unreadable {
        /// Why.
        message: String,
    },
    /// Its transcript's last line was torn (a crash mid-write); every
    /// earlier entry is shown.
    Torn {
        /// What was found.
        message: String,
    },
    /// The file does not hold this agent's transcript (no header, or
    /// another agent's).
    Foreign {
        /// What the file holds instead.
        message: String,
    },
    /// Its header names a parent that has no transcript here.
    ParentMissing {
        /// The parent named.
        parent: String,
    },
    /// It names as its child an agent already above it: the loop is cut
    /// here.
    Cycle {
        /// The agent named again.
        child: String,
    },
    /// Its children are too deep to show.
    TooDeep {
        /// The depth below the root where showing stopped.
        limit: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_and_a_cut_answer_are_failures_and_a_limit_is_not() {
        assert!(Ending::from_stop("error: HTTP 500").is_failure());
        assert!(
            Ending::from_stop("answer-cut: stream ended before the model finished (the server sent [DONE] without a finish reason): the server cut the answer off; the request was sent once")
                .is_failure()
        );
        assert!(!Ending::from_stop("max-turns (16)").is_failure());
        assert!(!Ending::from_stop("completed").is_failure());
    }
}
