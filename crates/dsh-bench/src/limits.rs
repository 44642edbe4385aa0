//! Bounded delegation: what the admission gate costs a delegation that
//! never waits, how fast calls drain through a small `max_concurrent`, and
//! what a call waiting in the queue holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dsh_subagent::{Limits, SubagentEvent};
use dsh_subagent_api::{ChildCount, QueueLimit};
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::ResultBehavior;

use crate::memory::child_numbers;
use crate::{
    Fixture, Flavor, Plan, Row, check, delegate_concurrent, delegate_sequential, floor_concurrent, median, micros,
    ratio, spawn_calls, status_kb, yes_no,
};

/// dsh's default `max_concurrent`.
const EIGHT: ChildCount = ChildCount::from_non_zero(std::num::NonZeroUsize::new(8).expect("8 is not zero"));

/// The limits `dsh` sets by default, with room for every call a figure
/// makes: the gate is on, and never refuses.
fn dsh_like(max_queued: usize) -> Limits {
    Limits::none()
        .with_max_concurrent(EIGHT)
        .with_max_queued(QueueLimit::new(max_queued))
        .with_max_children(ChildCount::MAX)
}

/// Calls drained through `max_concurrent = 8`.
const THROUGH: usize = 10_000;

/// The limits rows of one flavor: an uncontended delegation with limits
/// against one without (interleaved rounds), and 10,000 calls through
/// eight slots against the same calls without a gate.
pub fn rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let bare = Fixture::new(|b| b)?;
        let gated = Fixture::limited(dsh_like(THROUGH), |b| b)?;
        let (bare_caller, gated_caller) = (bare.caller(), gated.caller());
        delegate_concurrent(&bare_caller, 1_000).await?;
        delegate_concurrent(&gated_caller, 1_000).await?;

        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..plan.rounds {
            without.push(delegate_sequential(&bare_caller, plan.sequential).await?);
            with.push(delegate_sequential(&gated_caller, plan.sequential).await?);
        }
        let (with, without) = (micros(median(with)), micros(median(without)));
        let uncontended = ratio(with, without);
        let mut rows = vec![Row {
            figure: "delegation, sequential, limits configured (8 running, never waits)".to_owned(),
            flavor: flavor.name(),
            ours: format!("{with:.2} µs"),
            floor: format!("{without:.2} µs (no limits)"),
            ratio: format!("{uncontended:.2}×"),
            target: format!("≤ 1.10× no limits: {}", yes_no(uncontended <= 1.10)),
        }];

        let count = if plan.sequential >= 1_000 { THROUGH } else { 50 };
        let (mut floors, mut ungated, mut through) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..plan.rounds {
            floors.push(floor_concurrent(count).await);
            ungated.push(delegate_concurrent(&bare_caller, count).await?);
            through.push(delegate_concurrent(&gated_caller, count).await?);
        }
        let (floor, ungated, through) = (micros(median(floors)), micros(median(ungated)), micros(median(through)));
        let per_second = 1e6 / through;
        rows.push(Row {
            figure: format!("{count} calls through max_concurrent = 8 (per call)"),
            flavor: flavor.name(),
            ours: format!("{through:.2} µs ({per_second:.0} calls/s)"),
            floor: format!("{floor:.2} µs"),
            ratio: format!("{:.1}×", ratio(through, floor)),
            target: format!(
                "(none): {:.2}× the same calls without limits ({ungated:.2} µs)",
                ratio(through, ungated)
            ),
        });
        if gated.provider.stats().live() != 0 || bare.provider.stats().live() != 0 {
            return Err("a benchmark child was left running".to_owned());
        }
        Ok(rows)
    })
}

/// The child-process half of the queued-memory figure: eight delegations
/// held running at a gate and `count` more waiting in the queue; prints
/// `<baseline kB> <peak kB>`.
pub fn queued_child(count: usize, flavor: Flavor) -> Result<String, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let gate = Gate::new();
        let fixture = Fixture::limited(dsh_like(count), |b| b.on_result(ResultBehavior::Gated(gate.clone())))?;
        let queued = Arc::new(AtomicUsize::new(0));
        let counter = queued.clone();
        let _subscription = fixture.service.subscribe(Arc::new(move |event: &SubagentEvent| {
            if matches!(event, SubagentEvent::RunQueued(_)) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
        let caller = fixture.caller();
        let warm = Fixture::new(|b| b)?;
        delegate_concurrent(&warm.caller(), 1_000).await?;
        let baseline = status_kb("VmRSS")?;
        let answers = spawn_calls(&caller, count + 8);
        gate.arrived(8).await;
        let started = Instant::now();
        while queued.load(Ordering::Relaxed) < count {
            if started.elapsed() > Duration::from_secs(60) {
                return Err("the calls never all queued".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let peak = status_kb("VmHWM")?;
        gate.open();
        for answer in answers {
            check(&answer.await.map_err(|_| "a delegation task died".to_owned())?)?;
        }
        if fixture.provider.stats().live() != 0 {
            return Err("a held child was left running".to_owned());
        }
        Ok(format!("{baseline} {peak}"))
    })
}

/// Bytes per call waiting in the queue, beside bytes per delegation held in
/// flight, each in a fresh child process.
pub fn queued_memory_row(count: usize, flavor: Flavor) -> Result<Row, String> {
    let per_call = |baseline: u64, peak: u64| peak.saturating_sub(baseline) as f64 * 1024.0 / count as f64;
    let [baseline, peak] = child_numbers("--queued", count, flavor)?;
    let queued = per_call(baseline, peak);
    let [baseline, _held, peak, _after] = child_numbers("--in-flight", count, flavor)?;
    let running = per_call(baseline, peak);
    let beyond = queued - running;
    Ok(Row {
        figure: format!("bytes per queued call ({count} waiting)"),
        flavor: flavor.name(),
        ours: format!("{queued:.0} B"),
        floor: format!("{running:.0} B per in-flight delegation"),
        ratio: format!("{:.2}×", ratio(queued, running)),
        target: format!(
            "≤ 512 B beyond a running one ({beyond:+.0} B): {}",
            yes_no(beyond <= 512.0)
        ),
    })
}
