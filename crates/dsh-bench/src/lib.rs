//! Benchmarks of the `subagent` delegation path.
//!
//! Every figure is measured in the same run as a **floor**: a bare
//! `tokio::spawn` + oneshot round trip on the same runtime flavor, and is
//! reported as a ratio to it. Both flavors are measured, because on a 2-core
//! machine a multi-thread spawn costs a cross-thread wake-up (~15–25 µs) and a
//! current-thread one a fraction of a microsecond: a ratio means nothing
//! without its flavor.
//!
//! What is measured ([`run`]):
//! - a foreground delegation through the real [`ToolRegistry::call`](dsh_tools::ToolRegistry::call) →
//!   `subagent` tool → [`SubagentService`](dsh_subagent::SubagentService) →
//!   [`ScriptedProvider`](dsh_subagent_testing::scripted::ScriptedProvider) that settles
//!   at once, each spawned as its own task and answered over a oneshot exactly
//!   like the floor: sequentially and with 1,000 / 10,000 / 100,000 in flight;
//! - where the 10,000-concurrent row's time goes: the same calls with the
//!   library taken out (the harness alone, then through the registry to a
//!   tool that answers at once) and the scripted child alone, each against
//!   the same floor, and what is left of the delegation without them: the
//!   library's own share (`parts`);
//! - bytes per in-flight delegation: peak RSS growth (`VmHWM` minus the
//!   `VmRSS` baseline after warm-up) with N delegations held in flight at a
//!   [`Gate`], divided by N, in a fresh child process per flavor;
//! - cancellation latency: from `cancel()` to the tool result returned, dispose
//!   finished (the lifecycle awaits dispose before it returns);
//! - catalog render time ([`dsh_tool_catalog::generate`]);
//! - a 1 MB and a 10 MB answer through `subagent`, cut to the result budget
//!   and kept whole, against one copy of the answer, and the peak memory
//!   of delivering the 10 MB one ([`answer`]);
//! - the peak memory of the real `dsh run` whose child answers 10 MB over a
//!   local HTTP stream, end to end ([`answer_http`]);
//! - one turn of 100 tool results fitted into a context window's room
//!   ([`context`]);
//! - one delegation to a freshly spawned `dsh acp` child against spawning the
//!   same binary with `--version` ([`acp`]);
//! - `dsh acp` with the Subagents RFD: a delegation whose child is announced
//!   and streamed against the same without, and a per-child cancel against
//!   the connection's own round trip ([`acp_subagents`]);
//! - `dsh run`'s live view: its frames on a terminal, and its cost with
//!   stderr a pipe ([`live`]);
//! - what recording a delegation into a cassette costs ([`recording`]) and
//!   what writing its transcripts costs ([`durable`]), on the scripted model
//!   and on one that takes 1 ms a call;
//! - `dsh run --resume` of a crashed tree of 1,000 agents: the time to its
//!   first new request and its peak RSS ([`resume`]).
//!
//! Performance is shown here, never by timed tests.

#![forbid(unsafe_code)]

pub mod acp;
pub mod acp_subagents;
pub mod answer;
pub mod answer_http;
pub mod cassette;
pub mod context;
pub mod delegation;
pub mod dsh;
pub mod durable;
mod fixture;
pub mod limits;
pub mod live;
mod memory;
mod parts;
pub mod recording;
mod report;
pub mod resume;
mod resume_server;
pub mod spans;
pub mod tree;

pub use memory::in_flight_child;
pub use report::{Flavor, Plan, Report, Row};

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::ResultBehavior;
use dsh_tools::CancellationToken;
use tokio::sync::oneshot;

use fixture::{Caller, Fixture, check, spawn_calls};
use memory::{memory_rows, status_kb, status_kb_from};

/// The reply of the benchmark provider; a delegation that does not return it failed.
const REPLY: &str = "bench reply";
/// The task every bench delegation gives its child.
const PROMPT: &str = "answer at once";

/// The floor: spawn a task that answers over a oneshot, await the answer.
pub(crate) async fn floor_sequential(count: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..count {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(());
        });
        let _ = rx.await;
    }
    start.elapsed() / count as u32
}

/// The same shape with a delegation in the task.
pub(crate) async fn delegate_sequential(caller: &Caller, count: usize) -> Result<Duration, String> {
    let start = Instant::now();
    for _ in 0..count {
        let rx = caller.spawn(CancellationToken::new());
        check(&rx.await.map_err(|_| "a delegation task died".to_owned())?)?;
    }
    Ok(start.elapsed() / count as u32)
}

pub(crate) async fn floor_concurrent(count: usize) -> Duration {
    let start = Instant::now();
    let mut answers = Vec::with_capacity(count);
    for _ in 0..count {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(());
        });
        answers.push(rx);
    }
    for answer in answers {
        let _ = answer.await;
    }
    start.elapsed() / count as u32
}

pub(crate) async fn delegate_concurrent(caller: &Caller, count: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let answers = spawn_calls(caller, count);
    for answer in answers {
        check(&answer.await.map_err(|_| "a delegation task died".to_owned())?)?;
    }
    Ok(start.elapsed() / count as u32)
}

/// From `cancel()` to the tool's result, for delegations held live at a gate.
async fn cancellation(samples: usize) -> Result<Vec<Duration>, String> {
    let gate = Gate::new();
    let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Gated(gate.clone())))?;
    let caller = fixture.caller();
    let mut latencies = Vec::with_capacity(samples);
    for done in 0..samples {
        let cancel = CancellationToken::new();
        let rx = caller.spawn(cancel.clone());
        // The child is live once its result waits at the (never opened) gate.
        gate.arrived(done + 1).await;
        let start = Instant::now();
        cancel.cancel();
        let result = rx.await.map_err(|_| "a delegation task died".to_owned())?;
        latencies.push(start.elapsed());
        if !result.text.starts_with("Error: subagent run was cancelled") {
            return Err(format!("a cancelled delegation read: {}", result.text));
        }
        let stats = fixture.provider.stats();
        if stats.disposes() != done + 1 || stats.live() != 0 {
            return Err("a cancelled delegation returned before its dispose finished".to_owned());
        }
    }
    latencies.sort();
    Ok(latencies)
}

/// The floor of a cancellation: a task parked on a token answers over a
/// oneshot once the token is cancelled. The same wake-ups as a cancelled
/// delegation (bench → task, task → bench), nothing else.
async fn floor_cancellation(samples: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(samples);
    for _ in 0..samples {
        let cancel = CancellationToken::new();
        let (parked_tx, parked) = oneshot::channel();
        let (tx, rx) = oneshot::channel();
        let token = cancel.clone();
        tokio::spawn(async move {
            let cancelled = token.cancelled();
            let _ = parked_tx.send(());
            cancelled.await;
            let _ = tx.send(());
        });
        let _ = parked.await;
        // Let the task reach its wait, as a delegation reaches its gate.
        tokio::task::yield_now().await;
        let start = Instant::now();
        cancel.cancel();
        let _ = rx.await;
        latencies.push(start.elapsed());
    }
    latencies.sort();
    latencies
}

pub(crate) fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

pub(crate) fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

pub(crate) fn ratio(ours: f64, floor: f64) -> f64 {
    if floor > 0.0 { ours / floor } else { f64::INFINITY }
}

pub(crate) fn yes_no(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// The most a delegation may cost against its floor: 10× in general, and
/// 6× for 10,000 concurrent on a current-thread runtime, the figure the
/// concurrent path is held to.
fn floor_bound(concurrent: Option<usize>, flavor: Flavor) -> f64 {
    match (concurrent, flavor) {
        (Some(TARGET_CONCURRENT), Flavor::CurrentThread) => 6.0,
        _ => 10.0,
    }
}

/// The concurrent count the concurrent path is held to ([`floor_bound`]).
const TARGET_CONCURRENT: usize = 10_000;

/// One per-delegation row: target ≤ 3 µs and at most `bound` × the floor.
fn delegation_row(figure: String, flavor: Flavor, ours: Duration, floor: Duration, bound: f64) -> Row {
    let (ours, floor) = (micros(ours), micros(floor));
    let ratio = ratio(ours, floor);
    Row {
        figure,
        flavor: flavor.name(),
        ours: format!("{ours:.2} µs"),
        floor: format!("{floor:.2} µs"),
        ratio: format!("{ratio:.1}×"),
        target: format!(
            "≤ 3 µs: {}; ≤ {bound}× floor: {}",
            yes_no(ours <= 3.0),
            yes_no(ratio <= bound)
        ),
    }
}

/// The delegation rows of both flavors: sequential, concurrent, their
/// parts and the cancellation (`--only delegation`).
pub fn delegation_rows(plan: &Plan) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for flavor in Flavor::ALL {
        rows.extend(run_flavor(plan, flavor)?);
    }
    Ok(rows)
}

/// Runs the plan on both flavors and returns the table.
pub fn run(plan: &Plan) -> Result<Report, String> {
    let mut rows = delegation_rows(plan)?;
    if plan.in_flight > 0 {
        for flavor in Flavor::ALL {
            rows.extend(memory_rows(plan.in_flight, flavor)?);
        }
    }
    for flavor in Flavor::ALL {
        rows.extend(limits::rows(plan, flavor)?);
    }
    if plan.in_flight > 0 {
        for flavor in Flavor::ALL {
            rows.push(limits::queued_memory_row(plan.in_flight.min(10_000), flavor)?);
        }
    }
    for flavor in Flavor::ALL {
        rows.extend(context::rows(plan, flavor)?);
    }
    for flavor in Flavor::ALL {
        rows.extend(answer::rows(plan, flavor)?);
        if plan.in_flight > 0 {
            rows.push(answer::memory_row(flavor)?);
        }
    }
    if plan.in_flight > 0 {
        rows.push(answer_http::memory_row_or_failed());
    }
    for flavor in Flavor::ALL {
        rows.extend(cassette::rows(plan, flavor, plan.in_flight > 0)?);
    }
    for flavor in Flavor::ALL {
        rows.extend(durable::rows(plan, flavor)?);
    }
    rows.push(catalog_row(plan.catalog_samples)?);
    if plan.tree {
        rows.extend(tree::rows()?);
        rows.extend(resume::rows(plan.resume_runs)?);
    }
    if plan.live_runs > 0 {
        rows.extend(live::rows(plan.live_runs)?);
    }
    if plan.acp_samples > 0 {
        rows.extend(acp::rows(plan.acp_samples).unwrap_or_else(|error| vec![acp::failed_row(&error)]));
        rows.extend(
            acp_subagents::rows(plan.acp_samples).unwrap_or_else(|error| vec![acp_subagents::failed_row(&error)]),
        );
    }
    Ok(Report {
        machine: machine(),
        rows,
    })
}

fn run_flavor(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let fixture = Fixture::new(|b| b)?;
        let caller = fixture.caller();
        // Warm up the allocator, the runtime and the code paths.
        delegate_concurrent(&caller, plan.sequential.max(1_000)).await?;
        floor_concurrent(plan.sequential.max(1_000)).await;

        let mut rows = Vec::new();
        let (mut floors, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..plan.rounds {
            floors.push(floor_sequential(plan.sequential).await);
            ours.push(delegate_sequential(&caller, plan.sequential).await?);
        }
        let sequential_floor = median(floors);
        let bare = median(ours);
        rows.push(delegation_row(
            "delegation, sequential".to_owned(),
            flavor,
            bare,
            sequential_floor,
            floor_bound(None, flavor),
        ));
        rows.push(spans_row(plan, flavor, &caller, bare).await?);
        for &count in &plan.concurrent {
            let (mut floors, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..plan.rounds {
                floors.push(floor_concurrent(count).await);
                ours.push(delegate_concurrent(&caller, count).await?);
            }
            rows.push(delegation_row(
                format!("delegation, {count} concurrent"),
                flavor,
                median(ours),
                median(floors),
                floor_bound(Some(count), flavor),
            ));
        }
        // Where the time of the concurrent target's row goes (at the plan's
        // largest count up to it).
        let parts_count = plan
            .concurrent
            .iter()
            .filter(|&&count| count <= TARGET_CONCURRENT)
            .max();
        if let Some(&count) = parts_count {
            rows.extend(parts::rows(&fixture, count, plan.rounds, flavor).await?);
        }
        let latencies = cancellation(plan.cancel_samples).await?;
        let floor_latencies = floor_cancellation(plan.cancel_samples).await;
        for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
            let latency = micros(percentile(&latencies, p));
            let floor = micros(percentile(&floor_latencies, p));
            rows.push(Row {
                figure: format!("cancel → result, dispose done ({name})"),
                flavor: flavor.name(),
                ours: format!("{latency:.2} µs"),
                floor: format!("{floor:.2} µs"),
                ratio: format!("{:.1}×", ratio(latency, floor)),
                target: format!("< 100 µs: {}", yes_no(latency < 100.0)),
            });
        }
        if fixture.provider.stats().live() != 0 {
            return Err("a benchmark child was left running".to_owned());
        }
        Ok(rows)
    })
}

/// The sequential delegation with a span-recording subscriber on its tasks:
/// what recording a delegation's spans and events costs over none.
async fn spans_row(plan: &Plan, flavor: Flavor, caller: &Caller, bare: Duration) -> Result<Row, String> {
    let (dispatch, recorded) = spans::recording();
    let traced = Caller {
        dispatch: Some(dispatch),
        ..caller.clone()
    };
    delegate_sequential(&traced, plan.sequential.min(1_000)).await?;
    let (start_spans, start_events) = (recorded.spans.load(Relaxed), recorded.events.load(Relaxed));
    let (mut floors, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        floors.push(floor_sequential(plan.sequential).await);
        ours.push(delegate_sequential(&traced, plan.sequential).await?);
    }
    let calls = (plan.rounds * plan.sequential).max(1) as f64;
    let spans = (recorded.spans.load(Relaxed) - start_spans) as f64 / calls;
    let events = (recorded.events.load(Relaxed) - start_events) as f64 / calls;
    if spans < 1.0 {
        return Err("the span-recording subscriber saw no span".to_owned());
    }
    let (ours, floor) = (micros(median(ours)), micros(median(floors)));
    Ok(Row {
        figure: "delegation, sequential, spans recorded".to_owned(),
        flavor: flavor.name(),
        ours: format!("{ours:.2} µs"),
        floor: format!("{floor:.2} µs"),
        ratio: format!("{:.1}×", ratio(ours, floor)),
        target: format!(
            "(none): {:+.2} µs per delegation over no subscriber, for {spans:.0} span + {events:.0} events",
            ours - micros(bare)
        ),
    })
}

fn catalog_row(samples: usize) -> Result<Row, String> {
    let mut times = Vec::with_capacity(samples);
    let mut bytes = 0;
    for _ in 0..samples.max(1) {
        let start = Instant::now();
        let page = dsh_tool_catalog::generate().map_err(|error| error.to_string())?;
        times.push(start.elapsed());
        bytes = page.len();
    }
    Ok(Row {
        figure: format!("catalog render, generate() ({bytes} B page)"),
        flavor: "-",
        ours: format!("{:.1} µs", micros(median(times))),
        floor: "- (synchronous)".to_owned(),
        ratio: "-".to_owned(),
        target: "(none)".to_owned(),
    })
}

/// Cores, CPU model and memory of this machine.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|line| {
                line.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, m)| m.trim().to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let memory = status_kb_from("/proc/meminfo", "MemTotal").map_or_else(
        |_| "unknown memory".to_owned(),
        |kb| format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0),
    );
    let mut text = String::new();
    let _ = write!(text, "{cores} cores (nproc), {cpu}, {memory}");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smoke_plan_runs_every_figure_on_both_flavors() {
        let report = run(&Plan::smoke()).unwrap();
        let text = report.to_string();
        for figure in [
            "delegation, sequential",
            "delegation, sequential, spans recorded",
            "50 concurrent",
            "cancel → result",
            "catalog render",
            "limits configured",
            "through max_concurrent = 8",
            "the harness alone",
            "a tool that answers at once",
            "the scripted child alone",
            "the library's own share",
        ] {
            assert!(text.contains(figure), "{figure} missing from\n{text}");
        }
        assert!(text.contains("current-thread") && text.contains("multi-thread"));
        for flavor in Flavor::ALL {
            let library = report
                .rows
                .iter()
                .find(|row| row.flavor == flavor.name() && row.figure.contains("the library's own share"))
                .unwrap_or_else(|| panic!("no library row on {}:\n{text}", flavor.name()));
            let micros = library.ours.strip_suffix(" µs").and_then(|n| n.parse::<f64>().ok());
            assert!(micros.is_some_and(f64::is_finite), "{library:?}");
            assert!(library.ratio.ends_with('×'), "{library:?}");
        }
    }
}
