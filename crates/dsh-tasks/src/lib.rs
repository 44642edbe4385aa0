#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod book;
mod code;
mod text;
pub mod wording;

pub use code::ErrorCode;
pub use text::{DEFAULT_KEPT_BYTES, Output, TaskText, TextStore};

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dsh_tools::{AgentId, CancellationToken, panic_message};
use futures::FutureExt;

use crate::book::{Book, Entry};

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

impl TaskSnapshot {
    /// `[status: <status>]` or `[status: <status>, <detail>]`.
    pub fn status_line(&self) -> String {
        wording::status_line(self.status, self.detail.as_deref())
    }
}

/// A result recorded as a finished task ([`TaskRegistry::record`]).
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

/// What to start: a kind (the id prefix), a label, an owner, and where its
/// output is kept.
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
    /// ([`TaskRegistry::texts`]).
    pub texts: Option<TextStore>,
}

impl TaskSpec {
    /// A spec whose output is kept in the registry's store.
    pub fn new(kind: impl Into<String>, label: impl Into<String>, owner: AgentId) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            owner,
            texts: None,
        }
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
}

impl TaskControl {
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

/// A refused task operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// No task has this id, and none ever had (`UNKNOWN_TASK`).
    #[error("{}", wording::unknown_task(id))]
    Unknown {
        /// The id.
        id: String,
    },
    /// The id was issued, but the task has finished and is no longer kept
    /// (`FORGOTTEN_TASK`). Only finished tasks are forgotten, and nothing of
    /// one is kept, not even its owner: another agent's forgotten task
    /// reads the same.
    #[error("{}", wording::forgotten_task(id, *kept))]
    Forgotten {
        /// The id.
        id: String,
        /// How many finished tasks each owner keeps.
        kept: usize,
    },
    /// The task belongs to another agent (`FOREIGN_TASK`). Its text is an
    /// unknown id's: the caller learns nothing of another agent's tasks,
    /// not even that one exists; the code tells the harness.
    #[error("{}", wording::unknown_task(id))]
    Foreign {
        /// The id.
        id: String,
    },
    /// The label is empty (`INVALID_LABEL`).
    #[error("{}", wording::EMPTY_LABEL)]
    EmptyLabel,
    /// The owner was disposed (`OWNER_DISPOSED`).
    #[error("{}", wording::owner_disposed(owner.as_str()))]
    OwnerDisposed {
        /// The owner.
        owner: AgentId,
    },
}

impl TaskError {
    /// The stable code (`as_str()` is its text).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unknown { .. } => ErrorCode::UnknownTask,
            Self::Forgotten { .. } => ErrorCode::ForgottenTask,
            Self::Foreign { .. } => ErrorCode::ForeignTask,
            Self::EmptyLabel => ErrorCode::InvalidLabel,
            Self::OwnerDisposed { .. } => ErrorCode::OwnerDisposed,
        }
    }
}

/// A refused registry operation, as the model reads it: its text and code.
impl From<TaskError> for dsh_tools::ToolError {
    fn from(error: TaskError) -> Self {
        Self::new(error.to_string()).with_code(error.code())
    }
}

/// A lock that a panic elsewhere does not poison for good.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct Inner {
    book: Mutex<Book>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Book> {
        lock(&self.book)
    }

    fn settle(&self, entry: &Entry, outcome: TaskOutcome, notice: book::Notice) {
        // The output goes into its store before the book's lock is taken.
        let outcome = book::Settled::from_outcome(outcome, &entry.texts);
        self.lock().settle(entry, outcome, notice);
        entry.settled.send_replace(true);
    }
}

/// How many finished tasks each owner keeps unless
/// [`TaskRegistry::keep_finished`] says otherwise.
pub const DEFAULT_KEEP_FINISHED: NonZeroUsize = match NonZeroUsize::new(100) {
    Some(count) => count,
    None => NonZeroUsize::MIN,
};

/// What `task_list` shows of one agent's tasks ([`TaskRegistry::listing`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskListing {
    /// Every running task and the most recently finished ones, in dispatch order.
    pub tasks: Vec<TaskSnapshot>,
    /// How many kept finished tasks, all of them older than those shown,
    /// are left out.
    pub older_finished: usize,
}

/// Background tasks of every agent in one process. Cheap to clone.
///
/// Bounded: every running task is kept, and of each owner's finished tasks
/// only the most recently finished are kept ([`DEFAULT_KEEP_FINISHED`], or
/// [`keep_finished`](Self::keep_finished)). When one more finishes, the one
/// that finished longest ago is forgotten, with its completion notice if
/// that was never taken; reading it then fails with
/// [`TaskError::Forgotten`]. Nothing is kept per forgotten task.
///
/// Outputs are bounded in bytes too: each task's output text is kept in a
/// [`TextStore`] (the spec's, or the registry's own,
/// [`DEFAULT_KEPT_BYTES`]), which evicts the oldest text first; a kept
/// task whose text was evicted still reads its status and its size.
#[derive(Clone, Default)]
pub struct TaskRegistry {
    inner: Arc<Inner>,
    texts: TextStore,
}

impl fmt::Debug for TaskRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let book = self.inner.lock();
        f.debug_struct("TaskRegistry")
            .field("tasks", &book.len())
            .field("keep_finished", &book.keep())
            .finish()
    }
}

impl TaskRegistry {
    /// An empty registry that keeps [`DEFAULT_KEEP_FINISHED`] finished tasks per owner.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps at most `count` finished tasks per owner (the most recently
    /// finished); running tasks are always kept. Applies to every clone,
    /// and forgets at once what a lower bound no longer allows.
    #[must_use]
    pub fn keep_finished(self, count: NonZeroUsize) -> Self {
        self.inner.lock().set_keep(count);
        self
    }

    /// How many finished tasks each owner keeps.
    pub fn kept_finished(&self) -> NonZeroUsize {
        self.inner.lock().keep()
    }

    /// Keeps the output of tasks whose spec names no store in `texts`
    /// instead of a store of [`DEFAULT_KEPT_BYTES`]. Applies to this handle
    /// and the clones made from it afterwards.
    #[must_use]
    pub fn kept_in(mut self, texts: TextStore) -> Self {
        self.texts = texts;
        self
    }

    /// The store of outputs whose task's spec names none.
    pub fn texts(&self) -> &TextStore {
        &self.texts
    }

    /// Starts a task: checks the spec, assigns the next `<kind>-<n>` id, and
    /// runs `producer` on its own tokio task. Nothing runs when the checks
    /// fail. A producer that panics settles its task `failed`.
    pub fn spawn<F, Fut>(&self, spec: TaskSpec, producer: F) -> Result<String, TaskError>
    where
        F: FnOnce(TaskControl) -> Fut,
        Fut: Future<Output = TaskOutcome> + Send + 'static,
    {
        if spec.label.trim().is_empty() {
            return Err(TaskError::EmptyLabel);
        }
        let control = TaskControl {
            token: CancellationToken::new(),
            reason: Arc::default(),
        };
        let entry = self.inner.lock().insert(spec, control.clone(), &self.texts)?;
        let id = lock(&entry.snapshot).id.clone();
        let work = producer(control);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let outcome = AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| TaskOutcome::Failed {
                    detail: wording::producer_panicked(&panic_message(&*panic)),
                });
            inner.settle(&entry, outcome, book::Notice::Queue);
        });
        Ok(id)
    }

    /// Records a task that has already finished, and returns it as it is
    /// kept: a result its producer reached on its own, kept so that the
    /// owner can read it again with `task_output` (a foreground delegation
    /// whose answer was too long to show whole, paged through by offset).
    /// It is numbered, listed, kept and forgotten like any finished task,
    /// but no completion notice is queued: the owner already has the result.
    pub fn record(&self, spec: TaskSpec, recorded: Recorded) -> Result<TaskSnapshot, TaskError> {
        if spec.label.trim().is_empty() {
            return Err(TaskError::EmptyLabel);
        }
        let control = TaskControl {
            token: CancellationToken::new(),
            reason: Arc::default(),
        };
        let entry = self.inner.lock().insert(spec, control, &self.texts)?;
        let settled = match recorded {
            Recorded::Completed(output) => book::Settled::Completed(output.into_text(&entry.texts)),
            Recorded::Failed { detail, output } => book::Settled::Failed {
                detail,
                output: output.into_text(&entry.texts),
            },
        };
        self.inner.lock().settle(&entry, settled, book::Notice::None);
        entry.settled.send_replace(true);
        Ok(entry.snapshot())
    }

    fn entry(&self, id: &str, caller: &AgentId) -> Result<Arc<Entry>, TaskError> {
        let entry = self.inner.lock().find(id)?;
        if lock(&entry.snapshot).owner != *caller {
            return Err(TaskError::Foreign { id: id.to_owned() });
        }
        Ok(entry)
    }

    /// The task as it is now.
    pub fn get(&self, id: &str, caller: &AgentId) -> Result<TaskSnapshot, TaskError> {
        Ok(self.entry(id, caller)?.snapshot())
    }

    /// Waits until the task settles, or `timeout` passes (then returns it running).
    pub async fn wait(&self, id: &str, caller: &AgentId, timeout: Option<Duration>) -> Result<TaskSnapshot, TaskError> {
        let entry = self.entry(id, caller)?;
        let mut settled = entry.settled.subscribe();
        let wait = settled.wait_for(|settled| *settled);
        match timeout {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, wait).await;
            }
            None => {
                let _ = wait.await;
            }
        }
        Ok(entry.snapshot())
    }

    /// Kills a running task (the first reason given is kept for its producer);
    /// reports a task that had already settled.
    pub fn kill(&self, id: &str, caller: &AgentId, reason: Option<String>) -> Result<KillOutcome, TaskError> {
        let entry = self.entry(id, caller)?;
        Ok(Self::kill_entry(&entry, reason))
    }

    fn kill_entry(entry: &Entry, reason: Option<String>) -> KillOutcome {
        let snapshot = entry.snapshot();
        if snapshot.status.is_terminal() {
            return KillOutcome::AlreadyFinished(snapshot);
        }
        {
            let mut first = lock(&entry.control.reason);
            if first.is_none() && !entry.control.token.is_cancelled() {
                *first = reason;
            }
        }
        entry.control.token.cancel();
        KillOutcome::Requested
    }

    /// Every kept task of the caller, in dispatch order.
    pub fn list(&self, caller: &AgentId) -> Vec<TaskSnapshot> {
        let owned = self.inner.lock().owned(caller);
        owned.iter().map(|entry| entry.snapshot()).collect()
    }

    /// What `task_list` shows the caller: every running task and the
    /// `finished` most recently finished ones, in dispatch order, and how
    /// many older finished tasks are kept but left out.
    pub fn listing(&self, caller: &AgentId, finished: usize) -> TaskListing {
        self.inner.lock().listing(caller, finished)
    }

    /// Takes the completion notices queued for `owner`, oldest first. A
    /// notice whose task was forgotten before it was taken is gone with it.
    pub fn take_notices(&self, owner: &AgentId) -> Vec<String> {
        self.inner.lock().take_notices(owner)
    }

    /// Kills every running task of `owner` (with `reason`) and waits until
    /// all have settled. No new task starts for `owner` afterwards.
    pub async fn dispose_owner(&self, owner: &AgentId, reason: &str) {
        let entries = self.inner.lock().dispose(owner);
        for entry in &entries {
            if let KillOutcome::Requested = Self::kill_entry(entry, Some(reason.to_owned())) {
                tracing::debug!(task = %lock(&entry.snapshot).id, "{}", wording::KILLED_ON_OWNER_DISPOSAL);
            }
        }
        for entry in entries {
            let mut settled = entry.settled.subscribe();
            let _ = settled.wait_for(|settled| *settled).await;
        }
    }
}
