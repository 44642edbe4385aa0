//! The registry's bookkeeping: which tasks are kept, in what order, which
//! ids were ever issued, and the notices not yet taken.
//!
//! Every running task is kept. Of an owner's finished tasks only the
//! `keep` most recently finished are kept; finishing one more forgets the
//! one that finished longest ago, together with its notice if that was
//! never taken. Nothing stays behind for a forgotten task: that its id was
//! issued is read from the per-kind counter that numbers the ids.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use dsh_tools::AgentId;
use tokio::sync::watch;

use crate::{
    TaskControl, TaskError, TaskListing, TaskOutcome, TaskSnapshot, TaskSpec, TaskStatus, TaskText, TextStore, lock,
    wording,
};

/// One kept task.
pub(crate) struct Entry {
    /// Its place in dispatch order, across kinds and owners.
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

/// One owner's kept tasks and pending notices.
#[derive(Default)]
struct Owned {
    /// Every kept task, running or finished, by dispatch order.
    kept: BTreeMap<u64, Arc<Entry>>,
    /// The kept finished tasks, the one that finished first at the front.
    finished: VecDeque<u64>,
    /// Completion notices not taken yet, oldest first. Each is for a kept
    /// finished task, so this is never longer than `finished`.
    notices: VecDeque<(u64, String)>,
}

impl Owned {
    /// Forgets finished tasks, oldest first, until at most `keep` remain;
    /// returns the ids forgotten.
    fn trim(&mut self, keep: NonZeroUsize) -> Vec<String> {
        let mut forgotten = Vec::new();
        while self.finished.len() > keep.get() {
            let Some(seq) = self.finished.pop_front() else { break };
            // Notices and finished tasks are both in settle order, so a
            // notice still pending for this task is the oldest one.
            if self.notices.front().is_some_and(|(notice, _)| *notice == seq) {
                self.notices.pop_front();
            }
            if let Some(entry) = self.kept.remove(&seq) {
                forgotten.push(lock(&entry.snapshot).id.clone());
            }
        }
        forgotten
    }
}

/// Everything the registry knows, under its one lock.
pub(crate) struct Book {
    /// Every kept task, by id.
    tasks: HashMap<String, Arc<Entry>>,
    owners: HashMap<AgentId, Owned>,
    /// Per kind, the last number issued: ids count per kind.
    issued: HashMap<String, u64>,
    /// The last dispatch ordinal issued.
    seq: u64,
    disposed: HashSet<AgentId>,
    keep: NonZeroUsize,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            tasks: HashMap::new(),
            owners: HashMap::new(),
            issued: HashMap::new(),
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
        let forgotten: Vec<String> = self.owners.values_mut().flat_map(|owned| owned.trim(keep)).collect();
        for id in forgotten {
            self.tasks.remove(&id);
        }
    }

    /// Registers a running task with the next `<kind>-<n>` id; its output
    /// will be kept in the spec's store, or else in `texts`.
    pub(crate) fn insert(
        &mut self,
        spec: TaskSpec,
        control: TaskControl,
        texts: &TextStore,
    ) -> Result<Arc<Entry>, TaskError> {
        if self.disposed.contains(&spec.owner) {
            return Err(TaskError::OwnerDisposed { owner: spec.owner });
        }
        let counter = self.issued.entry(spec.kind.clone()).or_default();
        *counter += 1;
        let id = format!("{}-{counter}", spec.kind);
        self.seq += 1;
        let entry = Arc::new(Entry {
            seq: self.seq,
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
        self.tasks.insert(id, entry.clone());
        self.owners
            .entry(spec.owner)
            .or_default()
            .kept
            .insert(self.seq, entry.clone());
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
        for id in owned.trim(keep) {
            self.tasks.remove(&id);
        }
    }

    /// The kept task `id`, or why there is none: an id that was issued is
    /// [`TaskError::Forgotten`] (only finished tasks are forgotten), any
    /// other [`TaskError::Unknown`].
    pub(crate) fn find(&self, id: &str) -> Result<Arc<Entry>, TaskError> {
        if let Some(entry) = self.tasks.get(id) {
            return Ok(entry.clone());
        }
        let id = id.to_owned();
        if self.was_issued(&id) {
            Err(TaskError::Forgotten {
                id,
                kept: self.keep.get(),
            })
        } else {
            Err(TaskError::Unknown { id })
        }
    }

    /// Whether `id` reads `<kind>-<n>` exactly as issued (no sign, no
    /// leading zero) with `n` no higher than the kind's counter.
    fn was_issued(&self, id: &str) -> bool {
        let Some((kind, digits)) = id.rsplit_once('-') else {
            return false;
        };
        let Ok(number) = digits.parse::<u64>() else {
            return false;
        };
        number >= 1 && number.to_string() == digits && self.issued.get(kind).is_some_and(|last| number <= *last)
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

    /// Refuses new tasks for `owner` from now on; returns its kept tasks.
    pub(crate) fn dispose(&mut self, owner: &AgentId) -> Vec<Arc<Entry>> {
        self.disposed.insert(owner.clone());
        self.owned(owner)
    }

    /// How many tasks are kept, of every owner.
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }
}
