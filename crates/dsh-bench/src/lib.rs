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
//! - a foreground delegation through the real [`ToolRegistry::call`] →
//!   `subagent` tool → [`SubagentService`] → [`ScriptedProvider`] that settles
//!   at once, each spawned as its own task and answered over a oneshot exactly
//!   like the floor: sequentially and with 1,000 / 10,000 / 100,000 in flight;
//! - where the 10,000-concurrent row's time goes: the same calls with the
//!   library taken out (the harness alone, then through the registry to a
//!   tool that answers at once) and the scripted child alone, each against
//!   the same floor (`parts`);
//! - bytes per in-flight delegation: peak RSS growth (`VmHWM` minus the
//!   `VmRSS` baseline after warm-up) with N delegations held in flight at a
//!   [`Gate`], divided by N, in a fresh child process per flavor;
//! - cancellation latency: from `cancel()` to the tool result returned, dispose
//!   finished (the lifecycle awaits dispose before it returns);
//! - catalog render time ([`dsh_tool_catalog::generate`]);
//! - a 1 MB and a 10 MB answer through `subagent`, cut to the result budget
//!   and kept whole, against one copy of the answer, and the peak memory
//!   of delivering the 10 MB one ([`answer`]);
//! - one turn of 100 tool results fitted into a context window's room
//!   ([`context`]);
//! - one delegation to a freshly spawned `dsh acp` child against spawning the
//!   same binary with `--version` ([`acp`]).
//!
//! Performance is shown here, never by timed tests.

#![forbid(unsafe_code)]

pub mod acp;
pub mod answer;
pub mod context;
pub mod limits;
mod parts;
pub mod spans;

use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use dsh_subagent::{Limits, ProviderRegistration, SubagentService};
use dsh_subagent_api::Lineage;
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::{ResultBehavior, ScriptedProvider, ScriptedProviderBuilder};
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use futures::FutureExt as _;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing::instrument::WithSubscriber;

/// The reply of the benchmark provider; a delegation that does not return it failed.
const REPLY: &str = "bench reply";
/// The task every bench delegation gives its child.
const PROMPT: &str = "answer at once";

/// A tokio runtime flavor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `new_current_thread`: everything on the calling thread.
    CurrentThread,
    /// `new_multi_thread` with one worker per available core.
    MultiThread,
}

impl Flavor {
    /// Both flavors, current-thread first.
    pub const ALL: [Flavor; 2] = [Flavor::CurrentThread, Flavor::MultiThread];

    /// The flavor's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::CurrentThread => "current-thread",
            Self::MultiThread => "multi-thread",
        }
    }

    /// Parses a command-line name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|flavor| flavor.name() == name)
    }

    /// A runtime of this flavor with the time driver (the cancellation path may need it).
    pub fn runtime(self) -> Result<tokio::runtime::Runtime, String> {
        let mut builder = match self {
            Self::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Self::MultiThread => tokio::runtime::Builder::new_multi_thread(),
        };
        builder.enable_time().build().map_err(|error| error.to_string())
    }
}

/// How much to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Rounds per figure; each figure reports its median round.
    pub rounds: usize,
    /// Delegations per sequential round.
    pub sequential: usize,
    /// In-flight counts of the concurrent figures.
    pub concurrent: Vec<usize>,
    /// Cancellations measured per flavor.
    pub cancel_samples: usize,
    /// Delegations held in flight for the memory figure (0: skip it).
    pub in_flight: usize,
    /// Catalog renders measured.
    pub catalog_samples: usize,
    /// Delegations to a `dsh acp` child measured per flavor (0: skip them).
    pub acp_samples: usize,
}

impl Plan {
    /// The figures `docs/benchmarks.md` reports.
    pub fn full() -> Self {
        Self {
            rounds: 7,
            sequential: 20_000,
            concurrent: vec![1_000, 10_000, 100_000],
            cancel_samples: 5_000,
            in_flight: 100_000,
            catalog_samples: 200,
            acp_samples: 30,
        }
    }

    /// A smaller run of the same figures, for a quick look.
    pub fn quick() -> Self {
        Self {
            rounds: 3,
            sequential: 2_000,
            concurrent: vec![1_000, 10_000],
            cancel_samples: 500,
            in_flight: 10_000,
            catalog_samples: 20,
            acp_samples: 5,
        }
    }

    /// A run small enough for a test (no memory child process).
    pub fn smoke() -> Self {
        Self {
            rounds: 1,
            sequential: 20,
            concurrent: vec![50],
            cancel_samples: 10,
            in_flight: 0,
            catalog_samples: 1,
            acp_samples: 0,
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub figure: String,
    /// The runtime flavor, or `-`.
    pub flavor: &'static str,
    /// Our figure, with its unit.
    pub ours: String,
    /// The floor of the same shape, with its unit, or `-`.
    pub floor: String,
    /// Ours divided by the floor, or `-`.
    pub ratio: String,
    /// The target and whether it is met.
    pub target: String,
}

/// The measured table and the machine it ran on.
#[derive(Clone, Debug)]
pub struct Report {
    /// The machine: cores, CPU model, memory.
    pub machine: String,
    /// The rows, in print order.
    pub rows: Vec<Row>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "machine: {}", self.machine)?;
        writeln!(f)?;
        writeln!(f, "| figure | flavor | ours | floor | ratio | target |")?;
        writeln!(f, "|---|---|---|---|---|---|")?;
        for row in &self.rows {
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} |",
                row.figure, row.flavor, row.ours, row.floor, row.ratio, row.target
            )?;
        }
        Ok(())
    }
}

/// A service, a registry and one `subagent` tool over a scripted provider.
pub(crate) struct Fixture {
    tools: ToolRegistry,
    provider: Arc<ScriptedProvider>,
    /// The caller's delegation tree, when the service has limits.
    lineage: Lineage,
    service: SubagentService,
    _registration: ProviderRegistration,
    _plugin: SubagentToolPlugin,
}

impl Fixture {
    pub(crate) fn new(build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder) -> Result<Self, String> {
        Self::limited(Limits::none(), build)
    }

    /// A fixture whose service bounds its trees by `limits`; the caller is
    /// the top-level agent of one tree.
    pub(crate) fn limited(
        limits: Limits,
        build: impl FnOnce(ScriptedProviderBuilder) -> ScriptedProviderBuilder,
    ) -> Result<Self, String> {
        let service = SubagentService::with_limits(limits);
        let tools = ToolRegistry::new();
        let provider = build(ScriptedProvider::builder("bench").reply(REPLY).record_requests(false)).build();
        let registration = service
            .register_provider(provider.clone())
            .map_err(|error| error.to_string())?;
        let plugin = SubagentToolPlugin::apply(SubagentToolConfig::new("bench"), &service, &tools)
            .map_err(|error| error.to_string())?;
        let lineage = if limits.is_none() {
            Lineage::new()
        } else {
            service.open_tree().lineage()
        };
        Ok(Self {
            tools,
            provider,
            lineage,
            service,
            _registration: registration,
            _plugin: plugin,
        })
    }

    pub(crate) fn caller(&self) -> Caller {
        Caller {
            tools: self.tools.clone(),
            args: Arc::new(json!({"description": "bench", "prompt": PROMPT})),
            agent: AgentRef::new("bench-parent").with_lineage(self.lineage.clone()),
            dispatch: None,
        }
    }
}

/// What a harness holds to make one call: the registry, the arguments, the caller.
#[derive(Clone)]
pub(crate) struct Caller {
    tools: ToolRegistry,
    args: Arc<Value>,
    agent: AgentRef,
    /// A subscriber for the calls' tasks; `None`: none installed.
    dispatch: Option<tracing::Dispatch>,
}

impl Caller {
    /// One model tool call, as a harness makes it: arguments, token, caller,
    /// and the call spawned as its own task, answering over a oneshot (the
    /// floor's shape). The registry's call borrows nothing, so the task is
    /// the call itself mapped to the oneshot: no `async` block around it
    /// holding the arguments a second time while the call runs.
    pub(crate) fn spawn(&self, cancel: CancellationToken) -> oneshot::Receiver<ToolResult> {
        let (tx, rx) = oneshot::channel();
        let exec = ToolExecution::new(cancel).with_agent(self.agent.clone());
        let call = || {
            self.tools
                .call(SubagentToolConfig::DEFAULT_TOOL_NAME, Value::clone(&self.args), exec)
                .map(move |result| {
                    let _ = tx.send(result);
                })
        };
        match &self.dispatch {
            None => drop(tokio::spawn(call())),
            // The call's span is made when the call is, so under the
            // subscriber too, not only while the task runs.
            Some(dispatch) => {
                let call = tracing::dispatcher::with_default(dispatch, call);
                drop(tokio::spawn(call.with_subscriber(dispatch.clone())));
            }
        }
        rx
    }
}

/// Starts `count` delegations, each on its own task answering over a oneshot
/// (the same shape as the floor).
pub(crate) fn spawn_calls(caller: &Caller, count: usize) -> Vec<oneshot::Receiver<ToolResult>> {
    (0..count).map(|_| caller.spawn(CancellationToken::new())).collect()
}

pub(crate) fn check(result: &ToolResult) -> Result<(), String> {
    if result.is_error || result.text != REPLY {
        return Err(format!("a benchmark delegation failed: {}", result.text));
    }
    Ok(())
}

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

/// Runs the plan on both flavors and returns the table.
pub fn run(plan: &Plan) -> Result<Report, String> {
    let mut rows = Vec::new();
    for flavor in Flavor::ALL {
        rows.extend(run_flavor(plan, flavor)?);
    }
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
    rows.push(catalog_row(plan.catalog_samples)?);
    if plan.acp_samples > 0 {
        rows.extend(acp::rows(plan.acp_samples).unwrap_or_else(|error| vec![acp::failed_row(&error)]));
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

/// Reads a `/proc/self/status` field in kB.
pub(crate) fn status_kb(field: &str) -> Result<u64, String> {
    status_kb_from("/proc/self/status", field)
}

/// The child-process half of the memory figure: holds `count` delegations in
/// flight and prints `<baseline kB> <held kB> <peak kB> <after kB>`.
pub fn in_flight_child(count: usize, flavor: Flavor) -> Result<String, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let gate = Gate::new();
        let fixture = Fixture::new(|b| b.on_result(ResultBehavior::Gated(gate.clone())))?;
        let caller = fixture.caller();
        // Warm-up on an ungated twin, so the baseline includes a warm runtime and allocator.
        let warm = Fixture::new(|b| b)?;
        delegate_concurrent(&warm.caller(), 1_000).await?;
        let baseline = status_kb("VmRSS")?;
        let answers = spawn_calls(&caller, count);
        gate.arrived(count).await;
        let held = status_kb("VmRSS")?;
        let peak = status_kb("VmHWM")?;
        gate.open();
        for answer in answers {
            check(&answer.await.map_err(|_| "a delegation task died".to_owned())?)?;
        }
        let after = status_kb("VmRSS")?;
        if fixture.provider.stats().live() != 0 {
            return Err("a held child was left running".to_owned());
        }
        Ok(format!("{baseline} {held} {peak} {after}"))
    })
}

fn memory_rows(count: usize, flavor: Flavor) -> Result<Vec<Row>, String> {
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let output = std::process::Command::new(exe)
        .args(["--in-flight", &count.to_string(), flavor.name()])
        .output()
        .map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    let [baseline, held, peak, _after] = numbers[..] else {
        return Err(format!(
            "the in-flight child failed: {}{}",
            text,
            String::from_utf8_lossy(&output.stderr)
        ));
    };
    let per = peak.saturating_sub(baseline) as f64 * 1024.0 / count as f64;
    let held_per = held.saturating_sub(baseline) as f64 * 1024.0 / count as f64;
    let peak_mb = peak as f64 / 1024.0;
    Ok(vec![
        Row {
            figure: format!("bytes per in-flight delegation ({count} held)"),
            flavor: flavor.name(),
            ours: format!("{per:.0} B (RSS while held: {held_per:.0} B)"),
            floor: "-".to_owned(),
            ratio: "-".to_owned(),
            target: format!("≤ 1.5 KB: {}", yes_no(per <= 1536.0)),
        },
        Row {
            figure: format!("peak RSS, {count} in flight"),
            flavor: flavor.name(),
            ours: format!("{peak_mb:.1} MB"),
            floor: "-".to_owned(),
            ratio: "-".to_owned(),
            target: if count >= 100_000 {
                format!("< 300 MB: {}", yes_no(peak_mb < 300.0))
            } else {
                "(target is for 100,000)".to_owned()
            },
        },
    ])
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

/// Reads a `<field>: <n> kB` line of a `/proc` file.
fn status_kb_from(path: &str, field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string(path).map_err(|error| format!("{path}: {error}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path} has no {field}"))
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
        ] {
            assert!(text.contains(figure), "{figure} missing from\n{text}");
        }
        assert!(text.contains("current-thread") && text.contains("multi-thread"));
    }
}
