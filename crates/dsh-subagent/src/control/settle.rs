//! An activation's settlement into its task's outcome (docs/contract.md, "Background tasks").
//!
//! The mapping is [`crate::settlement::task_outcome`], shared with the
//! `subagent` tool's one-shot background route.

use dsh_subagent_api::SubagentRun;
use dsh_tasks::TaskOutcome;

use crate::settlement::task_outcome;

/// Waits for the run's result, then releases it (always, exactly once), then
/// maps both to the task's outcome. The run's token is a child of the task's
/// kill token, so a kill settles it `aborted`, which reads `killed`.
pub(crate) async fn settle(mut run: SubagentRun) -> TaskOutcome {
    let result = run.result().await;
    let disposed = run.dispose().await;
    task_outcome(result, disposed)
}
