//! Every text the kit writes: the requirements' titles, what a cell saw,
//! and the report's table.

use std::fmt::{Display, Write as _};
use std::time::Duration;

use dsh_subagent_api::{Capabilities, Capability, StopReason, SubagentError, SubagentResult};
use serde_json::Value;

use crate::finding::{Finding, Status};

/// The title of each requirement the provider kit checks.
pub(crate) fn title(id: &str) -> String {
    let title = match id {
        "provider.made" => "the factory makes a provider that registers, with a name and the same claims each time",
        "delegation.settles" => "a plain delegation publishes, settles and is released, each within its deadline",
        "cancel.before-start" => "a start whose token is already cancelled fails ABORTED, or its run settles aborted",
        "cancel.during-start" => "a start cancelled while pending fails ABORTED and publishes nothing",
        "drop.start" => "a start dropped while pending leaves nothing behind",
        "cancel.after-publication" => {
            "a run cancelled as soon as it is published settles aborted within the cancel deadline"
        }
        "cancel.during-result" => {
            "a run cancelled while its result is pending settles aborted within the cancel deadline"
        }
        "cancel.after-result" => {
            "a cancellation after the result changes nothing: the release succeeds, the result reads the same"
        }
        "drop.caller" => "a caller that drops its wait mid-run gets the child released in the background",
        "release.once" => "the release runs once: a second dispose returns the first outcome and releases nothing more",
        "release.settles-result" => {
            "once released, the run's result is settled at once, and no answer is published after the release"
        }
        "panic.contained" => {
            "a panic in a run's result reaches its caller as a failure; the child is released once; the next delegation works"
        }
        "concurrency.independent" => "concurrent starts are independent: cancelling every other one aborts only those",
        "capability.outputSchema" => {
            "outputSchema: claimed, a completed run carries the structured answer; else refused by the service"
        }
        "capability.depthLimit" => {
            "depthLimit: claimed, a child at the cap starts and one past it is refused; else refused by the service"
        }
        "capability.toolFilter" => {
            "toolFilter: claimed, a start with a filter is taken and settles; else refused by the service"
        }
        "capability.persona" => {
            "persona: claimed, a start with a persona is taken and settles; else refused by the service"
        }
        "capability.tokenBudget" => {
            "tokenBudget: claimed, the child's usage reaches the budget; else refused by the service"
        }
        "continuation.remade" => "a continuable child is continued by id after its provider was dropped and made again",
        "delegation.completes" => "a plain delegation completes with an answer",
        "run.ids-distinct" => "runs in flight together have distinct ids",
        other => other,
    };
    title.to_owned()
}

/// A duration as the report prints it: `250 ms`, `5 s`, `1.5 s`.
pub(crate) fn duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// A result in a few words: its stop reason and the size of its answer.
fn outcome(result: &SubagentResult) -> String {
    let text = result.text();
    let mut said = format!("{} with {} bytes of answer", result.stop_reason, text.len());
    if let Some(diagnostic) = &result.diagnostic {
        let first = diagnostic.lines().next().unwrap_or_default();
        let _ = write!(said, " (diagnostic: {first})");
    }
    said
}

pub(crate) const STAGE_START: &str = "the start";
pub(crate) const STAGE_START_AFTER_CANCEL: &str = "the start, once cancelled,";
pub(crate) const STAGE_RESULT: &str = "the result";
pub(crate) const STAGE_RESULT_AFTER_CANCEL: &str = "the result, once cancelled,";
pub(crate) const STAGE_RESULT_AFTER_RELEASE: &str = "the result, once released,";
pub(crate) const STAGE_DISPOSE: &str = "the release (dispose)";
pub(crate) const STAGE_SETTLE: &str = "the settlement";

/// The panic the panic cell puts into a run's result.
pub(crate) const INJECTED_PANIC: &str = "conformance kit: an injected panic in the run's result";
pub(crate) const PANIC_WITHOUT_MESSAGE: &str = "(a panic without a message)";

pub(crate) fn stage_timed_out(stage: &str, deadline: Duration) -> String {
    format!("{stage} did not finish within {}", duration(deadline))
}

pub(crate) fn stage_panicked(stage: &str, message: &str) -> String {
    format!("{stage} panicked: {message}")
}

pub(crate) fn factory_panicked(message: &str) -> String {
    format!("the factory panicked while making the provider: {message}")
}

pub(crate) fn cell_panicked(message: &str) -> String {
    format!("the cell panicked: {message}")
}

pub(crate) fn not_registered(error: &SubagentError) -> String {
    format!("the service refused to register the provider: {error}")
}

pub(crate) fn no_thread(error: &dyn Display) -> String {
    format!("could not start the cell's thread: {error}")
}

pub(crate) fn no_runtime(error: &dyn Display) -> String {
    format!("could not build the cell's runtime: {error}")
}

pub(crate) fn thread_blocked(bound: Duration) -> String {
    format!(
        "the cell did not end within {}: the provider blocks its thread (a blocking call in async code), which no deadline can end; the thread is left behind",
        duration(bound)
    )
}

pub(crate) const NO_PROVIDER_MADE: &str = "not checked: the provider could not be made (see provider.made)";
pub(crate) const NO_NAME: &str = "the provider's name is empty";
pub(crate) const CHANGING_CLAIMS: &str =
    "the provider's capabilities or context changed between two calls: a claim must not change";

pub(crate) fn made(name: &str, capabilities: Capabilities, inherits: bool, continuable: bool) -> String {
    let claimed: Vec<&str> = [
        Capability::OutputSchema,
        Capability::DepthLimit,
        Capability::ToolFilter,
        Capability::Persona,
        Capability::TokenBudget,
    ]
    .into_iter()
    .filter(|capability| capabilities.supports(*capability))
    .map(Capability::as_str)
    .collect();
    format!(
        "\"{name}\" claims {}; {} context; {}",
        if claimed.is_empty() {
            "no capability".to_owned()
        } else {
            claimed.join(", ")
        },
        if inherits { "inherited" } else { "fresh" },
        if continuable { "continuable" } else { "one-shot" }
    )
}

pub(crate) fn start_refused(error: &SubagentError) -> String {
    format!("the start failed ({}): {error}", error.code())
}

pub(crate) fn release_failed(error: &SubagentError) -> String {
    format!("the release failed ({}): {error}", error.code())
}

pub(crate) fn result_failed(error: &SubagentError) -> String {
    format!("the result failed ({}): {error}", error.code())
}

pub(crate) fn settled(result: &SubagentResult) -> String {
    format!("settled {}", outcome(result))
}

pub(crate) fn not_completed(result: &SubagentResult) -> String {
    format!("settled {}, not completed with an answer", outcome(result))
}

pub(crate) fn settled_not_aborted(result: &SubagentResult) -> String {
    format!("cancelled, the run settled {}, not aborted", outcome(result))
}

pub(crate) fn settled_before_cancel(result: &Result<SubagentResult, SubagentError>) -> String {
    match result {
        Ok(result) => format!(
            "the result settled before the cancellation ({}): nothing was pending to cancel",
            outcome(result)
        ),
        Err(error) => format!("the result failed before the cancellation: {error}"),
    }
}

pub(crate) fn completed_after_release(result: &SubagentResult) -> String {
    format!(
        "released before its result was read, the run then read {}: an answer published after the release",
        outcome(result)
    )
}

pub(crate) fn refused_aborted(error: &SubagentError) -> String {
    format!("refused ABORTED: {error}")
}

pub(crate) fn refused_not_aborted(error: &SubagentError) -> String {
    format!("a cancelled start failed {} rather than ABORTED: {error}", error.code())
}

pub(crate) fn published_at_once(checked: Option<&str>) -> String {
    format!(
        "the start was over within 20 ms, so the cancellation came after publication; {}",
        checked.unwrap_or("the run settled aborted")
    )
}

pub(crate) const PUBLISHED_AFTER_CANCEL: &str =
    "the start published a run after its token was cancelled: a cancelled start must roll back and fail";
pub(crate) const NOTHING_TO_DROP: &str =
    "the start was over within 20 ms, so there was no pending start to drop; the run was released";
pub(crate) const DROPPED_PENDING: &str = "dropped after 20 ms pending; nothing was left behind";
pub(crate) const DROPPED_MID_RUN: &str = "dropped 20 ms into the run; released in the background";
pub(crate) const SETTLED_BEFORE_DROP: &str = "the run settled within 20 ms, before the wait could be dropped; released";

pub(crate) fn background_release_pending(bound: Duration) -> String {
    format!(
        "the background release of the dropped caller's child did not finish within {}",
        duration(bound)
    )
}

pub(crate) fn result_changed(
    first: &Result<SubagentResult, SubagentError>,
    again: &Result<SubagentResult, SubagentError>,
) -> String {
    format!("the result read {first:?} before the cancellation and {again:?} after the release")
}

pub(crate) fn second_dispose_differs(first: &Result<(), SubagentError>, second: &Result<(), SubagentError>) -> String {
    format!("the first dispose returned {first:?}, the second {second:?}")
}

pub(crate) fn counted_by(probe: bool) -> &'static str {
    if probe {
        "releases counted by the provider's probe"
    } else {
        "no probe: checked by what was left over (tasks, processes), not by a count of releases"
    }
}

pub(crate) fn release_count(releases: usize, published: usize) -> String {
    let times = match releases {
        1 => "once".to_owned(),
        2 => "twice".to_owned(),
        n => format!("{n} times"),
    };
    format!("the provider released {times} for {published} published run(s): each child must be released exactly once")
}

pub(crate) fn probe_live(live: usize) -> String {
    format!("the provider's probe still counts {live} live child(ren) after every release")
}

pub(crate) fn tasks_left(tasks: usize, grace: Duration) -> String {
    format!(
        "{tasks} task(s) still running on the runtime {} after the release",
        duration(grace)
    )
}

pub(crate) fn process_left(pid: i32, name: &str, grace: Duration) -> String {
    format!(
        "process {pid} ({name}) still running {} after the release (killed by the kit)",
        duration(grace)
    )
}

pub(crate) const INJECTED_WHILE_RUNNING: &str = "while the child ran";
pub(crate) const INJECTED_AFTER_RESULT: &str = "after the child's result";

pub(crate) fn panic_point(while_running: bool) -> &'static str {
    if while_running {
        INJECTED_WHILE_RUNNING
    } else {
        INJECTED_AFTER_RESULT
    }
}

pub(crate) fn panic_other_failure(point: &str, error: &SubagentError) -> String {
    format!("a panic {point} read as another failure: {error}")
}

pub(crate) fn panic_read_as_result(point: &str, result: &SubagentResult) -> String {
    format!("a panic {point} read as a result: {}", outcome(result))
}

pub(crate) fn panic_release_failed(point: &str, error: &SubagentError) -> String {
    format!("after a panic {point}, the release failed: {error}")
}

pub(crate) fn next_after_panic(error: &SubagentError) -> String {
    format!("the delegation after the panics failed: {error}")
}

pub(crate) fn one_of_many(index: usize, count: usize, seen: &str) -> String {
    format!("run {} of {count}: {seen}", index + 1)
}

pub(crate) fn one_of_many_refused(index: usize, count: usize, error: &SubagentError) -> String {
    one_of_many(index, count, &start_refused(error))
}

pub(crate) fn one_of_many_failed(index: usize, count: usize, error: &SubagentError) -> String {
    one_of_many(index, count, &result_failed(error))
}

pub(crate) fn uncancelled_aborted(index: usize, count: usize) -> String {
    one_of_many(
        index,
        count,
        "settled aborted though only its neighbours were cancelled: starts are not independent",
    )
}

pub(crate) fn cancelled_not_aborted(index: usize, count: usize, reason: &StopReason) -> String {
    one_of_many(index, count, &format!("cancelled, it settled {reason}, not aborted"))
}

pub(crate) fn independent(count: usize, completed: usize) -> String {
    format!(
        "{count} starts at once; the {} cancelled aborted; {completed} of the other {} completed",
        count / 2,
        count - count / 2
    )
}

pub(crate) fn ids_repeat(distinct: usize, runs: usize) -> String {
    format!("{runs} runs in flight together had only {distinct} distinct ids")
}

pub(crate) fn claimed_but_refused(capability: Capability, error: &SubagentError) -> String {
    format!("claims {capability}, yet a start that sets it failed: {error}")
}

pub(crate) fn not_claimed_refused(capability: Capability) -> String {
    format!(
        "not claimed: a start that sets {capability} is refused by the service (UNSUPPORTED_CAPABILITY) before the provider is called"
    )
}

pub(crate) fn not_claimed_other(capability: Capability, error: &SubagentError) -> String {
    format!(
        "not claimed, a start that sets {capability} failed otherwise ({}): {error}",
        error.code()
    )
}

pub(crate) fn not_claimed_started(capability: Capability) -> String {
    format!("not claimed, yet a start that sets {capability} was published")
}

pub(crate) fn accepted(result: &SubagentResult) -> String {
    format!(
        "taken and {}; how the child used it does not show outside the child",
        settled(result)
    )
}

pub(crate) fn structured(value: &Value) -> String {
    format!("the structured answer is {value}")
}

pub(crate) fn structured_mismatch(value: &Value) -> String {
    format!("the structured answer {value} does not match the schema (an object with a string \"answer\")")
}

pub(crate) const NO_STRUCTURED: &str = "the run completed without a structured answer";
pub(crate) const DEPTH_HONOURED: &str =
    "a child at the cap started; one past it was refused DEPTH_EXCEEDED before the provider was called";
pub(crate) const DEPTH_STARTED: &str = "a child past the depth cap was published";

pub(crate) fn depth_other(error: &SubagentError) -> String {
    format!(
        "a child past the depth cap failed otherwise ({}): {error}",
        error.code()
    )
}

pub(crate) fn no_usage(result: &SubagentResult) -> String {
    format!(
        "claims tokenBudget, but the run ({}) spent nothing from the budget: its usage is not reported",
        outcome(result)
    )
}

pub(crate) fn usage_counted(spent: u64) -> String {
    format!("the child's usage reached the budget ({spent} tokens)")
}

pub(crate) const NOT_CONTINUABLE: &str = "the provider is one-shot (no continuation capability)";
pub(crate) const NO_STORE: &str =
    "the provider is continuable, but the subject gives no ChildStore to find its children in (Subject::store)";
pub(crate) const FOLLOW_UP_NOT_STARTED: &str =
    "the follow-up joined a running activation instead of starting a new one after the restart";

pub(crate) fn continuable_refused(error: &dyn Display) -> String {
    format!("the continuable start was refused: {error}")
}

pub(crate) fn follow_up_refused(error: &dyn Display) -> String {
    format!("the follow-up to the remade provider was refused: {error}")
}

pub(crate) fn task_still_running(id: &str, bound: Duration) -> String {
    format!("task {id} was still running after {}", duration(bound))
}

pub(crate) fn task_ended(id: &str, status: &str, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("task {id} ended {status}: {detail}"),
        None => format!("task {id} ended {status}"),
    }
}

pub(crate) fn continued(child: &str, answer: &str) -> String {
    format!(
        "child {child} continued after the provider was made again ({} bytes of answer)",
        answer.len()
    )
}

/// The report as a table, then its verdict.
pub(crate) fn table(subject: &str, findings: &[Finding]) -> String {
    let count = |status: Status| findings.iter().filter(|f| f.status == status).count();
    let mut out = format!(
        "conformance of {subject}: {} requirements, {} passed, {} failed, {} skipped\n",
        findings.len(),
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Skipped)
    );
    let width = findings.iter().map(|f| f.id.len()).max().unwrap_or(0);
    for finding in findings {
        let _ = writeln!(
            out,
            "{:<10} {:<7} {:<width$}  {}",
            finding.tier.as_str(),
            finding.status.as_str(),
            finding.id,
            finding.title
        );
        if let Some(detail) = &finding.detail {
            let _ = writeln!(out, "{:<19}{:<width$}  ↳ {detail}", "", "");
        }
    }
    let failed: Vec<&str> = findings
        .iter()
        .filter(|f| f.fails_verdict())
        .map(|f| f.id.as_str())
        .collect();
    let _ = write!(
        out,
        "verdict: {}",
        if failed.is_empty() {
            "PASS".to_owned()
        } else {
            format!("FAIL ({})", failed.join(", "))
        }
    );
    out
}

/// What `Report::assert_conforms` panics with.
pub(crate) fn did_not_conform(subject: &str, table: &str) -> String {
    format!("{subject} did not keep the delegation contract:\n{table}")
}
