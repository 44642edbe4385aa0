//! Activations: the tasks that run one turn of a continuable child each,
//! recorded as its one activation from before the task exists until its
//! run is released
//! (docs/design.md, "Races are linearized"). Each is spawned, and runs its
//! child, through the one home of child runs as tasks (`crate::task`).

use std::sync::Arc;

use dsh_subagent_api::{
    AgentId, AgentRef, CancellationToken, ChildStore, ContentBlock, ResumeRequest, RunMode, SpanOrigin, SubagentError,
    SubagentRun,
};
use dsh_tasks::{TaskControl, TaskError, TaskOutcome, TaskSpec};
use tracing::Span;

use super::children::State;
use super::{ControlError, Inner};
use crate::admission::{Admitted, Caller, Reservation};
use crate::events::RunStart;
use crate::{task, wording};

/// Records the child's activation and registers its task, all under the
/// lock whose `state` the caller holds. The producer gets its [`Activated`]
/// handle and runs inside `span` (its [`trace::task_span`](crate::trace::task_span));
/// the activation is cleared when the producer's future ends or is dropped.
pub(super) fn activate<F, Fut>(
    inner: &Arc<Inner>,
    state: &mut State,
    child: &str,
    owner: AgentId,
    spec: TaskSpec,
    span: Span,
    producer: F,
) -> Result<String, TaskError>
where
    F: FnOnce(Activated, TaskControl) -> Fut,
    Fut: Future<Output = TaskOutcome> + Send + 'static,
{
    let serial = state.begin(child, owner);
    let held = inner.clone();
    let child_id = child.to_owned();
    let spawned = task::spawn(&inner.tasks, spec, span, move |control| {
        // Made inside the producer, so a task that never starts never holds
        // the activation (a refused one is cleared below, under the lock).
        let guard = ActivationGuard {
            inner: held.clone(),
            child: child_id.clone(),
            serial,
        };
        let activated = Activated {
            inner: held,
            child: child_id,
            serial,
        };
        let work = producer(activated, control);
        async move {
            let outcome = work.await;
            // Released (by `settle`) before the activation is cleared,
            // and cleared before the task settles.
            drop(guard);
            outcome
        }
    });
    match spawned {
        Ok(task_id) => {
            state.registered(child, serial, &task_id);
            Ok(task_id)
        }
        Err(error) => {
            state.refused(child);
            Err(error)
        }
    }
}

/// Clears an activation when its producer ends, however it ends
/// (including a panic).
struct ActivationGuard {
    inner: Arc<Inner>,
    child: String,
    serial: u64,
}

impl Drop for ActivationGuard {
    fn drop(&mut self) {
        self.inner.children.release(&self.child, self.serial);
    }
}

/// What an activation's producer knows of itself: its child, and how to
/// make its published run steerable.
pub(super) struct Activated {
    inner: Arc<Inner>,
    pub(super) child: String,
    serial: u64,
}

impl Activated {
    /// The run is published: announce it like any other run (run events),
    /// then make it steerable.
    /// The run is bound to its admission (its tree's slot and its time
    /// limit) and announced under the id its wait was announced with, if
    /// it waited.
    pub(super) fn announce(
        &self,
        provider: &str,
        depth: u64,
        label: Option<String>,
        run: SubagentRun,
        admitted: Admitted,
        kill: &CancellationToken,
    ) -> SubagentRun {
        let queued_as = admitted.run_id;
        let run = admitted.bind(run);
        let (run, run_id) = match self.inner.children.parent(&self.child) {
            // A continuable child's activation: a background run, whose
            // task is its message (not kept here); its task's kill token
            // cancels it, also for a client that cancels it by its id.
            Some(parent) => {
                let start = RunStart {
                    parent,
                    depth,
                    label,
                    task: None,
                    mode: RunMode::Background,
                    cancel: Some(kill.clone()),
                };
                self.inner.service.events().announce(provider, start, run, queued_as)
            }
            None => (run, None),
        };
        self.inner.children.publish(&self.child, self.serial, &run, run_id);
        run
    }
}

/// What a `send_message` gives the activation it starts.
pub(super) struct FollowUp {
    /// Where the child is looked up.
    pub(super) store: Arc<dyn ChildStore>,
    /// The agent that sent the message (the child's parent, if it is).
    pub(super) parent: AgentRef,
    /// The message.
    pub(super) prompt: Vec<ContentBlock>,
    /// Where the child's span goes (under the activation's task span).
    pub(super) origin: SpanOrigin,
    /// The activation's place in its tree's gate, reserved by the send.
    pub(super) reservation: Reservation,
}

/// A follow-up activation: look the child up, then resume it.
pub(super) async fn resume(
    inner: &Inner,
    follow_up: FollowUp,
    activation: Activated,
    control: TaskControl,
) -> TaskOutcome {
    let FollowUp {
        store,
        parent,
        prompt,
        origin,
        reservation,
    } = follow_up;
    let child = activation.child.clone();
    let failed = |error: ControlError| TaskOutcome::Failed {
        detail: error.to_string(),
    };
    let record = match store.lookup(&child) {
        Ok(Some(record)) => record,
        Ok(None) => return failed(ControlError::Unavailable { child }),
        Err(error) => {
            tracing::warn!(child = %child, "{}", wording::lookup_failed(&error));
            return failed(ControlError::Unavailable { child });
        }
    };
    if control.token().is_cancelled() {
        return TaskOutcome::Killed;
    }
    if record.parent.as_ref() != Some(parent.id()) {
        return failed(ControlError::Foreign { child });
    }
    inner.children.learn_parent(&child, parent.id());
    if let Some(diagnostic) = &record.diagnostic {
        tracing::warn!(child = %child, "{}", wording::resuming_with_diagnostic(diagnostic));
    }
    let Some(descriptor) = record.descriptor else {
        return failed(ControlError::NoDescriptor { child });
    };
    let Some(provider) = inner.service.provider(&descriptor.provider) else {
        return TaskOutcome::Failed {
            detail: SubagentError::NoProvider {
                name: descriptor.provider,
            }
            .to_string(),
        };
    };
    let Some(continuable) = provider.continuation() else {
        return failed(ControlError::NoContinuation {
            provider: descriptor.provider,
        });
    };
    let depth = parent.depth().saturating_add(1);
    let (provider_name, label) = (descriptor.provider.clone(), descriptor.label.clone());
    let provider = provider_name.as_str();
    let service = &inner.service;
    let start = move |kill: CancellationToken| async move {
        let caller = Caller {
            provider,
            parent: parent.id(),
            depth,
            label: label.as_deref(),
        };
        let (admitted, lineage, cancel) = reservation.admit(&kill, caller, service.events()).await?;
        let mut request = ResumeRequest::new(child, prompt, parent, cancel, descriptor);
        request.origin = origin;
        request.lineage = lineage;
        let run = continuable.resume(request).await?;
        Ok(activation.announce(provider, depth, label, run, admitted, &kill))
    };
    task::run(control, provider, start).await
}

/// The label of a follow-up task: the message with whitespace collapsed,
/// at most 80 characters (79 and `…`), or `subagent follow-up` when empty.
pub(super) fn follow_up_label(message: &str) -> String {
    let collapsed = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return wording::EMPTY_FOLLOW_UP_LABEL.to_owned();
    }
    if collapsed.chars().count() > 80 {
        let mut short: String = collapsed.chars().take(79).collect();
        short.push('…');
        return short;
    }
    collapsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_labels_are_collapsed_and_bounded() {
        assert_eq!(follow_up_label("  also\n consider   Y "), "also consider Y");
        assert_eq!(follow_up_label(" \n\t"), "subagent follow-up");
        let long = "x".repeat(81);
        let label = follow_up_label(&long);
        assert_eq!(label.chars().count(), 80);
        assert!(label.ends_with('…'));
        assert_eq!(follow_up_label(&"y".repeat(80)), "y".repeat(80));
    }
}
