//! The registry of every agent's background tasks.

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dsh_tools::{AgentId, panic_message};
use futures::FutureExt;

use tokio::sync::watch;

use crate::book::{self, Book, Entry, Work};
use crate::task::Told;
use crate::{
    KillOutcome, Recorded, Reservation, TaskControl, TaskError, TaskId, TaskListing, TaskOutcome, TaskSnapshot,
    TaskSpec, TextStore, lock, wording,
};

#[derive(Default)]
struct Inner {
    book: Mutex<Book>,
    /// Bumped whenever a task settles, for owners that wait on their work.
    settled: watch::Sender<u64>,
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
        self.settled.send_modify(|count| *count = count.wrapping_add(1));
    }
}

/// Background tasks of every agent in one process. Cheap to clone.
///
/// Bounded: every running task is kept, and of each owner's finished tasks
/// only the most recently finished are kept ([`DEFAULT_KEEP_FINISHED`](crate::DEFAULT_KEEP_FINISHED), or
/// [`keep_finished`](Self::keep_finished)). When one more finishes, the one
/// that finished longest ago is forgotten, with its completion notice if
/// that was never taken; reading it then fails with
/// [`TaskError::Forgotten`]. Nothing is kept per forgotten task.
///
/// Outputs are bounded in bytes too: each task's output text is kept in a
/// [`TextStore`] (the spec's, or else the process's,
/// [`DEFAULT_KEPT_BYTES`](crate::DEFAULT_KEPT_BYTES)), which evicts the oldest text first; a kept
/// task whose text was evicted (or was larger than the whole bound) still
/// reads its status and its size.
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
    /// An empty registry that keeps [`DEFAULT_KEEP_FINISHED`](crate::DEFAULT_KEEP_FINISHED) finished tasks per owner.
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
    /// instead of the process's store ([`TextStore::process`]). Applies to
    /// this handle and the clones made from it afterwards.
    #[must_use]
    pub fn kept_in(mut self, texts: TextStore) -> Self {
        self.texts = texts;
        self
    }

    /// The store of outputs whose task's spec names none.
    pub fn texts(&self) -> &TextStore {
        &self.texts
    }

    /// Takes `owner`'s next id of `kind` now, for a task that may start
    /// later ([`TaskSpec::reserved`]). A tool call reserves its id before
    /// anything it does waits, so calls made together are numbered in the
    /// order they were made, whatever order they finish in. Refused for a
    /// disposed owner ([`TaskError::OwnerDisposed`]).
    pub fn reserve(&self, owner: &AgentId, kind: &str) -> Result<Reservation, TaskError> {
        self.inner.lock().reserve(owner, kind)
    }

    /// Starts a task: checks the spec, gives it its id (the owner's next
    /// `<kind>-<n>`, or the one its spec reserved or was given), and runs
    /// `producer` on its own tokio task. Nothing runs when the checks fail.
    /// A producer that panics settles its task `failed`.
    pub fn spawn<F, Fut>(&self, spec: TaskSpec, producer: F) -> Result<String, TaskError>
    where
        F: FnOnce(TaskControl) -> Fut,
        Fut: Future<Output = TaskOutcome> + Send + 'static,
    {
        if spec.label.trim().is_empty() {
            return Err(TaskError::EmptyLabel);
        }
        let control = TaskControl::new();
        let notice = match spec.told {
            Told::WhenItFinishes => book::Notice::Queue,
            Told::Already => book::Notice::None,
        };
        let entry = self.inner.lock().insert(spec, control.clone(), &self.texts)?;
        let id = lock(&entry.snapshot).id.clone();
        control.name(&id);
        let work = producer(control);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let outcome = AssertUnwindSafe(work)
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| TaskOutcome::Failed {
                    detail: wording::producer_panicked(&panic_message(&*panic)),
                });
            inner.settle(&entry, outcome, notice);
        });
        Ok(id)
    }

    /// Counts `id` as issued to `owner`: no later id of its kind repeats
    /// it. For an id its owner's model read before a crash that no restored
    /// task holds (a foreground result's reservation, say).
    pub fn mark_issued(&self, owner: &AgentId, id: &TaskId) -> Result<(), TaskError> {
        self.inner.lock().mark_issued(owner, id)
    }

    /// Records a task that has already finished, and returns it as it is
    /// kept: a result its producer reached on its own, kept so that the
    /// owner can read it again with `task_output` (a foreground delegation
    /// whose answer was too long to show whole, paged through by offset).
    /// It is numbered, listed, kept and forgotten like any finished task,
    /// but no completion notice is queued: the owner already has the result.
    pub fn record(&self, spec: TaskSpec, recorded: Recorded) -> Result<TaskSnapshot, TaskError> {
        self.settle_recorded(spec, recorded, book::Notice::None)
    }

    /// Records a task that has already finished and queues its completion
    /// notice, as if it had just finished in the background: a task
    /// restored after a crash (under the id its owner read,
    /// [`TaskSpec::with_id`]) whose notice no model call had taken.
    pub fn record_with_notice(&self, spec: TaskSpec, recorded: Recorded) -> Result<TaskSnapshot, TaskError> {
        self.settle_recorded(spec, recorded, book::Notice::Queue)
    }

    fn settle_recorded(
        &self,
        spec: TaskSpec,
        recorded: Recorded,
        notice: book::Notice,
    ) -> Result<TaskSnapshot, TaskError> {
        if spec.label.trim().is_empty() {
            return Err(TaskError::EmptyLabel);
        }
        let control = TaskControl::new();
        let entry = self.inner.lock().insert(spec, control.clone(), &self.texts)?;
        control.name(&lock(&entry.snapshot).id);
        let settled = match recorded {
            Recorded::Completed(output) => book::Settled::Completed(output.into_text(&entry.texts)),
            Recorded::Failed { detail, output } => book::Settled::Failed {
                detail,
                output: output.into_text(&entry.texts),
            },
        };
        self.inner.lock().settle(&entry, settled, notice);
        entry.settled.send_replace(true);
        Ok(entry.snapshot())
    }

    /// The caller's task `id`: ids are the caller's own, so another
    /// agent's task is never found by one.
    fn entry(&self, id: &str, caller: &AgentId) -> Result<Arc<Entry>, TaskError> {
        self.inner.lock().find(caller, id)
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
        entry.control.kill(reason);
        KillOutcome::Requested
    }

    /// Every kept task of the caller, in the order their ids were
    /// reserved (a task not reserved ahead, when it started).
    pub fn list(&self, caller: &AgentId) -> Vec<TaskSnapshot> {
        let owned = self.inner.lock().owned(caller);
        owned.iter().map(|entry| entry.snapshot()).collect()
    }

    /// What `task_list` shows the caller: every running task and the
    /// `finished` most recently finished ones, in the order of
    /// [`list`](Self::list), and how
    /// many older finished tasks are kept but left out.
    pub fn listing(&self, caller: &AgentId, finished: usize) -> TaskListing {
        self.inner.lock().listing(caller, finished)
    }

    /// Takes the completion notices queued for `owner`, oldest first. A
    /// notice whose task was forgotten before it was taken is gone with it.
    pub fn take_notices(&self, owner: &AgentId) -> Vec<String> {
        self.inner.lock().take_notices(owner)
    }

    /// Takes the completion notices queued for `owner`, oldest first, each
    /// with the id of the task it reports (so that whoever delivers it can
    /// record which tasks its owner was told of).
    pub fn take_task_notices(&self, owner: &AgentId) -> Vec<(String, String)> {
        self.inner.lock().take_task_notices(owner)
    }

    /// Waits until a completion notice is queued for `owner` (`true`), or
    /// answers `false` as soon as none is and none of its tasks still runs:
    /// what an owner that waits for its background work before it ends its
    /// turn waits on.
    pub async fn wait_for_work(&self, owner: &AgentId) -> bool {
        let mut settled = self.inner.settled.subscribe();
        loop {
            match self.inner.lock().work_of(owner) {
                Work::Notice => return true,
                Work::None => return false,
                Work::Running => {}
            }
            if settled.changed().await.is_err() {
                return false;
            }
        }
    }

    /// Kills every running task of every owner (with `reason`) and waits
    /// until all have settled: what a process that stops resumably does,
    /// so that no task outlives it.
    pub async fn kill_all(&self, reason: &str) {
        let owners = self.inner.lock().owners();
        let entries: Vec<Arc<Entry>> = owners.iter().flat_map(|owner| self.inner.lock().owned(owner)).collect();
        for entry in &entries {
            let _ = Self::kill_entry(entry, Some(reason.to_owned()));
        }
        for entry in entries {
            let mut settled = entry.settled.subscribe();
            let _ = settled.wait_for(|settled| *settled).await;
        }
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
