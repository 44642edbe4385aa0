#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod code;
pub mod wording;

pub use code::ErrorCode;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dsh_tools::{AgentId, CancellationToken, panic_message};
use futures::FutureExt;
use tokio::sync::watch;

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
        /// The task's output.
        output: String,
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
    /// Its output (empty until it completes).
    pub output: String,
    /// The failure detail, for a failed task.
    pub detail: Option<String>,
}

impl TaskSnapshot {
    /// `[status: <status>]` or `[status: <status>, <detail>]`.
    pub fn status_line(&self) -> String {
        wording::status_line(self.status, self.detail.as_deref())
    }
}

/// What to start: a kind (the id prefix), a label, an owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSpec {
    /// The kind, e.g. `subagent`.
    pub kind: String,
    /// The display label.
    pub label: String,
    /// The owning agent.
    pub owner: AgentId,
}

impl TaskSpec {
    /// A spec.
    pub fn new(kind: impl Into<String>, label: impl Into<String>, owner: AgentId) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            owner,
        }
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
        self.reason.lock().unwrap_or_else(PoisonError::into_inner).clone()
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
    /// No task has this id (`UNKNOWN_TASK`).
    #[error("{}", wording::unknown_task(id))]
    Unknown {
        /// The id.
        id: String,
    },
    /// The task belongs to another agent (`FOREIGN_TASK`).
    #[error("{}", wording::foreign_task(id))]
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
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => ErrorCode::UnknownTask.as_str(),
            Self::Foreign { .. } => ErrorCode::ForeignTask.as_str(),
            Self::EmptyLabel => ErrorCode::InvalidLabel.as_str(),
            Self::OwnerDisposed { .. } => ErrorCode::OwnerDisposed.as_str(),
        }
    }
}

/// A refused registry operation, as the model reads it: its text and code.
impl From<TaskError> for dsh_tools::ToolError {
    fn from(error: TaskError) -> Self {
        Self::new(error.to_string()).with_code(error.code())
    }
}

struct Entry {
    snapshot: Mutex<TaskSnapshot>,
    control: TaskControl,
    settled: watch::Sender<bool>,
}

impl Entry {
    fn snapshot(&self) -> TaskSnapshot {
        self.snapshot.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[derive(Default)]
struct State {
    tasks: HashMap<String, Arc<Entry>>,
    order: Vec<String>,
    counters: HashMap<String, u64>,
    notices: HashMap<AgentId, Vec<String>>,
    disposed: HashSet<AgentId>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn settle(&self, entry: &Entry, outcome: TaskOutcome) {
        let snapshot = {
            let mut snapshot = entry.snapshot.lock().unwrap_or_else(PoisonError::into_inner);
            match outcome {
                TaskOutcome::Completed { output } => {
                    snapshot.status = TaskStatus::Completed;
                    snapshot.output = output;
                }
                TaskOutcome::Failed { detail } => {
                    snapshot.status = TaskStatus::Failed;
                    snapshot.detail = Some(detail);
                }
                TaskOutcome::Killed => snapshot.status = TaskStatus::Killed,
            }
            snapshot.clone()
        };
        self.lock()
            .notices
            .entry(snapshot.owner.clone())
            .or_default()
            .push(wording::completion_notice(&snapshot));
        entry.settled.send_replace(true);
    }
}

/// Background tasks of every agent in one process. Cheap to clone.
#[derive(Clone, Default)]
pub struct TaskRegistry {
    inner: Arc<Inner>,
}

impl fmt::Debug for TaskRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskRegistry")
            .field("tasks", &self.inner.lock().order.len())
            .finish()
    }
}

impl TaskRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
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
        let (entry, id) = {
            let mut state = self.inner.lock();
            if state.disposed.contains(&spec.owner) {
                return Err(TaskError::OwnerDisposed { owner: spec.owner });
            }
            let counter = state.counters.entry(spec.kind.clone()).or_default();
            *counter += 1;
            let id = format!("{}-{counter}", spec.kind);
            let entry = Arc::new(Entry {
                snapshot: Mutex::new(TaskSnapshot {
                    id: id.clone(),
                    kind: spec.kind,
                    label: spec.label,
                    owner: spec.owner,
                    status: TaskStatus::Running,
                    output: String::new(),
                    detail: None,
                }),
                control: control.clone(),
                settled: watch::Sender::new(false),
            });
            state.tasks.insert(id.clone(), entry.clone());
            state.order.push(id.clone());
            (entry, id)
        };
        let work = producer(control);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let outcome = AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| TaskOutcome::Failed {
                    detail: wording::producer_panicked(&panic_message(&*panic)),
                });
            inner.settle(&entry, outcome);
        });
        Ok(id)
    }

    fn entry(&self, id: &str, caller: &AgentId) -> Result<Arc<Entry>, TaskError> {
        let entry = self
            .inner
            .lock()
            .tasks
            .get(id)
            .cloned()
            .ok_or_else(|| TaskError::Unknown { id: id.to_owned() })?;
        if entry.snapshot.lock().unwrap_or_else(PoisonError::into_inner).owner != *caller {
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
        let snapshot = entry.snapshot();
        if snapshot.status.is_terminal() {
            return Ok(KillOutcome::AlreadyFinished(snapshot));
        }
        {
            let mut first = entry.control.reason.lock().unwrap_or_else(PoisonError::into_inner);
            if first.is_none() && !entry.control.token.is_cancelled() {
                *first = reason;
            }
        }
        entry.control.token.cancel();
        Ok(KillOutcome::Requested)
    }

    /// The caller's tasks, in dispatch order.
    pub fn list(&self, caller: &AgentId) -> Vec<TaskSnapshot> {
        let state = self.inner.lock();
        state
            .order
            .iter()
            .filter_map(|id| state.tasks.get(id))
            .map(|entry| entry.snapshot())
            .filter(|task| task.owner == *caller)
            .collect()
    }

    /// Takes the completion notices queued for `owner`, oldest first.
    pub fn take_notices(&self, owner: &AgentId) -> Vec<String> {
        self.inner.lock().notices.remove(owner).unwrap_or_default()
    }

    /// Kills every running task of `owner` (with `reason`) and waits until
    /// all have settled. No new task starts for `owner` afterwards.
    pub async fn dispose_owner(&self, owner: &AgentId, reason: &str) {
        let entries: Vec<Arc<Entry>> = {
            let mut state = self.inner.lock();
            state.disposed.insert(owner.clone());
            state
                .tasks
                .values()
                .filter(|entry| entry.snapshot.lock().unwrap_or_else(PoisonError::into_inner).owner == *owner)
                .cloned()
                .collect()
        };
        for entry in &entries {
            if let Ok(KillOutcome::Requested) = self.kill(&entry.snapshot().id, owner, Some(reason.to_owned())) {
                tracing::debug!(task = %entry.snapshot().id, "{}", wording::KILLED_ON_OWNER_DISPOSAL);
            }
        }
        for entry in entries {
            let mut settled = entry.settled.subscribe();
            let _ = settled.wait_for(|settled| *settled).await;
        }
    }
}
