//! A child run as a background task of its caller (docs/contract.md,
//! "Background tasks"): the `subagent` tool's one-shot route
//! ([`SubagentService::start_as_task`](crate::SubagentService::start_as_task))
//! and every activation of a continuable child run here.
//!
//! Every such task is spawned by [`spawn`], inside its own span (see
//! [`trace::task_span`]), and runs its child with [`run`]: the start, with
//! the task's kill token in place of the caller's (so `task_kill`, not the
//! call that asked for it, governs the child), then [`settle`], then the
//! outcome. The start is one step, [`run`]'s call of `start`: whatever must
//! happen before a child starts happens there, for every route.

use dsh_subagent_api::trace as lifecycle;
use dsh_subagent_api::{AgentId, CancellationToken, StopReason, SubagentError, SubagentResult, SubagentRun};
use dsh_tasks::{Output, TaskControl, TaskError, TaskOutcome, TaskRegistry, TaskSpec, TextStore};
use dsh_tools::budget::TextSize;
use tracing::{Instrument, Span};

use crate::{ServiceCode, settle, trace, wording};

/// The task kind (and id prefix) of every child run's task, and of every
/// delegation result kept for paged reads: `subagent-<n>`.
pub const TASK_KIND: &str = "subagent";

/// Why [`SubagentService::start_as_task`](crate::SubagentService::start_as_task) started nothing.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskStartError {
    /// The child's delegation tree refused it (see
    /// [`SubagentService::start`](crate::SubagentService::start)).
    #[error(transparent)]
    Refused(#[from] SubagentError),
    /// The task registry refused the task.
    #[error(transparent)]
    Task(#[from] TaskError),
}

impl TaskStartError {
    /// The stable code: the refusal's, or the task registry's.
    pub fn code(&self) -> ServiceCode<'_> {
        match self {
            Self::Refused(error) => error.code().into(),
            Self::Task(error) => error.code().into(),
        }
    }
}

/// A refused background start, as the model reads it: its text and code.
impl From<TaskStartError> for dsh_tools::ToolError {
    fn from(error: TaskStartError) -> Self {
        match error {
            TaskStartError::Refused(error) => error.into(),
            TaskStartError::Task(error) => error.into(),
        }
    }
}

/// The spec of a child run's task for `owner`, its output kept in `texts`
/// (the owner's service's store, or the process's).
pub(crate) fn spec(label: String, owner: AgentId, texts: TextStore) -> TaskSpec {
    TaskSpec::new(TASK_KIND, label, owner).kept_in(texts)
}

/// Spawns a child run's task on `tasks`: its producer's future runs inside
/// `span` (a [`trace::task_span`]), which records the task's id.
pub(crate) fn spawn<F, Fut>(tasks: &TaskRegistry, spec: TaskSpec, span: Span, producer: F) -> Result<String, TaskError>
where
    F: FnOnce(TaskControl) -> Fut,
    Fut: Future<Output = TaskOutcome> + Send + 'static,
{
    let task_span = span.clone();
    let task_id = tasks.spawn(spec, move |control| producer(control).instrument(task_span))?;
    trace::record_task_id(&span, &task_id);
    Ok(task_id)
}

/// The body of a child run's task, as
/// [`SubagentService::start_as_task`](crate::SubagentService::start_as_task)
/// describes it: `start` gets the task's kill token and resolves with the
/// published run of `provider`'s child, or fails; the run's lifecycle is
/// traced on the current (the task's) span.
pub(crate) async fn run<S, Fut>(control: TaskControl, provider: &str, start: S) -> TaskOutcome
where
    S: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<SubagentRun, SubagentError>>,
{
    let kill = control.token();
    // The one start step of every route.
    match start(kill.clone()).await {
        Ok(run) => {
            lifecycle::started(provider, &run);
            lifecycle::published(&run);
            let settled = settle(run, kill).await;
            lifecycle::settled(&settled.result);
            lifecycle::disposed(&settled.disposed);
            task_outcome(settled.result, settled.disposed)
        }
        Err(error) => start_failed_outcome(&error, kill.is_cancelled()),
    }
}

/// Maps a settled and released run to its task's outcome (see
/// [`SubagentService::start_as_task`](crate::SubagentService::start_as_task)).
fn task_outcome(result: Result<SubagentResult, SubagentError>, disposed: Result<(), SubagentError>) -> TaskOutcome {
    let outcome = match result {
        Ok(result) => match result.stop_reason {
            StopReason::Completed => TaskOutcome::Completed {
                output: output_of(result),
            },
            StopReason::Aborted | StopReason::Interrupted => TaskOutcome::Killed,
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

/// A completed run's answer as its task keeps it: read back from where the
/// provider keeps it (its transcript) when it said where, so nothing is held
/// in memory; otherwise the text itself, moved out of the result.
pub(crate) fn output_of(result: SubagentResult) -> Output {
    match result.text_source().cloned() {
        Some(source) => Output::Source {
            source,
            size: TextSize::of(&result.into_text()),
        },
        None => result.into_text().into(),
    }
}

/// The outcome of a task whose start failed (see
/// [`SubagentService::start_as_task`](crate::SubagentService::start_as_task)).
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
