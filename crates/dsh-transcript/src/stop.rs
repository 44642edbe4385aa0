//! How a run stopped, as its transcript records it: the value a
//! [`TranscriptEntry::TurnEnd`](crate::TranscriptEntry::TurnEnd) keeps, so
//! that a child recovered after a crash hands back the very result its
//! run gave.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ContextStop;
use crate::wording::stop;

/// The stop a [`TranscriptEntry::TurnEnd`](crate::TranscriptEntry::TurnEnd)
/// records for [`AgentStop::Interrupted`]: a turn that ended so stays open.
pub const INTERRUPTED: &str = stop::INTERRUPTED;

/// The stop recorded for an agent that was interrupted and can no longer be
/// resumed ([`StopReason::Disconnected`](dsh_subagent_api::StopReason::Disconnected)).
pub const DISCONNECTED: &str = stop::DISCONNECTED;

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum AgentStop {
    /// The model gave a final answer.
    Completed,
    /// The model stopped because its output-token budget ran out.
    MaxTokens,
    /// The run made its maximum number of model calls without a final answer.
    MaxTurns(u32),
    /// The model's output was withheld (content filter).
    Refusal,
    /// The run was cancelled.
    Cancelled,
    /// The run was stopped resumably: its process is stopping (an
    /// interrupt, a stop that leaves work to resume) and its turn stays
    /// open. Tool results that only the stop produced are not recorded, so
    /// a resume runs those calls again (`dsh_agent::Agent::resume`).
    Interrupted,
    /// The model call failed.
    Error(String),
    /// The model's answer was cut off: its stream ended before a finish
    /// reason (a server that interrupts one request for another does so),
    /// and the model client's retries did not help. The text that had
    /// streamed is the run's text, never an answer; the line says what
    /// ended the stream.
    AnswerCut(String),
    /// A token budget of the agent's delegation tree (its own, an
    /// ancestor's, or the tree's) of this many tokens was spent before the
    /// next model call.
    TokenBudget(u64),
    /// The money budget of the agent's delegation tree, of this many
    /// billionths of its prices' unit, was spent before the next model call.
    CostBudget(u64),
    /// No request that fits the model's context window could be made: the
    /// loop's estimate said so before sending, or the server refused it and
    /// a refit did not help (or it named no window to refit to). Never
    /// retried further; the conversation and transcript are kept.
    ContextWindow(ContextStop),
}

impl fmt::Display for AgentStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Completed => f.write_str(stop::COMPLETED),
            Self::MaxTokens => f.write_str(stop::MAX_TOKENS),
            Self::MaxTurns(limit) => f.write_str(&stop::max_turns(*limit)),
            Self::Refusal => f.write_str(stop::REFUSAL),
            Self::Cancelled => f.write_str(stop::CANCELLED),
            Self::Interrupted => f.write_str(stop::INTERRUPTED),
            Self::Error(message) => f.write_str(&stop::error(message)),
            Self::AnswerCut(message) => f.write_str(&stop::answer_cut(message)),
            Self::TokenBudget(limit) => f.write_str(&stop::token_budget(*limit)),
            Self::CostBudget(limit) => f.write_str(&stop::cost_budget(*limit)),
            Self::ContextWindow(context) => f.write_str(&stop::context_window(&context.line())),
        }
    }
}

impl AgentStop {
    /// The stop a transcript recorded as text only (written before stops
    /// were recorded as values): the named ones read back as themselves,
    /// any other as an error whose message is the text.
    pub fn from_recorded(stop: &str) -> Self {
        match stop {
            stop::COMPLETED => Self::Completed,
            stop::MAX_TOKENS => Self::MaxTokens,
            stop::REFUSAL => Self::Refusal,
            stop::CANCELLED => Self::Cancelled,
            stop::INTERRUPTED => Self::Interrupted,
            other => Self::Error(other.to_owned()),
        }
    }
}
