//! Fault injection over the provider seam: `start`, the result and `dispose`
//! each succeed, fail, hang or panic, crossed with a cancellation at every
//! point of the call (none, before start, during start, during the run, after
//! the result): 4 × 4 × 4 × 5 = 320 cells.
//!
//! Every cell asserts the exact text the model reads (or that the call is
//! still pending, for a hang nothing cancels), that `dispose` ran exactly once
//! when a run was published, which children are still live, that no task is
//! left running, and that the parent's next delegation on the same registry
//! succeeds. An oracle written from the lifecycle's documented rules gives
//! the expected outcome; a snapshot per column pins the texts.
//!
//! Time is paused (tokio's auto-advance), so the release grace and the bound
//! on "still pending" pass instantly and deterministically: these bounds say
//! nothing about speed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fmt::Write as _;
use std::time::Duration;

use common::{alive_tasks, exec, exec_with, task};
use dsh_subagent::SubagentService;
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{
    DEFAULT_REPLY, DisposeBehavior, ResultBehavior, START_ABORTED, ScriptedProvider, StartBehavior,
};
use dsh_tool_subagent::{RELEASE_GRACE, SubagentToolConfig, SubagentToolPlugin, wording};
use dsh_tools::{CancellationToken, ToolRegistry};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Succeed,
    Fail,
    Hang,
    Panic,
}

const FAULTS: [Fault; 4] = [Fault::Succeed, Fault::Fail, Fault::Hang, Fault::Panic];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CancelAt {
    None,
    BeforeStart,
    /// While `start` is pending (held at a gate, then released).
    DuringStart,
    /// While the published run's result is pending (held at a gate).
    DuringRun,
    /// Once the result settled, while `dispose` is pending (held at a gate).
    AfterResult,
}

#[derive(Clone, Copy, Debug)]
struct Cell {
    start: Fault,
    result: Fault,
    dispose: Fault,
    cancel: CancelAt,
}

/// What a cell must show.
#[derive(Debug, PartialEq, Eq)]
struct Expected {
    /// The model's text, or `None` when the call must still be pending.
    text: Option<String>,
    published: usize,
    live: usize,
}

const START_FAILED: &str = "scripted start failed";
const RESULT_FAILED: &str = "scripted result failed";
const DISPOSE_FAILED: &str = "scripted dispose failed";
const OK_REPLY: &str = "the parent is still usable";

fn panicked(stage: &str, what: &str) -> String {
    wording::provider_panicked(stage, &format!("scripted subagent {what} panicked"))
}

/// The lifecycle's rules, written out (docs/contract.md, "Execution" and "Results", and
/// `lifecycle::delegate`).
fn oracle(cell: Cell) -> Expected {
    let Cell {
        start,
        result,
        dispose,
        cancel,
    } = cell;
    let refused = |text: String| Expected {
        text: Some(format!("Error: {text}")),
        published: 0,
        live: 0,
    };
    if cancel == CancelAt::BeforeStart {
        return refused("tool call aborted before dispatch".to_owned());
    }
    // The start stage.
    match (start, cancel) {
        (Fault::Succeed, CancelAt::DuringStart) => return refused(START_ABORTED.to_owned()),
        (Fault::Hang, CancelAt::DuringStart) => return refused(wording::START_ABANDONED.to_owned()),
        (Fault::Hang, _) => {
            return Expected {
                text: None,
                published: 0,
                live: 0,
            };
        }
        (Fault::Fail, _) => return refused(START_FAILED.to_owned()),
        (Fault::Panic, _) => return refused(panicked("start", "start")),
        (Fault::Succeed, _) => {}
    }
    let live = usize::from(matches!(dispose, Fault::Hang | Fault::Panic));
    let cancelled_run = format!(
        "{}\nPartial output before the run ended:\n{DEFAULT_REPLY}",
        wording::stop_headline(&dsh_subagent_api::StopReason::Aborted)
    );
    // The result stage: Ok(text) for a success, Err(message) for a failure.
    let run: Result<String, String> = match (result, cancel) {
        (Fault::Succeed, CancelAt::DuringRun) => Err(cancelled_run),
        (Fault::Succeed, _) => Ok(DEFAULT_REPLY.to_owned()),
        (Fault::Fail, _) => Err(RESULT_FAILED.to_owned()),
        (Fault::Panic, _) => Err(panicked("the run", "result")),
        // A hung result after a cancellation: the release runs at once and the
        // run reads as cancelled, with nothing to show.
        (Fault::Hang, CancelAt::DuringRun) => Err("subagent run was cancelled".to_owned()),
        (Fault::Hang, _) => {
            return Expected {
                text: None,
                published: 1,
                live,
            };
        }
    };
    let cancelled = matches!(cancel, CancelAt::DuringRun | CancelAt::AfterResult);
    let released: Result<(), String> = match dispose {
        Fault::Succeed => Ok(()),
        Fault::Fail => Err(DISPOSE_FAILED.to_owned()),
        Fault::Panic => Err(panicked("dispose", "dispose")),
        Fault::Hang if cancelled => Err(wording::RELEASE_ABANDONED.to_owned()),
        Fault::Hang => {
            return Expected {
                text: None,
                published: 1,
                live,
            };
        }
    };
    let text = match (run, released) {
        (Ok(text), Ok(())) => text,
        (Ok(_), Err(dispose)) | (Err(dispose), Ok(())) => format!("Error: {dispose}"),
        (Err(run), Err(dispose)) => format!(
            "Error: {}",
            wording::run_and_dispose_failed(&run, wording::RunHeadline::Absent, &dispose)
        ),
    };
    Expected {
        text: Some(text),
        published: 1,
        live,
    }
}

/// The call's bound when nothing cancels a hang: well past the release grace.
fn pending_bound() -> Duration {
    RELEASE_GRACE * 12
}

/// Runs one cell on the current (paused-time) runtime and checks it.
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
async fn run_cell(cell: Cell) -> String {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let gate = Gate::new();
    let mut builder = ScriptedProvider::builder("mock")
        .on_start(match cell.start {
            Fault::Succeed => StartBehavior::Publish,
            Fault::Fail => StartBehavior::Fail(START_FAILED.into()),
            Fault::Hang => StartBehavior::Hang,
            Fault::Panic => StartBehavior::Panic,
        })
        .on_result(match cell.result {
            Fault::Succeed => ResultBehavior::Settle,
            Fault::Fail => ResultBehavior::Fail(RESULT_FAILED.into()),
            Fault::Hang => ResultBehavior::Hang,
            Fault::Panic => ResultBehavior::Panic,
        })
        .on_dispose(match cell.dispose {
            Fault::Succeed => DisposeBehavior::Release,
            Fault::Fail => DisposeBehavior::Fail(DISPOSE_FAILED.into()),
            Fault::Hang => DisposeBehavior::Hang,
            Fault::Panic => DisposeBehavior::Panic,
        });
    builder = match cell.cancel {
        CancelAt::DuringStart => builder.hold_start(gate.clone()),
        CancelAt::DuringRun => builder.hold_result(gate.clone()),
        CancelAt::AfterResult => builder.hold_dispose(gate.clone()),
        CancelAt::None | CancelAt::BeforeStart => builder,
    };
    let provider = builder.build();
    let healthy = ScriptedProvider::builder("healthy").reply(OK_REPLY).build();
    let _faulty = service.register_provider(provider.clone()).unwrap();
    let _healthy = service.register_provider(healthy.clone()).unwrap();
    let _tool = SubagentToolPlugin::apply(SubagentToolConfig::new("mock"), &service, &tools).unwrap();
    let _ok_tool = SubagentToolPlugin::apply(
        SubagentToolConfig::new("healthy").tool_name("subagent_ok"),
        &service,
        &tools,
    )
    .unwrap();

    let baseline = alive_tasks();
    let cancel = CancellationToken::new();
    if cell.cancel == CancelAt::BeforeStart {
        cancel.cancel();
    }
    // Boxed, so that dropping it below really drops the call.
    let mut call = Box::pin(tools.call("subagent", task(), exec_with(cancel.clone())));
    let held = cell.cancel != CancelAt::None && cell.cancel != CancelAt::BeforeStart;
    let trigger = async {
        if !held {
            return std::future::pending().await;
        }
        gate.arrived(1).await;
        cancel.cancel();
        gate.open();
    };
    let driven = async {
        tokio::select! {
            biased;
            result = &mut call => result,
            () = trigger => (&mut call).await,
        }
    };
    let outcome = tokio::time::timeout(pending_bound(), driven).await;
    // Abandon a pending call the way a harness would: drop it. A hold
    // nobody released (its point was never reached) must not act as a hang
    // in the release that follows.
    drop(call);
    gate.open();
    let text = outcome.ok().map(|result| {
        assert_eq!(result.is_error, result.text.starts_with("Error: "), "{cell:?}");
        result.text
    });

    // Whatever was left (an abandoned call's release) finishes in bounded time.
    tokio::time::timeout(pending_bound(), async {
        while alive_tasks() != baseline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{cell:?}: a task was left running ({} > {baseline})", alive_tasks()));

    let stats = provider.stats();
    let observed = Expected {
        text,
        published: stats.published(),
        live: stats.live(),
    };
    let expected = oracle(cell);
    assert_eq!(observed, expected, "{cell:?}");
    assert_eq!(
        stats.disposes(),
        stats.published(),
        "{cell:?}: dispose must run exactly once per published run"
    );

    // The parent stays usable: the next delegation on the same registry succeeds.
    let next = tools.call("subagent_ok", task(), exec()).await;
    assert_eq!(next.text, OK_REPLY, "{cell:?}");
    assert_eq!(healthy.stats().live(), 0);

    format!(
        "start={:?} result={:?} dispose={:?} -> {} (published {}, live {})",
        cell.start,
        cell.result,
        cell.dispose,
        observed
            .text
            .as_deref()
            .map_or("PENDING".to_owned(), |text| format!("{text:?}")),
        observed.published,
        observed.live
    )
}

async fn column(cancel: CancelAt) -> String {
    let mut table = String::new();
    for start in FAULTS {
        for result in FAULTS {
            for dispose in FAULTS {
                let line = run_cell(Cell {
                    start,
                    result,
                    dispose,
                    cancel,
                })
                .await;
                writeln!(table, "{line}").unwrap();
            }
        }
    }
    table
}

#[tokio::test(start_paused = true)]
async fn no_cancellation() {
    insta::assert_snapshot!("cancel_none", column(CancelAt::None).await);
}

#[tokio::test(start_paused = true)]
async fn cancelled_before_start() {
    insta::assert_snapshot!("cancel_before_start", column(CancelAt::BeforeStart).await);
}

#[tokio::test(start_paused = true)]
async fn cancelled_during_start() {
    insta::assert_snapshot!("cancel_during_start", column(CancelAt::DuringStart).await);
}

#[tokio::test(start_paused = true)]
async fn cancelled_during_the_run() {
    insta::assert_snapshot!("cancel_during_run", column(CancelAt::DuringRun).await);
}

#[tokio::test(start_paused = true)]
async fn cancelled_after_the_result() {
    insta::assert_snapshot!("cancel_after_result", column(CancelAt::AfterResult).await);
}

/// The new texts, pinned on their own.
#[test]
fn abandonment_wording() {
    insta::assert_snapshot!(
        "abandonment_wording",
        format!("{}\n{}", wording::START_ABANDONED, wording::RELEASE_ABANDONED)
    );
}
