//! What became of a run's delegations: how many children the top-level
//! agent started, how many of them failed, and why. When every one failed,
//! `dsh run` says so on its last stderr line, whatever the parent's model
//! then wrote (a model may answer with its children's errors and exit 0).

use std::sync::{Mutex, PoisonError};

use dsh_subagent::{RunEndInfo, RunInfo};
use dsh_subagent_api::StopReason;

use crate::wording;

/// How many distinct reasons are kept for the line.
const REASONS: usize = 3;

/// The top-level agent's delegations so far.
#[derive(Debug, Default)]
pub(crate) struct Delegations(Mutex<Counts>);

#[derive(Debug, Default)]
struct Counts {
    started: usize,
    failed: usize,
    /// Why they failed, each with how many: the first few distinct reasons.
    reasons: Vec<(String, usize)>,
}

impl Delegations {
    /// A child started; only the top-level agent's own count.
    pub(crate) fn started(&self, run: &RunInfo) {
        if run.depth == 1 {
            self.lock().started += 1;
        }
    }

    /// A child ended; a top-level delegation that did not complete failed.
    pub(crate) fn ended(&self, end: &RunEndInfo) {
        if end.run.depth != 1 || end.stop_reason == StopReason::Completed {
            return;
        }
        let reason = wording::delegation_failure(&end.stop_reason, end.diagnostic.as_deref());
        let mut counts = self.lock();
        counts.failed += 1;
        let reasons = &mut counts.reasons;
        match reasons.iter().position(|(kept, _)| *kept == reason) {
            Some(found) => reasons[found].1 += 1,
            None if reasons.len() < REASONS => reasons.push((reason, 1)),
            None => {}
        }
    }

    /// The line that says every delegation failed, when every one did (and
    /// there was one).
    pub(crate) fn all_failed(&self) -> Option<String> {
        let counts = self.lock();
        (counts.started > 0 && counts.failed >= counts.started)
            .then(|| wording::delegations_failed(counts.failed, counts.started, &counts.reasons))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
