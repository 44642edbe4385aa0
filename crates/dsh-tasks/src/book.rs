//! The registry's bookkeeping, per owner: which tasks are kept, in what
//! order, which ids were ever issued, and the notices not yet taken.
//!
//! Every running task is kept. Of an owner's finished tasks only the
//! `keep` most recently finished are kept; finishing one more forgets the
//! one that finished longest ago, together with its notice if that was
//! never taken. Nothing stays behind for a forgotten task: that its id was
//! issued is read from the owner's per-kind counter that numbers its ids.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::num::{NonZeroU64, NonZeroUsize};
use std::sync::{Arc, Mutex};

use dsh_tools::AgentId;
use tokio::sync::watch;

use crate::task::Numbered;
use crate::{
    Reservation, TaskControl, TaskError, TaskId, TaskListing, TaskOutcome, TaskSnapshot, TaskSpec, TaskStatus,
    TaskText, TextStore, lock, wording,
};

/// One kept task.
pub(crate) struct Entry {
    /// Its place in the order of reservations, across kinds and owners.
    pub(crate) seq: u64,
    pub(crate) snapshot: Mutex<TaskSnapshot>,
    pub(crate) control: TaskControl,
    pub(crate) settled: watch::Sender<bool>,
    /// Where its output text is kept.
    pub(crate) texts: TextStore,
}

/// Whether settling a task queues a completion notice for its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A background task: its owner hears that it finished.
    Queue,
    /// A recorded result: its owner has it already.
    None,
}

/// What an owner's background work looks like now ([`Book::work_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// A completion notice waits to be taken.
    Notice,
    /// No notice waits, and a task still runs.
    Running,
    /// Nothing waits and nothing runs.
    None,
}

/// An outcome whose output is already in its store.
pub(crate) enum Settled {
    Completed(TaskText),
    Failed { detail: String, output: TaskText },
    Killed,
}

impl Settled {
    pub(crate) fn from_outcome(outcome: TaskOutcome, texts: &TextStore) -> Self {
        match outcome {
            TaskOutcome::Completed { output } => Self::Completed(output.into_text(texts)),
            TaskOutcome::Failed { detail } => Self::Failed {
                detail,
                output: TaskText::default(),
            },
            TaskOutcome::Killed => Self::Killed,
        }
    }
}

impl Entry {
    pub(crate) fn snapshot(&self) -> TaskSnapshot {
        lock(&self.snapshot).clone()
    }

    fn status(&self) -> TaskStatus {
        lock(&self.snapshot).status
    }
}

/// One owner's kept tasks, pending notices and id counters.
#[derive(Default)]
struct Owned {
    /// Every kept task, running or finished, by its place in the order of
    /// reservations (a task not reserved ahead takes its place when it
    /// starts).
    kept: BTreeMap<u64, Arc<Entry>>,
    /// The kept tasks' places, by id.
    ids: HashMap<String, u64>,
    /// Per kind, the highest number issued: reserved, or given.
    issued: HashMap<String, u64>,
    /// The kept finished tasks, the one that finished first at the front.
    finished: VecDeque<u64>,
    /// Completion notices not taken yet, oldest first. Each is for a kept
    /// finished task, so this is never longer than `finished`.
    notices: VecDeque<(u64, String)>,
}

impl Owned {
    /// Forgets finished tasks, oldest first, until at most `keep` remain.
    fn trim(&mut self, keep: NonZeroUsize) {
        while self.finished.len() > keep.get() {
            let Some(seq) = self.finished.pop_front() else { break };
            // Notices and finished tasks are both in settle order, so a
            // notice still pending for this task is the oldest one.
            if self.notices.front().is_some_and(|(notice, _)| *notice == seq) {
                self.notices.pop_front();
            }
            if let Some(entry) = self.kept.remove(&seq) {
                self.ids.remove(&lock(&entry.snapshot).id);
            }
        }
    }

    /// The next number of `kind`, now issued.
    fn next(&mut self, kind: &str) -> NonZeroU64 {
        let last = self.issued.entry(kind.to_owned()).or_default();
        *last = last.saturating_add(1);
        NonZeroU64::new(*last).unwrap_or(NonZeroU64::MAX)
    }

    /// Counts `number` of `kind` as issued: no later id repeats it.
    fn issue(&mut self, kind: &str, number: NonZeroU64) {
        let last = self.issued.entry(kind.to_owned()).or_default();
        *last = (*last).max(number.get());
    }

    /// Whether `id` reads `<kind>-<n>` exactly as issued with `n` no higher
    /// than the kind's counter.
    fn was_issued(&self, id: &str) -> bool {
        TaskId::read(id).is_some_and(|id| {
            self.issued
                .get(id.kind())
                .is_some_and(|last| id.number().get() <= *last)
        })
    }

    fn get(&self, id: &str) -> Option<&Arc<Entry>> {
        self.ids.get(id).and_then(|seq| self.kept.get(seq))
    }
}

/// Everything the registry knows, under its one lock.
pub(crate) struct Book {
    /// Every owner's tasks and counters.
    owners: HashMap<AgentId, Owned>,
    /// The last place issued in the order of reservations.
    seq: u64,
    disposed: HashSet<AgentId>,
    keep: NonZeroUsize,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            owners: HashMap::new(),
            seq: 0,
            disposed: HashSet::new(),
            keep: crate::DEFAULT_KEEP_FINISHED,
        }
    }
}

impl Book {
    pub(crate) fn keep(&self) -> NonZeroUsize {
        self.keep
    }

    /// Sets the bound and forgets at once what it no longer allows.
    pub(crate) fn set_keep(&mut self, keep: NonZeroUsize) {
        self.keep = keep;
        for owned in self.owners.values_mut() {
            owned.trim(keep);
        }
    }

    /// The owner's books, unless it was disposed.
    fn open(&mut self, owner: &AgentId) -> Result<&mut Owned, TaskError> {
        if self.disposed.contains(owner) {
            return Err(TaskError::OwnerDisposed { owner: owner.clone() });
        }
        Ok(self.owners.entry(owner.clone()).or_default())
    }

    /// Counts `id` as issued to `owner`.
    pub(crate) fn mark_issued(&mut self, owner: &AgentId, id: &TaskId) -> Result<(), TaskError> {
        self.open(owner)?.issue(id.kind(), id.number());
        Ok(())
    }

    /// Takes the owner's next id of `kind`, and its place in the order.
    pub(crate) fn reserve(&mut self, owner: &AgentId, kind: &str) -> Result<Reservation, TaskError> {
        let number = self.open(owner)?.next(kind);
        self.seq += 1;
        Ok(Reservation {
            id: TaskId::new(kind, number),
            owner: owner.clone(),
            order: self.seq,
        })
    }

    /// Registers a running task under the id its spec says (the owner's
    /// next, one reserved, or one given); its output will be kept in the
    /// spec's store, or else in `texts`.
    pub(crate) fn insert(
        &mut self,
        spec: TaskSpec,
        control: TaskControl,
        texts: &TextStore,
    ) -> Result<Arc<Entry>, TaskError> {
        let owned = self.open(&spec.owner)?;
        let (number, order) = match spec.number {
            Numbered::Next => (owned.next(&spec.kind), None),
            Numbered::Reserved { number, order } => (number, Some(order)),
            Numbered::Given(number) => (number, None),
        };
        let id = TaskId::new(spec.kind.clone(), number).to_string();
        if owned.ids.contains_key(&id) {
            return Err(TaskError::IdTaken { id });
        }
        owned.issue(&spec.kind, number);
        let seq = order.unwrap_or_else(|| {
            self.seq += 1;
            self.seq
        });
        let entry = Arc::new(Entry {
            seq,
            snapshot: Mutex::new(TaskSnapshot {
                id: id.clone(),
                kind: spec.kind,
                label: spec.label,
                owner: spec.owner.clone(),
                status: TaskStatus::Running,
                output: TaskText::default(),
                detail: None,
            }),
            control,
            settled: watch::Sender::new(false),
            texts: spec.texts.unwrap_or_else(|| texts.clone()),
        });
        let owned = self.owners.entry(spec.owner).or_default();
        owned.ids.insert(id, seq);
        owned.kept.insert(seq, entry.clone());
        Ok(entry)
    }

    /// Records the outcome, queues the owner's notice (when asked), and
    /// forgets the owner's oldest finished tasks beyond the bound.
    pub(crate) fn settle(&mut self, entry: &Entry, outcome: Settled, notice: Notice) {
        let snapshot = {
            let mut snapshot = lock(&entry.snapshot);
            match outcome {
                Settled::Completed(output) => {
                    snapshot.status = TaskStatus::Completed;
                    snapshot.output = output;
                }
                Settled::Failed { detail, output } => {
                    snapshot.status = TaskStatus::Failed;
                    snapshot.detail = Some(detail);
                    snapshot.output = output;
                }
                Settled::Killed => snapshot.status = TaskStatus::Killed,
            }
            snapshot.clone()
        };
        let keep = self.keep;
        let Some(owned) = self.owners.get_mut(&snapshot.owner) else {
            return;
        };
        owned.finished.push_back(entry.seq);
        if notice == Notice::Queue {
            owned
                .notices
                .push_back((entry.seq, wording::completion_notice(&snapshot)));
        }
        owned.trim(keep);
    }

    /// The owner's kept task `id`, or why there is none: an id the owner
    /// was issued is [`TaskError::Forgotten`] (only finished tasks are
    /// forgotten); one that only another owner's kept task has,
    /// [`TaskError::Foreign`]; any other [`TaskError::Unknown`].
    pub(crate) fn find(&self, owner: &AgentId, id: &str) -> Result<Arc<Entry>, TaskError> {
        let owned = self.owners.get(owner);
        if let Some(entry) = owned.and_then(|owned| owned.get(id)) {
            return Ok(entry.clone());
        }
        let id = id.to_owned();
        if owned.is_some_and(|owned| owned.was_issued(&id)) {
            return Err(TaskError::Forgotten {
                id,
                kept: self.keep.get(),
            });
        }
        if self.owners.values().any(|other| other.ids.contains_key(&id)) {
            return Err(TaskError::Foreign { id });
        }
        Err(TaskError::Unknown { id })
    }

    /// The owner's kept tasks, in dispatch order.
    pub(crate) fn owned(&self, owner: &AgentId) -> Vec<Arc<Entry>> {
        self.owners
            .get(owner)
            .map(|owned| owned.kept.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The owner's running tasks and its `finished` most recently finished
    /// ones, in dispatch order, and how many kept finished tasks are left out.
    pub(crate) fn listing(&self, owner: &AgentId, finished: usize) -> TaskListing {
        let Some(owned) = self.owners.get(owner) else {
            return TaskListing::default();
        };
        let shown = owned.finished.len().min(finished);
        let recent: HashSet<u64> = owned.finished.iter().rev().take(shown).copied().collect();
        let tasks = owned
            .kept
            .values()
            .filter(|entry| recent.contains(&entry.seq) || entry.status() == TaskStatus::Running)
            .map(|entry| entry.snapshot())
            .collect();
        TaskListing {
            tasks,
            older_finished: owned.finished.len() - shown,
        }
    }

    /// Takes the owner's pending notices, oldest first, each with the id of
    /// the task it reports.
    pub(crate) fn take_task_notices(&mut self, owner: &AgentId) -> Vec<(String, String)> {
        let Some(owned) = self.owners.get_mut(owner) else {
            return Vec::new();
        };
        let notices: Vec<(u64, String)> = owned.notices.drain(..).collect();
        notices
            .into_iter()
            .map(|(seq, notice)| {
                let id = owned
                    .kept
                    .get(&seq)
                    .map(|entry| lock(&entry.snapshot).id.clone())
                    .unwrap_or_default();
                (id, notice)
            })
            .collect()
    }

    /// Whether `owner` has a notice pending, or else a task still running:
    /// what an owner that waits for its background work waits on.
    pub(crate) fn work_of(&self, owner: &AgentId) -> Work {
        let Some(owned) = self.owners.get(owner) else {
            return Work::None;
        };
        if !owned.notices.is_empty() {
            Work::Notice
        } else if owned.kept.values().any(|entry| entry.status() == TaskStatus::Running) {
            Work::Running
        } else {
            Work::None
        }
    }

    /// Every owner that has kept tasks.
    pub(crate) fn owners(&self) -> Vec<AgentId> {
        self.owners.keys().cloned().collect()
    }

    /// Takes the owner's pending notices, oldest first.
    pub(crate) fn take_notices(&mut self, owner: &AgentId) -> Vec<String> {
        self.owners
            .get_mut(owner)
            .map(|owned| owned.notices.drain(..).map(|(_, notice)| notice).collect())
            .unwrap_or_default()
    }

    /// Refuses new tasks and reservations for `owner` from now on;
    /// returns its kept tasks. An owner that keeps none is forgotten whole,
    /// its counters with it: nothing of it is read again.
    pub(crate) fn dispose(&mut self, owner: &AgentId) -> Vec<Arc<Entry>> {
        self.disposed.insert(owner.clone());
        if self.owners.get(owner).is_some_and(|owned| owned.kept.is_empty()) {
            self.owners.remove(owner);
        }
        self.owned(owner)
    }

    /// How many tasks are kept, of every owner.
    pub(crate) fn len(&self) -> usize {
        self.owners.values().map(|owned| owned.kept.len()).sum()
    }
}
