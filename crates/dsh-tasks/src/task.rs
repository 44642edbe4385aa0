//! A task as its producer and its readers see it: where it stands, how it
//! settles, what starts one, and the producer's kill signal.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

use dsh_tools::{AgentId, CancellationToken};

use crate::{Output, Reservation, TaskId, TaskText, TextStore, lock};

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Still working.
    Running,
    /// Finished with output.
    Completed,
    /// Finished with a failure.
    Failed,
    /// Stopped by a kill.
    Killed,
}

impl TaskStatus {
    /// Whether the task has settled.
    pub fn is_terminal(self) -> bool {
        self != Self::Running
    }

    /// The status word: `running`, `completed`, `failed`, `killed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a producer settles its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    /// Finished; `output` is what `task_output` shows.
    Completed {
        /// The task's output: its text (kept in the task's [`TextStore`]),
        /// or where it can be read again.
        output: Output,
    },
    /// Failed; `detail` appears in the status line.
    Failed {
        /// What went wrong.
        detail: String,
    },
    /// Stopped by a kill.
    Killed,
}

/// What a task looks like at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskSnapshot {
    /// The task id, `<kind>-<n>`.
    pub id: String,
    /// Its kind, e.g. `subagent`.
    pub kind: String,
    /// Its display label.
    pub label: String,
    /// The agent that owns it.
    pub owner: AgentId,
    /// Where it stands.
    pub status: TaskStatus,
    /// Its output (empty until it completes): shared with the task, never
    /// copied; [`TaskText::read`] reads it, or says it is no longer kept.
    pub output: TaskText,
    /// The failure detail, for a failed task.
    pub detail: Option<String>,
}

/// A result recorded as a finished task ([`TaskRegistry::record`](crate::TaskRegistry::record)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A success, and its output.
    Completed(Output),
    /// A failure: the detail of its status line, and the text its owner
    /// read (the error, partial output included), which `task_output` shows
    /// as the task's output.
    Failed {
        /// The detail of the status line (one short line).
        detail: String,
        /// The text the owner read.
        output: Output,
    },
}

/// What to start: a kind (the id prefix), a label, an owner, where its
/// output is kept, and which id it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskSpec {
    /// The kind, e.g. `subagent`.
    pub kind: String,
    /// The display label.
    pub label: String,
    /// The owning agent.
    pub owner: AgentId,
    /// The store its output text is kept in; `None`: the registry's own
    /// ([`TaskRegistry::texts`](crate::TaskRegistry::texts)).
    pub texts: Option<TextStore>,
    /// Which number its id takes.
    pub(crate) number: Numbered,
    /// Whether its owner hears that it finished.
    pub(crate) told: Told,
}

/// Whether a task's owner is told when it finishes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Told {
    /// A completion notice is queued for the owner.
    #[default]
    WhenItFinishes,
    /// The owner was told already (a task restored after a crash whose
    /// notice a model call had taken before it).
    Already,
}

/// Which number a task's id takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Numbered {
    /// The owner's next of the kind, when the task starts.
    Next,
    /// One reserved earlier, and that reservation's place in the order.
    Reserved { number: NonZeroU64, order: u64 },
    /// One given by the harness (a task restored after a crash).
    Given(NonZeroU64),
}

impl TaskSpec {
    /// A spec whose output is kept in the registry's store, under the
    /// owner's next id of `kind`.
    pub fn new(kind: impl Into<String>, label: impl Into<String>, owner: AgentId) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            owner,
            texts: None,
            number: Numbered::Next,
            told: Told::WhenItFinishes,
        }
    }

    /// Queues no completion notice when the task finishes: its owner was
    /// told already, before a crash (a restored task's notice is delivered
    /// once, across any number of restarts).
    #[must_use]
    pub fn already_told(mut self) -> Self {
        self.told = Told::Already;
        self
    }

    /// A spec under an id reserved earlier
    /// ([`TaskRegistry::reserve`](crate::TaskRegistry::reserve)): its kind
    /// and owner are the reservation's, and the task is listed in the
    /// order of its reservation.
    pub fn reserved(reservation: Reservation, label: impl Into<String>) -> Self {
        let Reservation { id, owner, order } = reservation;
        let mut spec = Self::new(id.kind, label, owner);
        spec.number = Numbered::Reserved {
            number: id.number,
            order,
        };
        spec
    }

    /// Starts the task under the given `id` instead (its kind replaces the
    /// spec's): a task restored after a crash keeps the id its owner
    /// already read. The owner's count of that kind moves past it, so no
    /// later id repeats it; an id a kept task of the owner already has is
    /// refused ([`TaskError::IdTaken`](crate::TaskError::IdTaken)).
    #[must_use]
    pub fn with_id(mut self, id: TaskId) -> Self {
        let TaskId { kind, number } = id;
        self.kind = kind;
        self.number = Numbered::Given(number);
        self
    }

    /// Keeps the task's output in `texts`: the store of the owner's
    /// delegation tree, say, so that one tree's outputs share one bound.
    #[must_use]
    pub fn kept_in(mut self, texts: TextStore) -> Self {
        self.texts = Some(texts);
        self
    }
}

/// The producer's side of a task: its kill signal and the kill's reason.
#[derive(Clone, Debug)]
pub struct TaskControl {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The task's id, set once the registry has numbered it (before its
    /// producer is called).
    id: Arc<std::sync::OnceLock<String>>,
}

impl TaskControl {
    /// A control not yet killed.
    pub(crate) fn new() -> Self {
        Self {
            token: CancellationToken::new(),
            reason: Arc::default(),
            id: Arc::default(),
        }
    }

    /// Names the task once the registry has numbered it.
    pub(crate) fn name(&self, id: &str) {
        let _ = self.id.set(id.to_owned());
    }

    /// The task's id (the one `task_output` takes): what its producer
    /// records of where the work runs.
    pub fn id(&self) -> &str {
        self.id.get().map_or("", String::as_str)
    }

    /// Kills the task: the first kill's `reason` is kept, and the token is
    /// cancelled.
    pub(crate) fn kill(&self, reason: Option<String>) {
        {
            let mut first = lock(&self.reason);
            if first.is_none() && !self.token.is_cancelled() {
                *first = reason;
            }
        }
        self.token.cancel();
    }

    /// Cancelled when the task is killed.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// The reason of the first kill, if one was given.
    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }
}

/// What a kill did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// The task was running; its producer has been told to stop.
    Requested,
    /// The task had already settled.
    AlreadyFinished(TaskSnapshot),
}

/// What `task_list` shows of one agent's tasks ([`TaskRegistry::listing`](crate::TaskRegistry::listing)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskListing {
    /// Every running task and the most recently finished ones, in dispatch order.
    pub tasks: Vec<TaskSnapshot>,
    /// How many kept finished tasks, all of them older than those shown,
    /// are left out.
    pub older_finished: usize,
}
