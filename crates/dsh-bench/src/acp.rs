//! One delegation to a freshly spawned `dsh acp` child, against the floor of
//! spawning a process that exits.
//!
//! The delegation is the real out-of-process path, end to end:
//! [`ToolRegistry::call`] → the `subagent` tool → [`SubagentService`] → the
//! [`AcpProvider`] → a new `dsh acp --quiet` child in its own process group
//! (scrubbed environment: no model endpoint, so it runs the embedded scripted
//! model and nothing reaches the network) → `initialize`, `session/new`,
//! `session/prompt`, the streamed answer → dispose (stdin closed, the group
//! gone, the child reaped) → the rendered tool result. One delegation per
//! sample, sequentially, after one warm-up.
//!
//! The floor, measured in the same run and interleaved sample by sample, is
//! spawning the **same `dsh` binary** with `--version` (clap prints the
//! version and exits) and waiting for it, through the same mechanism
//! (`tokio::process`, own process group, scrubbed environment, piped stdio),
//! so the ratio isolates what the protocol and the delegation cost on top of
//! exec and dynamic loading. `/bin/true` is shown as a second reference.
//!
//! A second delegation **fails**: the same `dsh acp` child runs a scripted
//! model whose only reply is an error, so it refuses the prompt at once with
//! a JSON-RPC error; the figure is spawn → error reply → teardown → the
//! rendered `Error: …` result, against the same floor. It shows what a
//! failure costs beyond the child's own work (nothing is waited for that an
//! error reply does not imply).
//!
//! A breakdown calls the provider directly (no tool, no service) and times
//! its three phases: `start` (spawn, `initialize`, `session/new`), `result`
//! (`session/prompt` until the answer) and `dispose` (teardown until the
//! group is gone).
//!
//! The `dsh` it runs is found by [`locate_dsh`](crate::dsh::locate_dsh).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_acp::{AcpConfig, AcpProvider, BASE_ENV};
use dsh_subagent_api::{StartRequest, StopReason, SubagentProvider};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use serde_json::json;

use crate::{Flavor, PROMPT, Row, micros, ratio};

/// How long one delegation may take before the bench gives up on it.
const GUARD: Duration = Duration::from_secs(60);

/// The scrubbed environment the provider gives its child (no extra entries).
fn scrubbed_env() -> Vec<(OsString, OsString)> {
    BASE_ENV
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value)))
        .collect()
}

/// Spawns `program args`, collects its output and waits for it: the floor.
/// The same mechanism as the provider's spawn (tokio, own process group,
/// scrubbed environment, piped stdio). Returns the time and the stdout.
async fn spawn_and_wait(program: &Path, args: &[&str]) -> Result<(Duration, String), String> {
    let env = scrubbed_env();
    let start = Instant::now();
    let output = tokio::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    let elapsed = start.elapsed();
    if !output.status.success() {
        return Err(format!("{} {args:?} failed: {}", program.display(), output.status));
    }
    Ok((elapsed, String::from_utf8_lossy(&output.stdout).into_owned()))
}

/// The provider's configuration for `dsh acp`: the defaults, with `dsh`'s own
/// quiet flag and a throwaway working directory.
fn acp_config(dsh: &Path) -> AcpConfig {
    AcpConfig::new(dsh).args(["acp", "--quiet"]).cwd(std::env::temp_dir())
}

/// What the refusing child's model answers every call with.
const REFUSAL: &str = "the scripted model refuses at once";

/// A scripted-model file whose only rule is an error reply; removed on drop.
struct RefusingScript(PathBuf);

impl RefusingScript {
    fn new() -> Result<Self, String> {
        let path = std::env::temp_dir().join(format!("dsh-bench-refuse-{}.json", std::process::id()));
        let script = json!({"rules": [{"reply": {"error": REFUSAL}}]});
        std::fs::write(&path, script.to_string())
            .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for RefusingScript {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `dsh acp` with a model that refuses every prompt at once.
fn refusing_config(dsh: &Path, script: &RefusingScript) -> AcpConfig {
    AcpConfig::new(dsh)
        .args([
            "acp".to_owned(),
            "--quiet".to_owned(),
            "--script".to_owned(),
            script.0.display().to_string(),
        ])
        .cwd(std::env::temp_dir())
}

/// The `subagent` tool over the `acp` provider, as a harness mounts it.
struct Mounted {
    tools: ToolRegistry,
    _registration: ProviderRegistration,
    _plugin: SubagentToolPlugin,
}

impl Mounted {
    fn new(config: AcpConfig) -> Result<Self, String> {
        let service = SubagentService::new();
        let tools = ToolRegistry::new();
        let provider = AcpProvider::new(config).map_err(|error| error.to_string())?;
        let registration = service
            .register_provider(Arc::new(provider))
            .map_err(|error| error.to_string())?;
        let plugin = SubagentToolPlugin::apply(
            SubagentToolConfig::new("acp").max_depth(MaxDepth::ProviderManaged),
            &service,
            &tools,
        )
        .map_err(|error| error.to_string())?;
        Ok(Self {
            tools,
            _registration: registration,
            _plugin: plugin,
        })
    }

    /// One call of the tool with the bench prompt, bounded by [`GUARD`]: the
    /// result and its time. `what` names the call in a timeout error.
    async fn timed_call(&self, what: &str) -> Result<(ToolResult, Duration), String> {
        let args = json!({"description": "bench", "prompt": PROMPT});
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("bench-parent"));
        let start = Instant::now();
        let result = tokio::time::timeout(
            GUARD,
            self.tools.call(SubagentToolConfig::DEFAULT_TOOL_NAME, args, exec),
        )
        .await
        .map_err(|_| format!("{what} took longer than {} s", GUARD.as_secs()))?;
        Ok((result, start.elapsed()))
    }

    /// One delegation through the tool; its time.
    async fn delegate(&self) -> Result<Duration, String> {
        let (result, elapsed) = self.timed_call("an ACP delegation").await?;
        if result.is_error || !result.text.contains(PROMPT) {
            return Err(format!("an ACP delegation failed: {}", result.text));
        }
        no_child_left()?;
        Ok(elapsed)
    }

    /// One delegation to a child that refuses the prompt; its time. The
    /// result must be the error quoting the child's reason.
    async fn delegate_refused(&self) -> Result<Duration, String> {
        let (result, elapsed) = self.timed_call("a refused ACP delegation").await?;
        if !result.is_error || !result.text.contains(REFUSAL) {
            return Err(format!(
                "a refused ACP delegation did not report the refusal: {}",
                result.text
            ));
        }
        no_child_left()?;
        Ok(elapsed)
    }
}

/// The provider's three phases, timed on their own.
#[derive(Clone, Copy, Debug, Default)]
struct Phases {
    start: Duration,
    answer: Duration,
    dispose: Duration,
}

/// One run through the provider directly: start, result, dispose.
async fn phases(provider: &AcpProvider) -> Result<Phases, String> {
    let request = StartRequest::text(PROMPT, AgentRef::new("bench-parent"), CancellationToken::new());
    let begin = Instant::now();
    let mut run = tokio::time::timeout(GUARD, provider.start(request))
        .await
        .map_err(|_| "an ACP start timed out".to_owned())?
        .map_err(|error| error.to_string())?;
    let started = Instant::now();
    let result = tokio::time::timeout(GUARD, run.result())
        .await
        .map_err(|_| "an ACP result timed out".to_owned())?;
    let answered = Instant::now();
    let disposed = tokio::time::timeout(GUARD, run.dispose())
        .await
        .map_err(|_| "an ACP dispose timed out".to_owned())?;
    let done = Instant::now();
    let result = result.map_err(|error| error.to_string())?;
    disposed.map_err(|error| error.to_string())?;
    if result.stop_reason != StopReason::Completed || !result.text().contains(PROMPT) {
        return Err(format!("an ACP run did not answer: {:?}", result.text()));
    }
    no_child_left()?;
    Ok(Phases {
        start: started - begin,
        answer: answered - started,
        dispose: done - answered,
    })
}

/// Fails if any child process of the bench still exists (alive or unreaped):
/// a delegation's teardown must leave nothing behind.
fn no_child_left() -> Result<(), String> {
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Ok(()); // Not Linux: nothing to check with.
    };
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if ppid == Some(me.as_str()) {
            return Err(format!("a child process outlived its delegation: {}", stat.trim()));
        }
    }
    Ok(())
}

fn sorted(mut samples: Vec<Duration>) -> Vec<Duration> {
    samples.sort();
    samples
}

fn millis(duration: Duration) -> f64 {
    micros(duration) / 1000.0
}

/// Each measurement's samples, sorted.
struct Samples {
    /// `dsh --version`: the floor.
    floor: Vec<Duration>,
    /// spawn + wait `/bin/true`.
    truth: Vec<Duration>,
    /// A whole delegation to `dsh acp`.
    ours: Vec<Duration>,
    /// A delegation `dsh acp` refuses at once.
    refused: Vec<Duration>,
    /// The provider's phases.
    start: Vec<Duration>,
    answer: Vec<Duration>,
    dispose: Vec<Duration>,
}

/// `count` interleaved samples of each measurement after one warm-up of each.
async fn sample(dsh: &Path, count: usize) -> Result<Samples, String> {
    let (_, version) = spawn_and_wait(dsh, &["--version"]).await?;
    if !version.starts_with("dsh ") {
        return Err(format!(
            "{} --version printed {version:?}, not dsh's version",
            dsh.display()
        ));
    }
    let true_bin = Path::new("/bin/true");
    let mounted = Mounted::new(acp_config(dsh))?;
    let script = RefusingScript::new()?;
    let refusing = Mounted::new(refusing_config(dsh, &script))?;
    let provider = AcpProvider::new(acp_config(dsh)).map_err(|error| error.to_string())?;
    // Warm-up: page cache, the runtime, the code paths.
    spawn_and_wait(true_bin, &[]).await?;
    mounted.delegate().await?;
    refusing.delegate_refused().await?;
    phases(&provider).await?;

    let (mut floor, mut truth, mut ours, mut parts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut refused = Vec::new();
    for _ in 0..count {
        floor.push(spawn_and_wait(dsh, &["--version"]).await?.0);
        truth.push(spawn_and_wait(true_bin, &[]).await?.0);
        ours.push(mounted.delegate().await?);
        refused.push(refusing.delegate_refused().await?);
        parts.push(phases(&provider).await?);
    }
    let phase = |pick: fn(&Phases) -> Duration| sorted(parts.iter().map(pick).collect());
    Ok(Samples {
        floor: sorted(floor),
        truth: sorted(truth),
        ours: sorted(ours),
        refused: sorted(refused),
        start: phase(|p| p.start),
        answer: phase(|p| p.answer),
        dispose: phase(|p| p.dispose),
    })
}

/// The ACP rows on one runtime flavor: `samples` interleaved samples of each
/// measurement after one warm-up of each.
async fn measure(dsh: &Path, samples: usize, flavor: Flavor) -> Result<Vec<Row>, String> {
    let measured = sample(dsh, samples).await?;
    let mut rows = Vec::new();
    // Each percentile with the bound the whole delegation is held to at it
    // (a ratio to the floor), if any.
    for (name, p, bound) in [("p50", 0.5, Some(1.5)), ("p90", 0.9, None)] {
        rows.extend(percentile_rows(&measured, samples, flavor, (name, p, bound)));
    }
    Ok(rows)
}

/// The rows of one percentile `(name, p, bound)`.
fn percentile_rows(measured: &Samples, samples: usize, flavor: Flavor, at_p: (&str, f64, Option<f64>)) -> Vec<Row> {
    let (name, p, bound) = at_p;
    let at = |samples: &[Duration]| millis(crate::percentile(samples, p));
    let floor_ms = at(&measured.floor);
    let row = |figure: String, ours: f64| Row {
        figure,
        flavor: flavor.name(),
        ours: format!("{ours:.2} ms"),
        floor: format!("{floor_ms:.2} ms (`dsh --version`)"),
        ratio: format!("{:.1}×", ratio(ours, floor_ms)),
        target: "(none)".to_owned(),
    };
    let mut whole = row(
        format!("ACP delegation to `dsh acp`, spawn → answer → teardown ({name}, {samples} samples)"),
        at(&measured.ours),
    );
    if let Some(bound) = bound {
        let times = ratio(at(&measured.ours), floor_ms);
        whole.target = format!("≤ {bound}× floor: {}", crate::yes_no(times <= bound));
    }
    vec![
        whole,
        row(
            format!("… of which provider start: spawn + initialize + session/new ({name})"),
            at(&measured.start),
        ),
        row(
            format!("… of which provider result: session/prompt → answer ({name})"),
            at(&measured.answer),
        ),
        row(
            format!("… of which provider dispose: stdin EOF → group gone ({name})"),
            at(&measured.dispose),
        ),
        row(
            format!("ACP failed delegation: `dsh acp` refuses the prompt at once, spawn → error → teardown ({name})"),
            at(&measured.refused),
        ),
        row(
            format!("reference: spawn + wait `/bin/true` ({name})"),
            at(&measured.truth),
        ),
    ]
}

/// The ACP rows on both flavors, `samples` samples each. The runtimes enable
/// every driver (child processes need the I/O and signal drivers).
pub fn rows(samples: usize) -> Result<Vec<Row>, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let mut rows = Vec::new();
    for flavor in Flavor::ALL {
        let mut builder = match flavor {
            Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
        };
        let runtime = builder.enable_all().build().map_err(|error| error.to_string())?;
        rows.extend(runtime.block_on(measure(&dsh, samples.max(1), flavor))?);
    }
    Ok(rows)
}

/// The row that stands for the ACP figure when it could not be measured.
pub fn failed_row(error: &str) -> Row {
    Row {
        figure: "ACP delegation to `dsh acp`, spawn → answer → teardown".to_owned(),
        flavor: "-",
        ours: format!("FAILED: {error}"),
        floor: "-".to_owned(),
        ratio: "-".to_owned(),
        target: "(none)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_spawns_and_reaps_a_process() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (elapsed, _) = spawn_and_wait(Path::new("/bin/true"), &[]).await.unwrap();
            assert!(elapsed > Duration::ZERO);
            no_child_left().unwrap();
        });
    }

    #[test]
    fn a_failed_figure_is_one_row() {
        let row = failed_row("no dsh binary");
        assert!(row.ours.contains("FAILED: no dsh binary"));
    }
}
