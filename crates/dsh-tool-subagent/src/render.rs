//! What the model reads back from one delegation, rendered in one place.

use std::sync::Arc;

use dsh_subagent_api::{StopReason, SubagentError, SubagentResult, TextSource};
use dsh_tools::{ToolError, ToolOutput};

use crate::wording::RunHeadline;
use crate::{ErrorCode, wording};

/// The result and the release of a published run, as the model reads them.
///
/// - completed, released: the child's final text, alone;
/// - any other stop reason: the headline, then `Diagnostic:` and the partial
///   output when present (partial output is never a success);
/// - a failed release after a completed result: the release error;
/// - a failed run and a failed release: one error carrying both, with one
///   headline. A run that stopped `error` already reads `subagent run
///   failed`, so its message stands alone; any other run error is prefixed
///   with `subagent run failed: `. The release failure follows on its own
///   line when the run's message has detail lines (a diagnostic, partial
///   output), and after `; ` when it is a single line
///   (`subagent run failed: <run>; dispose failed: <release>`).
///
/// A completed answer is moved out of the result, not copied; where the
/// provider keeps it to be read again (its transcript) comes back beside it.
pub(crate) fn settled(
    result: Result<SubagentResult, SubagentError>,
    disposed: Result<(), SubagentError>,
) -> (Result<ToolOutput, ToolError>, Option<Arc<dyn TextSource>>) {
    let headline = if matches!(&result, Ok(result) if result.stop_reason == StopReason::Error) {
        RunHeadline::Present
    } else {
        RunHeadline::Absent
    };
    let mut source = None;
    let outcome = match result {
        Ok(result) if result.stop_reason.is_completed() => {
            source = result.text_source().cloned();
            Ok(result.into_text())
        }
        Ok(result) => Err(ToolError::new(wording::stopped_run(
            &result.stop_reason,
            result.diagnostic.as_deref(),
            &result.text(),
        ))
        .with_code(stop_code(&result))),
        Err(error) => Err(start_failed(error)),
    };
    let rendered = match (outcome, disposed) {
        (Ok(text), Ok(())) => return (Ok(ToolOutput::text(text)), source),
        (Ok(_), Err(dispose)) => Err(start_failed(dispose)),
        (Err(run), Ok(())) => Err(run),
        (Err(run), Err(dispose)) => {
            let message = wording::run_and_dispose_failed(run.message(), headline, &dispose.to_string());
            Err(ToolError::new(message).with_code(ErrorCode::RunAndDisposeFailed))
        }
    };
    (rendered, None)
}

/// A service or provider error, keeping its stable code.
pub(crate) fn start_failed(error: SubagentError) -> ToolError {
    ToolError::from(error)
}

fn stop_code(result: &SubagentResult) -> ErrorCode {
    match result.stop_reason {
        StopReason::Aborted | StopReason::Interrupted => ErrorCode::RunAborted,
        StopReason::Error => ErrorCode::RunFailed,
        StopReason::MaxTokens => ErrorCode::RunMaxTokens,
        StopReason::Refusal => ErrorCode::RunRefused,
        _ => ErrorCode::RunEndedAbnormally,
    }
}
