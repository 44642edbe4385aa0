//! Delegation results kept for paged reads: a foreground result too long
//! for its result budget becomes a finished task of its caller
//! ([`SubagentService::record_result`]), under the id reserved when the
//! call started ([`SubagentService::reserve_result`]), read on with
//! `task_output` and an offset, and the cut is announced
//! ([`SubagentService::announce_cut`]).

use dsh_subagent_api::AgentRef;
use dsh_tasks::{Recorded, Reservation, TaskError, TaskRegistry, TaskSnapshot, TaskSpec};

use crate::events::{CutInfo, SubagentEvent};
use crate::{SubagentService, task};

impl SubagentService {
    /// Reserves, when a foreground delegation of `caller` starts, the id
    /// its result is kept under in `tasks` if it is cut (`subagent-<n>`,
    /// numbered like every child run's task): taken before the call awaits
    /// anything, so the delegations of one round are numbered in call
    /// order whatever order they finish in. Refused for a disposed caller.
    pub fn reserve_result(&self, tasks: &TaskRegistry, caller: &AgentRef) -> Result<Reservation, TaskError> {
        tasks.reserve(caller.id(), task::TASK_KIND)
    }

    /// Records a result `caller` already read in part as a finished task of
    /// `caller` in `tasks`, under the id reserved for it
    /// ([`SubagentService::reserve_result`]), labelled `label`, with its
    /// output kept with the caller's tree's outputs
    /// ([`SubagentService::texts`]). No completion notice is queued. The
    /// returned snapshot names the task and shares its output.
    pub fn record_result(
        &self,
        tasks: &TaskRegistry,
        caller: &AgentRef,
        reservation: Reservation,
        label: String,
        recorded: Recorded,
    ) -> Result<TaskSnapshot, TaskError> {
        let spec = TaskSpec::reserved(reservation, label).kept_in(self.texts(caller));
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
