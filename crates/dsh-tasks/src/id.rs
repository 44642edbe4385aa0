//! Task ids, `<kind>-<n>`, and the reservation of one.
//!
//! Ids count per owner and per kind: each agent's `subagent-1`,
//! `subagent-2`, … are its own, in the order they were reserved. So the ids
//! one agent reads depend on nothing another agent does, nor on the order
//! in which its tasks finish.

use std::fmt;
use std::num::NonZeroU64;

use dsh_tools::AgentId;

/// A task's id: its kind and its number, written `<kind>-<n>`
/// (`subagent-3`), `n` from 1, with no sign and no leading zero. Read from
/// text with [`str::parse`]: anything else is
/// [`TaskError::InvalidId`](crate::TaskError::InvalidId).
///
/// ```
/// use dsh_tasks::TaskId;
/// let id: TaskId = "subagent-3".parse().unwrap();
/// assert_eq!((id.kind(), id.number().get()), ("subagent", 3));
/// assert_eq!(id.to_string(), "subagent-3");
/// assert!("subagent-03".parse::<TaskId>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskId {
    pub(crate) kind: String,
    pub(crate) number: NonZeroU64,
}

impl TaskId {
    /// The id `<kind>-<number>`.
    pub fn new(kind: impl Into<String>, number: NonZeroU64) -> Self {
        Self {
            kind: kind.into(),
            number,
        }
    }

    /// Its kind: the text before the last `-`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Its number, counted per owner and per kind.
    pub fn number(&self) -> NonZeroU64 {
        self.number
    }

    /// Reads `<kind>-<n>` exactly as the registry writes it: a non-empty
    /// kind, then a number from 1 with no sign and no leading zero.
    pub(crate) fn read(id: &str) -> Option<Self> {
        let (kind, digits) = id.rsplit_once('-')?;
        let number = digits.parse::<NonZeroU64>().ok()?;
        (!kind.is_empty() && number.to_string() == digits).then(|| Self::new(kind, number))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.kind, self.number)
    }
}

/// The next id of one owner and kind, taken now
/// ([`TaskRegistry::reserve`](crate::TaskRegistry::reserve)), for a task
/// that may start later ([`TaskSpec::reserved`](crate::TaskSpec::reserved)).
///
/// A tool call reserves its id when it starts, so that calls made together
/// are numbered in the order they were made, whatever order they finish
/// in; the task made under it is listed in that order too. A reservation
/// never used leaves a gap in the numbering, nothing else.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an unused reservation only leaves a gap in the numbering"]
pub struct Reservation {
    pub(crate) id: TaskId,
    pub(crate) owner: AgentId,
    /// Its place in the order of reservations, across kinds and owners.
    pub(crate) order: u64,
}

impl Reservation {
    /// The id reserved.
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// The owner it was reserved for.
    pub fn owner(&self) -> &AgentId {
        &self.owner
    }
}
