//! An activation's settlement into its task's outcome (reference-contract §3.5).
//!
//! The same mapping as the `subagent` tool's one-shot background route.

use dsh_subagent_api::{StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tasks::TaskOutcome;

use super::error::{dispose_failed_detail, failed_run_detail};

/// Waits for the run's result, then releases it (always, exactly once), then
/// maps both to the task's outcome. The run's token is a child of the task's
/// kill token, so a kill settles it `aborted`, which reads `killed`.
pub(crate) async fn settle(mut run: SubagentRun) -> TaskOutcome {
    let result = run.result().await;
    let disposed = run.dispose().await;
    task_outcome(result, disposed)
}

/// `completed` → completed with the text; `aborted` → killed; any other stop
/// reason → failed with it (and `; diagnostic: …`); a rejected result →
/// failed with the error; a failed release is appended and fails the task.
pub(crate) fn task_outcome(
    result: Result<SubagentResult, SubagentError>,
    disposed: Result<(), SubagentError>,
) -> TaskOutcome {
    let outcome = match result {
        Ok(result) => match result.stop_reason {
            StopReason::Completed => TaskOutcome::Completed { output: result.text() },
            StopReason::Aborted => TaskOutcome::Killed,
            reason => TaskOutcome::Failed {
                detail: failed_run_detail(&reason.to_string(), result.diagnostic.as_deref()),
            },
        },
        Err(error) => TaskOutcome::Failed {
            detail: error.to_string(),
        },
    };
    match (outcome, disposed) {
        (outcome, Ok(())) => outcome,
        (TaskOutcome::Failed { detail }, Err(error)) => TaskOutcome::Failed {
            detail: dispose_failed_detail(Some(&detail), &error.to_string()),
        },
        (_, Err(error)) => TaskOutcome::Failed {
            detail: dispose_failed_detail(None, &error.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use dsh_subagent_api::ContentBlock;

    use super::*;

    #[test]
    fn outcomes_match_the_one_shot_route() {
        let done = Ok(SubagentResult::new(
            StopReason::Completed,
            vec![ContentBlock::text("a")],
        ));
        assert_eq!(
            task_outcome(done, Ok(())),
            TaskOutcome::Completed { output: "a".into() }
        );
        let aborted = Ok(SubagentResult::new(StopReason::Aborted, vec![]));
        assert_eq!(task_outcome(aborted, Ok(())), TaskOutcome::Killed);
        let error = Ok(SubagentResult::new(StopReason::Error, vec![]).with_diagnostic("model down"));
        assert_eq!(
            task_outcome(error, Err(SubagentError::failed("reap failed"))),
            TaskOutcome::Failed {
                detail: "error; diagnostic: model down; dispose failed: reap failed".into()
            }
        );
    }
}
