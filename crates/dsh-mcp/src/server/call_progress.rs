//! Progress of a served call: what the code running it reports.

use tokio::sync::mpsc::UnboundedSender;

tokio::task_local! {
    /// The progress of the served call this task runs.
    pub(crate) static CALL_PROGRESS: CallProgress;
}

/// Where the code running a served MCP call reports what it is doing; the
/// server turns the reports into the call's progress notifications.
///
/// [`McpToolServer`](crate::McpToolServer) runs each call whose client asked
/// for progress (a `progressToken`) in its own task with a `CallProgress`:
/// anything that runs in that task, the tool itself or code it calls
/// synchronously (a listener of the events the tool causes, say), finds it
/// with [`CallProgress::current`] and may keep a clone to report from
/// elsewhere while the call runs. Reports made after the call has ended are
/// dropped. A call whose client did not ask for progress has none, and
/// costs nothing.
///
/// ```
/// use dsh_mcp::CallProgress;
///
/// // Outside a served call there is nothing to report to.
/// assert!(CallProgress::current().is_none());
/// ```
#[derive(Clone, Debug)]
pub struct CallProgress {
    reports: UnboundedSender<String>,
}

impl CallProgress {
    pub(crate) fn new(reports: UnboundedSender<String>) -> Self {
        Self { reports }
    }

    /// The progress of the served call this task is running, when its
    /// client asked for progress.
    pub fn current() -> Option<Self> {
        CALL_PROGRESS.try_with(Clone::clone).ok()
    }

    /// Reports one step (a person reads it: say what happened).
    pub fn report(&self, message: impl Into<String>) {
        let _ = self.reports.send(message.into());
    }

    /// Whether the call has ended, so that reports no longer reach anyone.
    pub fn is_closed(&self) -> bool {
        self.reports.is_closed()
    }
}
