//! Results cut to their budget, kept as finished tasks of their caller and
//! read page by page with `task_output`.

use dsh_tasks::{Output, Recorded, Reservation, TaskRegistry, TaskSpec, wording};
use dsh_tools::budget::PagedRead;
use dsh_tools::{AgentRef, KeptResult, ResultShelf, ShelfPlace, ToolRegistry};

/// Keeps a result its budget cut as a finished task of the caller, of the
/// given kind (`mcp` for the tools mounted from MCP servers: `mcp-1`, …),
/// labelled with the tool's name and listed by `task_list`; no completion
/// notice is queued (the caller has the result). The notice of the cut
/// gives the `task_output` call that reads on. The task's id is reserved
/// when the call starts, so the results of calls made together are kept
/// under ids in call order.
///
/// Nothing is kept, and the notice says so, when `tools` has no
/// `task_output`, when the text is larger than the registry's store can
/// ever hold, or when the caller was disposed.
#[derive(Clone, Debug)]
pub struct TaskShelf {
    tasks: TaskRegistry,
    tools: ToolRegistry,
    kind: String,
}

impl TaskShelf {
    /// Keeps results as tasks of `kind` in `tasks`, read with the
    /// `task_output` mounted in `tools`.
    pub fn new(tasks: TaskRegistry, tools: ToolRegistry, kind: impl Into<String>) -> Self {
        Self {
            tasks,
            tools,
            kind: kind.into(),
        }
    }
}

impl ResultShelf for TaskShelf {
    /// Reserves the caller's next id of the shelf's kind now, so that the
    /// results of calls made together are kept under ids in call order.
    fn reserve(&self, caller: &AgentRef) -> Option<Box<dyn ShelfPlace>> {
        self.tools.get(wording::TASK_OUTPUT)?;
        let reservation = self.tasks.reserve(caller.id(), &self.kind).ok()?;
        Some(Box::new(TaskPlace {
            tasks: self.tasks.clone(),
            reservation,
        }))
    }
}

/// An id reserved for one call's result, used if the result is cut.
struct TaskPlace {
    tasks: TaskRegistry,
    reservation: Reservation,
}

impl ShelfPlace for TaskPlace {
    fn keep(self: Box<Self>, label: &str, result: KeptResult) -> Option<PagedRead> {
        let Self { tasks, reservation } = *self;
        if !tasks.texts().can_keep(result.text().len()) {
            return None;
        }
        let recorded = match result {
            KeptResult::Failed(message) => Recorded::Failed {
                detail: wording::recorded_failure_detail(&message),
                output: Output::Text(message),
            },
            KeptResult::Completed(text) => Recorded::Completed(Output::Text(text)),
        };
        let task = tasks.record(TaskSpec::reserved(reservation, label), recorded).ok()?;
        Some(PagedRead::new(wording::TASK_OUTPUT, task.id))
    }
}
