//! A whole delegation through the agent loop, for the rows that weigh
//! something added to it (recording it, writing its transcripts): a parent
//! agent on the builtin scripted model calls `subagent`, an in-process
//! `spawn` child answers, the parent answers (three model calls), over a
//! model that answers at once or one that takes a millisecond a call
//! ([`SlowModel`]). The figure and its floor are measured as alternated
//! pairs (`pairs`), so both see the same load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_llm::{CancellationToken, ChatModel, ChatRequest, ChatStream};
use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_spawn::SpawnProvider;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::ToolRegistry;

use crate::median;

/// Model calls in one delegation: the parent's call of `subagent`, the
/// child's answer, the parent's answer.
pub const CALLS: u32 = 3;

/// How long a [`SlowModel`] call takes before its answer streams.
pub const MODEL_CALL: Duration = Duration::from_millis(1);

/// A directory of its own under the system's temporary directory, removed
/// when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(what: &str) -> Result<Self, String> {
        // One per call: figures measured at once in one process (the
        // tests) never share one.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dsh-bench-{what}-{}-{number}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        Ok(Self(dir))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A model whose every call takes [`MODEL_CALL`] before the inner model's
/// answer streams: a model that is not free, as every real one is. The
/// wait is a `thread::sleep` on tokio's blocking pool, precise to tens of
/// microseconds where the runtime's timer rounds to the next millisecond.
#[derive(Debug)]
pub struct SlowModel<M>(pub M);

impl<M: ChatModel> ChatModel for SlowModel<M> {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let inner = self.0.stream_chat(request, cancel);
        Box::pin(futures::StreamExt::flatten(futures::stream::once(async move {
            let _ = tokio::task::spawn_blocking(|| std::thread::sleep(MODEL_CALL)).await;
            inner
        })))
    }
}

/// A parent with `subagent` (in-process children that may not delegate)
/// over a model, writing transcripts when given a data directory.
pub(crate) struct Delegation {
    runtime: Arc<AgentRuntime>,
    _keep: (ProviderRegistration, SubagentToolPlugin, SubagentService),
}

impl Delegation {
    pub(crate) fn new(model: Arc<dyn ChatModel>, data_dir: Option<&Path>) -> Result<Self, String> {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let provider = service
            .register_provider(Arc::new(SpawnProvider::new()))
            .map_err(|error| error.to_string())?;
        let config =
            SubagentToolConfig::new("spawn").tool_filter(dsh_subagent_api::ToolFilter::denying(vec!["subagent"]));
        let plugin = SubagentToolPlugin::apply(config, &service, &tools).map_err(|error| error.to_string())?;
        let runtime = AgentRuntime::new(model, tools);
        let runtime = match data_dir {
            Some(dir) => runtime.with_data_dir(dir),
            None => runtime,
        };
        Ok(Self {
            runtime: Arc::new(runtime),
            _keep: (provider, plugin, service),
        })
    }

    /// One delegation, timed; checked to have delegated and answered.
    pub(crate) async fn run(&self, id: usize) -> Result<Duration, String> {
        let parent = Agent::builder(self.runtime.clone())
            .id(format!("bench-parent-{id}"))
            .system_prompt("You are the parent.")
            .build()
            .map_err(|error| error.to_string())?;
        let start = Instant::now();
        let outcome = parent.run("Summarize the README.", &CancellationToken::new()).await;
        let elapsed = start.elapsed();
        if outcome.stop != AgentStop::Completed || !outcome.text.contains("The subagent finished the task") {
            return Err(format!(
                "the delegation did not complete: {:?} {}",
                outcome.stop, outcome.text
            ));
        }
        Ok(elapsed)
    }
}

/// What alternated pairs measured: each side's median, and the median of
/// the pairs' quotients and differences (which the load, the same for both
/// halves of a pair, mostly cancels out of).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pairs {
    /// The median of the measured side, µs.
    pub(crate) ours: f64,
    /// The median of the floor, µs.
    pub(crate) floor: f64,
    /// The median of ours ÷ floor within a pair.
    pub(crate) ratio: f64,
    /// The median of ours − floor within a pair, µs.
    pub(crate) extra: f64,
}

/// `count` pairs of `floor` then `ours` (each given a fresh id, above the
/// warm-up's 0), after one warm-up of each.
pub(crate) async fn pairs(count: usize, floor: &Delegation, ours: &Delegation) -> Result<Pairs, String> {
    floor.run(0).await?;
    ours.run(0).await?;
    let mut sides = (Vec::with_capacity(count), Vec::with_capacity(count));
    let (mut ratios, mut extras) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for id in 1..=count {
        let (below, above) = (floor.run(id).await?, ours.run(id).await?);
        sides.0.push(below);
        sides.1.push(above);
        ratios.push(above.as_secs_f64() / below.as_secs_f64().max(1e-9));
        extras.push(above.as_secs_f64() - below.as_secs_f64());
    }
    Ok(Pairs {
        ours: crate::micros(median(sides.1)),
        floor: crate::micros(median(sides.0)),
        ratio: median_f64(ratios),
        extra: median_f64(extras) * 1e6,
    })
}

fn median_f64(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or_default()
}
