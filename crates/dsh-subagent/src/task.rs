//! A child run as a background task of its caller (docs/contract.md,
//! "Background tasks"): the `subagent` tool's one-shot route and every
//! activation of a continuable child run here.
//!
//! The task starts the run with its own kill token in place of the caller's
//! (so `task_kill`, not the call that asked for it, governs the child),
//! settles it with [`settle`], and ends with the run's outcome. The start is
//! one step, [`run`]'s call of `start`: whatever must happen before a child
//! starts happens there, for every route.

use dsh_subagent_api::{AgentId, CancellationToken, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tasks::{TaskControl, TaskError, TaskOutcome, TaskRegistry, TaskSpec};

use crate::{Settled, settle, wording};

/// The task kind (and id prefix) of every child run's task: `subagent-<n>`.
pub(crate) const TASK_KIND: &str = "subagent";

/// Runs a child as a background task of `owner`, labelled `label`, and
/// returns the task's id (`subagent-<n>`) at once.
///
/// The task calls `start` with its kill token, which the run must use in
/// place of the caller's; `start` resolves with the published run, or fails.
/// The task then settles the run ([`settle`] against the same token), hands
/// the settlement to `on_settled` (for the caller's own records, such as
/// trace events), and ends with its outcome:
///
/// - `completed` → completed with the child's text; `aborted` (what a kill
///   reads) → killed; any other stop reason → failed with the reason (and
///   `; diagnostic: …`; partial output is not included); a rejected result
///   → failed with the error.
/// - A failed release is appended (`…; dispose failed: …`) and turns a
///   completed or killed task into a failed one: the release happened before
///   the outcome is reported.
/// - A failed start → killed when the task was killed and the provider
///   rolled back cleanly; otherwise failed with the error (a failed rollback
///   stays failed after a kill, its detail carrying both errors).
///
/// Refused, with nothing started, when the registry refuses the task (an
/// empty label, a disposed owner).
pub fn run_as_task<S, Fut, O>(
    tasks: &TaskRegistry,
    label: String,
    owner: AgentId,
    start: S,
    on_settled: O,
) -> Result<String, TaskError>
where
    S: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<SubagentRun, SubagentError>> + Send + 'static,
    O: FnOnce(&Settled) + Send + 'static,
{
    tasks.spawn(spec(label, owner), move |control| run(control, start, on_settled))
}

/// The spec of a child run's task.
pub(crate) fn spec(label: String, owner: AgentId) -> TaskSpec {
    TaskSpec::new(TASK_KIND, label, owner)
}

/// The body of a child run's task, as [`run_as_task`] describes it. The
/// control service runs its activations through it inside tasks of its own,
/// which hold the child's slot around it.
pub(crate) async fn run<S, Fut, O>(control: TaskControl, start: S, on_settled: O) -> TaskOutcome
where
    S: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<SubagentRun, SubagentError>>,
    O: FnOnce(&Settled),
{
    let kill = control.token();
    // The one start step of every route.
    match start(kill.clone()).await {
        Ok(run) => {
            let settled = settle(run, kill).await;
            on_settled(&settled);
            task_outcome(settled.result, settled.disposed)
        }
        Err(error) => start_failed_outcome(&error, kill.is_cancelled()),
    }
}

/// Maps a settled and released run to its task's outcome (see
/// [`run_as_task`]).
fn task_outcome(result: Result<SubagentResult, SubagentError>, disposed: Result<(), SubagentError>) -> TaskOutcome {
    let outcome = match result {
        Ok(result) => match result.stop_reason {
            StopReason::Completed => TaskOutcome::Completed { output: result.text() },
            StopReason::Aborted => TaskOutcome::Killed,
            reason => TaskOutcome::Failed {
                detail: failed_run_detail(&reason, result.diagnostic.as_deref()),
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

/// The outcome of a task whose start failed (see [`run_as_task`]).
fn start_failed_outcome(error: &SubagentError, killed: bool) -> TaskOutcome {
    if killed && !matches!(error, SubagentError::RollbackFailed { .. }) {
        return TaskOutcome::Killed;
    }
    TaskOutcome::Failed {
        detail: error.to_string(),
    }
}

/// The detail of a task whose run failed, from its stop reason.
fn failed_run_detail(reason: &StopReason, diagnostic: Option<&str>) -> String {
    match diagnostic {
        Some(diagnostic) => wording::failed_run_detail(reason, diagnostic),
        None => reason.to_string(),
    }
}

/// The detail of a task whose release failed, after what went wrong before it.
fn dispose_failed_detail(previous: Option<&str>, error: &str) -> String {
    match previous {
        Some(previous) => wording::dispose_failed_after(previous, error),
        None => wording::dispose_failed(error),
    }
}

#[cfg(test)]
mod tests {
    use dsh_subagent_api::ContentBlock;

    use super::*;

    fn result(reason: &str) -> Result<SubagentResult, SubagentError> {
        Ok(SubagentResult::new(
            StopReason::parse(reason),
            vec![ContentBlock::text("partial")],
        ))
    }

    #[test]
    fn stop_reasons_map_to_task_outcomes() {
        assert_eq!(
            task_outcome(result("completed"), Ok(())),
            TaskOutcome::Completed {
                output: "partial".into()
            }
        );
        assert_eq!(task_outcome(result("aborted"), Ok(())), TaskOutcome::Killed);
        for reason in ["error", "max-tokens", "refusal", "paused"] {
            assert_eq!(
                task_outcome(result(reason), Ok(())),
                TaskOutcome::Failed { detail: reason.into() }
            );
        }
    }

    #[test]
    fn rejections_release_failures_and_diagnostics_stay_separate_from_output() {
        let failed = |m: &str| SubagentError::failed(m);
        assert_eq!(
            task_outcome(Err(failed("transport gone")), Ok(())),
            TaskOutcome::Failed {
                detail: "transport gone".into()
            }
        );
        assert_eq!(
            task_outcome(result("completed"), Err(failed("reap failed"))),
            TaskOutcome::Failed {
                detail: "dispose failed: reap failed".into()
            }
        );
        assert_eq!(
            task_outcome(Err(failed("result failed")), Err(failed("reap failed"))),
            TaskOutcome::Failed {
                detail: "result failed; dispose failed: reap failed".into()
            }
        );
        let diagnosed = Ok(
            SubagentResult::new(StopReason::Error, vec![ContentBlock::text("partial")])
                .with_diagnostic("Claude Code denied a tool request"),
        );
        assert_eq!(
            task_outcome(diagnosed, Ok(())),
            TaskOutcome::Failed {
                detail: "error; diagnostic: Claude Code denied a tool request".into()
            }
        );
    }

    #[test]
    fn a_killed_start_reads_killed_unless_its_rollback_failed() {
        let aborted = SubagentError::aborted("start aborted before publication");
        assert_eq!(start_failed_outcome(&aborted, true), TaskOutcome::Killed);
        assert_eq!(
            start_failed_outcome(&aborted, false),
            TaskOutcome::Failed {
                detail: "start aborted before publication".into()
            }
        );
        let double = SubagentError::rollback_failed(aborted, SubagentError::failed("cleanup also failed"));
        assert_eq!(double.code(), "ROLLBACK_FAILED");
        for killed in [true, false] {
            assert_eq!(
                start_failed_outcome(&double, killed),
                TaskOutcome::Failed {
                    detail: "start aborted before publication; rollback failed: cleanup also failed".into()
                }
            );
        }
    }
}
