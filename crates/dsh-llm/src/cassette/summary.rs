//! A cassette's summary: its agents, requests, tokens, errors and cut
//! streams, in numbers ([`Cassette::summary`](super::Cassette::summary)).

use crate::wording;

/// What a cassette holds, in numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// The agents, by first appearance.
    pub agents: Vec<AgentSummary>,
    /// All exchanges (a retry is one of its own).
    pub exchanges: usize,
    /// Prompt tokens the answers reported.
    pub prompt_tokens: u64,
    /// Completion tokens the answers reported.
    pub completion_tokens: u64,
    /// Exchanges that ended in an error: an HTTP status of 400 or more, a
    /// failed connection, a model's error, or an answer that said nothing
    /// (an empty 200, or `[DONE]` alone).
    pub errors: usize,
    /// Answers that stopped after they began but before their finish
    /// reason: cut by the network, or by the server (`[DONE]` or the
    /// body's end too early). Only a finish reason makes an answer whole.
    pub cut_streams: usize,
    /// Exchanges the client stopped reading before the answer said it was
    /// complete (cancelled, or its timeout fired).
    pub dropped: usize,
}

/// One agent of a cassette.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentSummary {
    /// Its number (1-based, by first appearance).
    pub number: usize,
    /// Its requests.
    pub requests: usize,
    /// The start of its first user message.
    pub task: String,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&wording::cassette_totals(
            self.exchanges,
            self.agents.len(),
            (self.prompt_tokens, self.completion_tokens),
            self.errors,
            self.cut_streams,
            self.dropped,
        ))?;
        for agent in &self.agents {
            f.write_str(&wording::cassette_agent(agent.number, agent.requests, &agent.task))?;
        }
        Ok(())
    }
}
