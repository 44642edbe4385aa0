//! Run settlement: how a background run's result and release read as its
//! task's outcome (docs/contract.md, "Background tasks"). One mapping for every background
//! route: the `subagent` tool's one-shot tasks and the control service's
//! continuable activations.

use dsh_subagent_api::{StopReason, SubagentError, SubagentResult};
use dsh_tasks::TaskOutcome;

/// Maps a settled and released run to its task's outcome.
///
/// `completed` → completed with the text; `aborted` → killed; any other stop
/// reason → failed with the reason (and `; diagnostic: …`; partial output is
/// not included); a rejected result → failed with the error. A failed
/// release is appended (`…; dispose failed: …`), and turns a completed or
/// killed task into a failed one: the release happened before the outcome
/// is reported.
pub fn task_outcome(result: Result<SubagentResult, SubagentError>, disposed: Result<(), SubagentError>) -> TaskOutcome {
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

/// The outcome of a background run whose start failed: `killed` when the
/// task was killed and the provider rolled back cleanly; otherwise `failed`
/// with the error. A failed rollback stays `failed` even after a kill, and
/// its detail carries both errors.
pub fn start_failed_outcome(error: &SubagentError, killed: bool) -> TaskOutcome {
    if killed && !matches!(error, SubagentError::RollbackFailed { .. }) {
        return TaskOutcome::Killed;
    }
    TaskOutcome::Failed {
        detail: error.to_string(),
    }
}

/// The detail of a task whose run failed, from its stop reason.
pub fn failed_run_detail(reason: &StopReason, diagnostic: Option<&str>) -> String {
    match diagnostic {
        Some(diagnostic) => format!("{reason}; diagnostic: {diagnostic}"),
        None => reason.to_string(),
    }
}

/// The detail of a task whose release failed, after what went wrong before it.
pub fn dispose_failed_detail(previous: Option<&str>, error: &str) -> String {
    match previous {
        Some(previous) => format!("{previous}; dispose failed: {error}"),
        None => format!("dispose failed: {error}"),
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
