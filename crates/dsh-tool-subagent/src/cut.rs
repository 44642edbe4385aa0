//! A foreground result within the tool's result budget: a longer one reads
//! as its head and tail around the notice, and is kept whole as a finished
//! task of the caller, so that `task_output` with an `offset` reads the
//! rest without running the child again.

use std::sync::Arc;

use dsh_subagent::{CutInfo, CutOutcome, SubagentService};
use dsh_subagent_api::AgentRef;
use dsh_tasks::{Output, Recorded, Reservation, TaskRegistry};
use dsh_tools::budget::{self, PagedRead, TextSize};
use dsh_tools::{ResultLimit, ToolError, ToolOutput, ToolRegistry};

use crate::lifecycle::Delegated;
use crate::wording;

/// Where a cut result is kept for paged reads: the caller's tasks, read
/// with the `task_output` mounted in `tools`.
#[derive(Clone)]
pub(crate) struct Pages {
    pub(crate) tasks: TaskRegistry,
    pub(crate) tools: ToolRegistry,
}

impl Pages {
    /// Reserves, when a foreground call starts, the id its result is kept
    /// under if it is cut; `None` when it could not be kept (no
    /// `task_output` mounted, a disposed caller).
    pub(crate) fn reserve(&self, service: &SubagentService, caller: &AgentRef) -> Option<Reservation> {
        self.tools.get(dsh_tasks::wording::TASK_OUTPUT)?;
        service.reserve_result(&self.tasks, caller).ok()
    }
}

/// What one cut needs besides the result: the result limit, where it is kept
/// and under which id, and who reads it.
pub(crate) struct Cutter<'a> {
    pub(crate) limit: ResultLimit,
    pub(crate) pages: Option<&'a Pages>,
    pub(crate) service: &'a SubagentService,
    pub(crate) caller: &'a AgentRef,
    pub(crate) label: Box<str>,
    /// The id reserved for the result when the call started
    /// ([`Pages::reserve`]); `None`: it cannot be kept.
    pub(crate) reserved: Option<Reservation>,
}

impl Cutter<'_> {
    /// The delegation's outcome within the budget. A result at or under it
    /// is returned as it is. A longer success or failure (its partial
    /// output, say) is kept whole, when it can be, as a finished task of
    /// the caller, and cut to its head and tail with the notice, which
    /// gives the exact `task_output` call reading on (or says the rest is
    /// not kept); a failure keeps its code and stays a failure.
    pub(crate) fn within(mut self, (outcome, source): Delegated) -> Result<ToolOutput, ToolError> {
        let budget = self.limit.bytes();
        match outcome {
            Ok(output) if output.text.len() > budget => {
                let text = Arc::new(output.text);
                let full = TextSize::of(&text);
                // Read back from where the provider keeps it, or kept here.
                let (kept, held) = match source {
                    Some(source) => (Output::Source { source, size: full }, 0),
                    None => (Output::Text(text.clone()), text.len()),
                };
                let (read, task_id) = self.keep(Recorded::Completed(kept), held);
                let Some(excerpt) = budget::head_and_tail(&text, budget, read) else {
                    return Ok(ToolOutput::text(Arc::unwrap_or_clone(text)));
                };
                self.announce(CutOutcome::Completed, full, excerpt.cut.shown.size(), task_id);
                Ok(ToolOutput::excerpt(excerpt))
            }
            Err(error) if error.message().len() + dsh_tools::wording::ERROR_PREFIX.len() > budget => {
                let allowance = budget.saturating_sub(dsh_tools::wording::ERROR_PREFIX.len());
                let code = error.code().map(str::to_owned);
                let message = Arc::new(error.into_message());
                let full = TextSize::of(&message);
                let (read, task_id) = self.keep(
                    Recorded::Failed {
                        detail: wording::recorded_failure_detail(&message),
                        output: Output::Text(message.clone()),
                    },
                    message.len(),
                );
                let Some(excerpt) = budget::head_and_tail(&message, allowance, read) else {
                    return Err(with_code(ToolError::new(Arc::unwrap_or_clone(message)), code));
                };
                self.announce(CutOutcome::Failed, full, excerpt.cut.shown.size(), task_id);
                Err(with_code(ToolError::excerpt(excerpt), code))
            }
            outcome => outcome,
        }
    }

    /// Keeps the whole result as a finished task of the caller, under the
    /// id reserved for it, when the caller's store can hold the `held`
    /// bytes the result takes in memory: the paged read of its notice, and
    /// the id. A result larger than the store's whole bound is not kept,
    /// and its notice says so.
    fn keep(&mut self, recorded: Recorded, held: usize) -> (Option<PagedRead>, Option<String>) {
        let (Some(pages), Some(reservation)) = (self.pages, self.reserved.take()) else {
            return (None, None);
        };
        if !self.service.texts(self.caller).can_keep(held) {
            return (None, None);
        }
        match self
            .service
            .record_result(&pages.tasks, self.caller, reservation, self.label.to_string(), recorded)
        {
            Ok(task) => (
                Some(PagedRead::new(dsh_tasks::wording::TASK_OUTPUT, task.id.clone())),
                Some(task.id),
            ),
            // The caller was disposed meanwhile: the cut says the rest is not kept.
            Err(_) => (None, None),
        }
    }

    /// Announces the cut to the service's run listeners (a progress line).
    fn announce(&self, outcome: CutOutcome, full: TextSize, shown: TextSize, task_id: Option<String>) {
        self.service.announce_cut(|| {
            let depth = self.caller.depth().saturating_add(1);
            CutInfo::new(self.caller.id().clone(), depth, outcome, full, shown)
                .label(Some(self.label.to_string()))
                .task_id(task_id)
        });
    }
}

fn with_code(error: ToolError, code: Option<String>) -> ToolError {
    match code {
        Some(code) => error.with_code(code),
        None => error,
    }
}
