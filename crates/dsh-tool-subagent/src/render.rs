//! What the model reads back from one delegation, rendered in one place.

use dsh_subagent_api::{SubagentError, SubagentResult};
use dsh_tools::{ToolError, ToolOutput};

use crate::{ErrorCode, wording};

/// The result and the release of a published run, as the model reads them.
///
/// - completed, released: the child's final text, alone;
/// - any other stop reason: the headline, then `Diagnostic:` and the partial
///   output when present (partial output is never a success);
/// - a failed release after a completed result: the release error;
/// - a failed run and a failed release: one error carrying both.
pub(crate) fn settled(
    result: Result<SubagentResult, SubagentError>,
    disposed: Result<(), SubagentError>,
) -> Result<ToolOutput, ToolError> {
    let outcome = match result {
        Ok(result) if result.stop_reason.is_completed() => Ok(result.text()),
        Ok(result) => Err(ToolError::new(wording::stopped_run(
            &result.stop_reason,
            result.diagnostic.as_deref(),
            &result.text(),
        ))
        .with_code(stop_code(&result))),
        Err(error) => Err(start_failed(error)),
    };
    match (outcome, disposed) {
        (Ok(text), Ok(())) => Ok(ToolOutput::text(text)),
        (Ok(_), Err(dispose)) => Err(start_failed(dispose)),
        (Err(run), Ok(())) => Err(run),
        (Err(run), Err(dispose)) => Err(ToolError::new(wording::run_and_dispose_failed(
            run.message(),
            &dispose.to_string(),
        ))
        .with_code(ErrorCode::RunAndDisposeFailed)),
    }
}

/// A service or provider error, keeping its stable code.
pub(crate) fn start_failed(error: SubagentError) -> ToolError {
    ToolError::from(error)
}

fn stop_code(result: &SubagentResult) -> ErrorCode {
    use dsh_subagent_api::StopReason;
    match result.stop_reason {
        StopReason::Aborted => ErrorCode::RunAborted,
        StopReason::Error => ErrorCode::RunFailed,
        StopReason::MaxTokens => ErrorCode::RunMaxTokens,
        StopReason::Refusal => ErrorCode::RunRefused,
        _ => ErrorCode::RunEndedAbnormally,
    }
}
