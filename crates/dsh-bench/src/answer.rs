//! A long answer through `subagent`: a child that answers 1 MB or 10 MB,
//! delivered through the real [`ToolRegistry::call`] → `subagent` tool →
//! [`SubagentService`] path, cut to the default result budget (its head, its
//! tail and the notice), and kept whole as a task of the caller for
//! `task_output`.
//!
//! Its time is reported against the floor of one copy of the answer (the
//! least any delivery of it does), and per megabyte, so the two sizes show
//! whether cutting is linear in the answer. Its memory is the peak RSS above
//! a warm baseline while one answer is delivered, in a fresh process, as a
//! multiple of the answer: each layer that copied the whole text would add
//! one.

use std::time::{Duration, Instant};

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use serde_json::json;

use crate::memory::child_numbers;
use crate::{Flavor, Plan, Row, median, micros, ratio, status_kb, yes_no};

/// The answer sizes measured, in bytes.
pub const SIZES: [usize; 2] = [1_000_000, 10_000_000];

/// A text of `bytes` bytes: lines of mixed ASCII and two-byte characters
/// (so cuts must find character boundaries), marked at both ends.
pub(crate) fn answer(bytes: usize) -> String {
    let line = "an answer line, with a café and a naïve résumé now and then\n";
    let mut text = String::with_capacity(bytes);
    text.push_str("HEAD ");
    while text.len() + line.len() + 5 <= bytes {
        text.push_str(line);
    }
    while text.len() + 5 < bytes {
        text.push('.');
    }
    text.push_str(" TAIL");
    text
}

/// A `subagent` tool over a scripted child answering `reply`, with the task
/// tools mounted, so a cut answer is kept for `task_output`.
struct World {
    tools: ToolRegistry,
    _tasks: TaskRegistry,
    _service: SubagentService,
    _registration: ProviderRegistration,
    _plugin: SubagentToolPlugin,
    _task_tools: TaskToolsPlugin,
}

impl World {
    fn new(reply: String) -> Result<Self, String> {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let tasks = TaskRegistry::new();
        let task_tools = TaskToolsPlugin::apply(&tasks, &tools).map_err(|error| error.to_string())?;
        let provider = ScriptedProvider::builder("long")
            .reply(reply)
            .record_requests(false)
            .build();
        let registration = service.register_provider(provider).map_err(|error| error.to_string())?;
        let plugin = SubagentToolPlugin::apply_with_tasks(SubagentToolConfig::new("long"), &service, &tools, &tasks)
            .map_err(|error| error.to_string())?;
        Ok(Self {
            tools,
            _tasks: tasks,
            _service: service,
            _registration: registration,
            _plugin: plugin,
            _task_tools: task_tools,
        })
    }

    /// One delegation, timed; the result is checked to be the answer's
    /// head and tail, cut, with the rest kept.
    async fn deliver(&self, bytes: usize) -> Result<Duration, String> {
        let args = json!({"description": "answer at length", "prompt": "answer at length"});
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("bench-parent"));
        let start = Instant::now();
        let result = self.tools.call(SubagentToolConfig::DEFAULT_TOOL_NAME, args, exec).await;
        let elapsed = start.elapsed();
        check(&result, bytes)?;
        Ok(elapsed)
    }
}

fn check(result: &ToolResult, bytes: usize) -> Result<(), String> {
    let kept = result.cut.as_ref().is_some_and(|cut| cut.read.is_some());
    let budget = dsh_tools::ResultLimit::DEFAULT.bytes();
    if result.is_error
        || !kept
        || !result.text.starts_with("HEAD ")
        || !result.text.ends_with(" TAIL")
        || result.text.len() > budget
    {
        return Err(format!(
            "a {bytes}-byte answer was not cut to its head and tail with the rest kept: {}…",
            result.text.chars().take(200).collect::<String>()
        ));
    }
    Ok(())
}

/// The time rows of one flavor: each size's median delivery against the
/// median copy of the same answer.
pub fn rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let mut rows = Vec::new();
        for bytes in SIZES {
            let text = answer(bytes);
            let world = World::new(text.clone())?;
            world.deliver(bytes).await?;
            let samples = plan.rounds.max(1) * 10;
            let (mut floors, mut ours) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
            for _ in 0..samples {
                let start = Instant::now();
                let copy = std::hint::black_box(text.clone());
                floors.push(start.elapsed());
                drop(copy);
                ours.push(world.deliver(bytes).await?);
            }
            let (ours, floor) = (micros(median(ours)), micros(median(floors)));
            rows.push(Row {
                figure: format!("a {} MB answer through `subagent`, cut and kept", bytes / 1_000_000),
                flavor: flavor.name(),
                ours: format!("{:.2} ms ({:.0} µs per MB)", ours / 1e3, ours / (bytes as f64 / 1e6)),
                floor: format!("{:.2} ms (one copy)", floor / 1e3),
                ratio: format!("{:.1}×", ratio(ours, floor)),
                target: "(none: linear in the size)".to_owned(),
            });
        }
        Ok(rows)
    })
}

/// The child-process half of the memory figure: delivers one answer of
/// `bytes` and prints `<baseline kB> <peak kB>`.
pub fn memory_child(bytes: usize, flavor: Flavor) -> Result<String, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        // Warm the runtime, the allocator and the path on a short answer.
        let warm = World::new(answer(64 * 1024))?;
        warm.deliver(64 * 1024).await?;
        let world = World::new(answer(bytes))?;
        let baseline = status_kb("VmRSS")?;
        world.deliver(bytes).await?;
        let peak = status_kb("VmHWM")?;
        Ok(format!("{baseline} {peak}"))
    })
}

/// The memory row of the 10 MB answer, measured in a fresh process.
pub fn memory_row(flavor: Flavor) -> Result<Row, String> {
    let bytes = SIZES[SIZES.len() - 1];
    let [baseline, peak] = child_numbers("--answer", bytes, flavor)?;
    let grown = peak.saturating_sub(baseline) as f64 * 1024.0;
    let times = grown / bytes as f64;
    Ok(Row {
        figure: format!(
            "peak memory delivering a {} MB answer (above the baseline)",
            bytes / 1_000_000
        ),
        flavor: flavor.name(),
        ours: format!("{:.1} MB ({times:.2}× the answer)", grown / 1e6),
        floor: "-".to_owned(),
        ratio: "-".to_owned(),
        target: format!("< 3× the answer: {}", yes_no(times < 3.0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_has_its_size_and_its_marks() {
        let text = answer(1_000_000);
        assert_eq!(text.len(), 1_000_000);
        assert!(text.starts_with("HEAD ") && text.ends_with(" TAIL"));
    }

    #[test]
    fn a_long_answer_is_delivered_cut_and_kept() {
        let rows = rows(&Plan::smoke(), Flavor::CurrentThread).unwrap();
        assert_eq!(rows.len(), SIZES.len());
        assert!(rows[1].figure.starts_with("a 10 MB answer"), "{}", rows[1].figure);
    }
}
