//! Delegation results kept for paged reads: a foreground result too long
//! for its result budget becomes a finished task of its caller
//! ([`SubagentService::record_result`]), read on with `task_output` and an
//! offset, and the cut is announced ([`SubagentService::announce_cut`]).

use dsh_subagent_api::AgentRef;
use dsh_tasks::{Recorded, TaskError, TaskRegistry, TaskSnapshot, TaskSpec};

use crate::events::{CutInfo, SubagentEvent};
use crate::{SubagentService, task};

impl SubagentService {
    /// Records a result `caller` already read in part as a finished task of
    /// `caller` in `tasks`, labelled `label` and numbered like every child
    /// run's task (`subagent-<n>`), with its output kept with the caller's
    /// tree's outputs ([`SubagentService::texts`]). No completion notice is
    /// queued. The returned snapshot names the task and shares its output.
    pub fn record_result(
        &self,
        tasks: &TaskRegistry,
        caller: &AgentRef,
        label: String,
        recorded: Recorded,
    ) -> Result<TaskSnapshot, TaskError> {
        let spec = TaskSpec::new(task::TASK_KIND, label, caller.id().clone()).kept_in(self.texts(caller));
        tasks.record(spec, recorded)
    }

    /// Announces that a run's result was cut to its budget
    /// ([`SubagentEvent::ResultCut`]), to the subscribers that hear run
    /// events; nothing is built when there are none.
    pub fn announce_cut(&self, cut: impl FnOnce() -> CutInfo) {
        let events = &self.inner.events;
        if events.announces_runs() {
            events.notify(&SubagentEvent::ResultCut(cut()));
        }
    }
}
