//! Where two recordings of one task first part
//! ([`Cassette::diff`](super::Cassette::diff)).

use crate::wording;

/// Where two recordings of one task first part.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Divergence {
    /// One agent's request differs at a field.
    Request {
        /// The agent (numbered as in the first cassette).
        agent: usize,
        /// Its request number.
        request: usize,
        /// The first field that differs, e.g. `messages[3].content`.
        field: String,
        /// Its value in the first cassette (`None`: absent).
        first: Option<String>,
        /// Its value in the second.
        second: Option<String>,
    },
    /// One agent's request is the same, its answer is not.
    Answer {
        /// The agent.
        agent: usize,
        /// Its request number.
        request: usize,
        /// The first answer, in short.
        first: String,
        /// The second.
        second: String,
    },
    /// An agent's request is in one cassette only.
    Missing {
        /// The agent (numbered in the cassette that has it).
        agent: usize,
        /// Its request number.
        request: usize,
        /// Whether the first cassette has it (else the second).
        in_first: bool,
        /// The start of the agent's task.
        task: String,
    },
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            Divergence::Request {
                agent,
                request,
                field,
                first,
                second,
            } => wording::divergence_request(*agent, *request, field, first.as_deref(), second.as_deref()),
            Divergence::Answer {
                agent,
                request,
                first,
                second,
            } => wording::divergence_answer(*agent, *request, first, second),
            Divergence::Missing {
                agent,
                request,
                in_first,
                task,
            } => wording::divergence_missing(*agent, *request, *in_first, task),
        };
        f.write_str(&text)
    }
}
