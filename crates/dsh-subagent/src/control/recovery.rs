//! Restoring what an agent had running in the background before an
//! interruption (a crash, a resumable stop): each background child its
//! records name becomes a task again, under the very id its model read.
//!
//! - A continuable child is recovered through its provider
//!   ([`ContinuableProvider::recover`](dsh_subagent_api::ContinuableProvider::recover))
//!   as an activation of the control service, so it stays the child's one
//!   owner: a child whose last run ended hands back its result at once, one
//!   whose turn was open goes on from its last completed step.
//! - A child that cannot be recovered (one in another process, records
//!   torn past repair, no continuation descriptor) becomes a finished task
//!   that failed, saying it is disconnected and why.
//!
//! Each completion notice is delivered once across any number of
//! interruptions: a child whose notice the agent's records show delivered
//! is restored without one. Every task id the agent's model read (a
//! foreground result's too) stays issued, so no later id repeats one.

use dsh_subagent_api::{
    AgentOptions, AgentRef, CancellationToken, ChildRecord, ContinuationDescriptor, RecoverRequest, RunMode,
    SpanOrigin, StartRequest, SubagentError,
};
use dsh_tasks::{Output, Recorded, TaskId, TaskSpec};

use super::activation::{Activated, activate};
use super::{ControlError, SubagentControl};
use crate::admission::{Caller, Demand};
use crate::{task, trace, wording};

/// What became of each child an agent's records name when it was resumed
/// ([`SubagentControl::recover`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Every child, in the order the agent's records name them.
    pub children: Vec<RecoveredChild>,
}

/// One child of a recovered agent.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveredChild {
    /// The child's id.
    pub child_id: String,
    /// The task id its parent's model read for it, when there is one.
    pub task_id: Option<String>,
    /// What became of it.
    pub fate: Fate,
}

/// What became of a child when its parent was resumed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fate {
    /// It had finished: its result is delivered (its task is restored
    /// finished; its notice is queued unless the parent had read it).
    Delivered,
    /// It was interrupted and goes on from its last completed step, as a
    /// running task under its id.
    Resumed,
    /// It cannot go on: its task is restored failed, saying why.
    Disconnected {
        /// Why.
        why: String,
    },
    /// A foreground child: the call that started it is run again when the
    /// parent's turn resumes, and that call continues it or hands back
    /// its result.
    WithItsCall,
    /// Nothing to restore: its task is kept already (the parent was
    /// resumed before in this process).
    Kept,
}

impl SubagentControl {
    /// Restores what `parent` had running in the background before an
    /// interruption, from the durable store's records of its children
    /// ([`ChildStore::children_of`](dsh_subagent_api::ChildStore::children_of)):
    /// call it when `parent` is resumed, before its turn goes on. Safe to
    /// call again: a child whose task is kept already is left alone.
    ///
    /// Returns once each child that had finished has its task finished
    /// again (its provider handed back its recorded result; that takes no
    /// slot of the tree's limits): the parent's model may have read
    /// its completion notice before the interruption, and its first call
    /// after it must find the result, not a task still running.
    pub async fn recover(&self, parent: &AgentRef) -> Result<RecoveryReport, ControlError> {
        let report = self.restore(parent)?;
        for child in &report.children {
            if let (Fate::Delivered, Some(task_id)) = (&child.fate, &child.task_id) {
                // A task that cannot be found was never restored: nothing
                // to wait for, and the report says what became of it.
                let _ = self.inner.tasks.wait(task_id, parent.id(), None).await;
            }
        }
        Ok(report)
    }

    /// Restores each child's task ([`SubagentControl::recover`]), without
    /// waiting for any.
    fn restore(&self, parent: &AgentRef) -> Result<RecoveryReport, ControlError> {
        let store = self.inner.store()?;
        let children = store
            .children_of(parent.id())
            .map_err(|source| ControlError::Start { source })?;
        let mut report = RecoveryReport::default();
        for record in children {
            let fate = self.recover_child(parent, &record);
            report.children.push(RecoveredChild {
                child_id: record.id,
                task_id: record.task_id,
                fate,
            });
        }
        Ok(report)
    }

    fn recover_child(&self, parent: &AgentRef, record: &ChildRecord) -> Fate {
        let owner = parent.id();
        let task_id = record.task_id.as_deref().and_then(|id| id.parse::<TaskId>().ok());
        if let Some(id) = &task_id
            && let Err(error) = self.inner.tasks.mark_issued(owner, id)
        {
            return Fate::Disconnected { why: error.to_string() };
        }
        if record.mode == RunMode::Foreground {
            return Fate::WithItsCall;
        }
        let Some(task_id) = task_id else {
            return Fate::Disconnected {
                why: wording::NO_TASK_RECORDED.to_owned(),
            };
        };
        if self.inner.tasks.get(&task_id.to_string(), owner).is_ok() {
            return Fate::Kept;
        }
        let label = record
            .descriptor
            .as_ref()
            .and_then(|descriptor| descriptor.label.clone())
            .or_else(|| record.remote.as_ref().and_then(|remote| remote.label.clone()))
            .unwrap_or_else(|| wording::RECOVERED_LABEL.to_owned());
        let mut spec = task::spec(label, owner.clone(), self.inner.service.texts(parent)).with_id(task_id);
        if record.notice_delivered {
            spec = spec.already_told();
        }
        match self.recoverable(record) {
            Ok(provider) => self.resume_in_background(parent, record, provider, spec),
            Err(why) => self.restore_disconnected(record, spec, why),
        }
    }

    /// The provider that can recover the child, or why none can.
    fn recoverable(&self, record: &ChildRecord) -> Result<String, String> {
        if record.remote.is_some() {
            return Err(wording::IN_ANOTHER_PROCESS.to_owned());
        }
        let Some(descriptor) = &record.descriptor else {
            return Err(record
                .diagnostic
                .clone()
                .unwrap_or_else(|| wording::NO_DESCRIPTOR_RECORDED.to_owned()));
        };
        match self.inner.service.provider(&descriptor.provider) {
            Some(provider) if provider.continuation().is_some() => Ok(descriptor.provider.clone()),
            _ => Err(wording::provider_cannot_recover(&descriptor.provider)),
        }
    }

    /// A child that cannot go on: a finished, failed task that says so.
    fn restore_disconnected(&self, record: &ChildRecord, spec: TaskSpec, why: String) -> Fate {
        let detail = wording::disconnected_task(&record.id, &why);
        let recorded = Recorded::Failed {
            detail: detail.clone(),
            output: Output::from(detail),
        };
        let restored = match record.notice_delivered {
            true => self.inner.tasks.record(spec, recorded),
            false => self.inner.tasks.record_with_notice(spec, recorded),
        };
        match restored {
            Ok(_) => Fate::Disconnected { why },
            Err(error) => Fate::Disconnected { why: error.to_string() },
        }
    }

    /// A continuable child, recovered as an activation whose task holds
    /// its id: its recorded result, or its turn going on.
    fn resume_in_background(&self, parent: &AgentRef, record: &ChildRecord, provider: String, spec: TaskSpec) -> Fate {
        let Some(descriptor) = record.descriptor.clone() else {
            return Fate::Disconnected {
                why: wording::NO_DESCRIPTOR_RECORDED.to_owned(),
            };
        };
        let ended = record.ended.is_some();
        // A child that had ended runs nothing: it hands back its result.
        let reservation = match ended {
            true => self.inner.service.pass(parent),
            false => match self.inner.service.reserve(parent, Demand::continuation()) {
                Ok(reservation) => reservation,
                Err(error) => return self.restore_disconnected(record, spec, error.to_string()),
            },
        };
        let first_prompt = record.first_prompt.clone();
        let task_id = record.task_id.clone();
        let span = trace::task_span(&SpanOrigin::follows_current());
        let origin = SpanOrigin::ChildOf(span.clone());
        let inner = self.inner.clone();
        let parent = parent.clone();
        let child = record.id.clone();
        let mut state = self.inner.children.lock();
        state.adopt(&child, parent.id().clone());
        let started = activate(
            &self.inner,
            &mut state,
            &child,
            parent.id().clone(),
            spec,
            span,
            move |activation: Activated, control| async move {
                let service = &inner.service;
                let Some(continuable) = service.provider(&provider).filter(|p| p.continuation().is_some()) else {
                    return dsh_tasks::TaskOutcome::Failed {
                        detail: wording::provider_cannot_recover(&provider),
                    };
                };
                let depth = parent.depth().saturating_add(1);
                let label = descriptor.label.clone();
                let name = provider.as_str();
                let start = move |kill: CancellationToken| async move {
                    let caller = Caller {
                        provider: name,
                        parent: parent.id(),
                        depth,
                        label: label.as_deref(),
                    };
                    let (admitted, lineage, cancel) = reservation.admit(&kill, caller, service.events()).await?;
                    let continuation = continuable
                        .continuation()
                        .ok_or_else(|| SubagentError::failed(wording::provider_cannot_recover(name)))?;
                    let child = activation.child.clone();
                    let run = match first_prompt {
                        // It had not begun: it starts now, as it would have.
                        Some(prompt) => {
                            let mut request = first_request(prompt, parent, cancel, &descriptor, task_id);
                            request.origin = origin;
                            request.lineage = lineage;
                            continuation.start_continuable(child, descriptor, request).await?
                        }
                        None => {
                            let mut request = RecoverRequest::new(child, parent, cancel, descriptor);
                            request.origin = origin;
                            request.lineage = lineage;
                            continuation.recover(request).await?
                        }
                    };
                    Ok(activation.announce(name, depth, label, run, admitted, &kill))
                };
                task::run(control, name, start).await
            },
        );
        match started {
            Ok(_) if ended => Fate::Delivered,
            Ok(_) => Fate::Resumed,
            Err(error) => Fate::Disconnected { why: error.to_string() },
        }
    }
}

/// The request that starts a background child that had not begun: its
/// prompt, and what its descriptor recorded of its settings.
fn first_request(
    prompt: String,
    parent: AgentRef,
    cancel: CancellationToken,
    descriptor: &ContinuationDescriptor,
    task_id: Option<String>,
) -> StartRequest {
    let mut request = StartRequest::text(prompt, parent, cancel);
    request.label = descriptor.label.clone();
    request.mode = RunMode::Background;
    let settings = request.settings_mut();
    if descriptor.agent_model.is_some() || descriptor.agent_provider.is_some() {
        let mut options = AgentOptions::default();
        options.model = descriptor.agent_model.clone();
        options.provider = descriptor.agent_provider.clone();
        settings.agent_options = Some(options);
    }
    settings.persona = descriptor.persona.clone();
    settings.tool_filter = descriptor.tool_filter.clone();
    let provenance = request.provenance_mut();
    provenance.provider = Some(descriptor.provider.clone());
    provenance.task_id = task_id;
    request
}
