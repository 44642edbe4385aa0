//! The memory figures: a child process holds delegations in flight, and its
//! peak RSS growth per delegation is read from `/proc`.

use std::path::Path;

use dsh_subagent_testing::Gate;
use dsh_subagent_testing::scripted::ResultBehavior;

use crate::fixture::{Fixture, check, spawn_calls};
use crate::{Flavor, Row, delegate_concurrent, yes_no};

/// Runs this bench again as a child in `mode` (`--in-flight`, `--queued`,
/// `--answer`) with `arg` on `flavor`, so that its peak RSS belongs to that
/// one measurement, and reads the `N` numbers it prints.
pub(crate) fn child_numbers<const N: usize>(mode: &str, arg: usize, flavor: Flavor) -> Result<[u64; N], String> {
    child_run(std::process::Command::new(current_exe()?).args([mode, &arg.to_string(), flavor.name()]))
}

/// Runs this bench again as a child with `args`, the `dsh` binary it runs
/// named by [`DSH_BIN_ENV`](crate::dsh::DSH_BIN_ENV), and reads the `N`
/// numbers it prints.
pub(crate) fn child_output<const N: usize>(args: &[&str], dsh: &Path) -> Result<[u64; N], String> {
    child_run(
        std::process::Command::new(current_exe()?)
            .args(args)
            .env(crate::dsh::DSH_BIN_ENV, dsh),
    )
}

fn current_exe() -> Result<std::path::PathBuf, String> {
    std::env::current_exe().map_err(|error| error.to_string())
}

fn child_run<const N: usize>(command: &mut std::process::Command) -> Result<[u64; N], String> {
    let output = command.output().map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    <[u64; N]>::try_from(numbers).map_err(|_| {
        let mode = command
            .get_args()
            .next()
            .map(|arg| arg.to_string_lossy())
            .unwrap_or_default();
        format!(
            "the {mode} child failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
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

pub(crate) fn memory_rows(count: usize, flavor: Flavor) -> Result<Vec<Row>, String> {
    let [baseline, held, peak, _after] = child_numbers("--in-flight", count, flavor)?;
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

/// Reads a `<field>: <n> kB` line of a `/proc` file.
pub(crate) fn status_kb_from(path: &str, field: &str) -> Result<u64, String> {
    let status = std::fs::read_to_string(path).map_err(|error| format!("{path}: {error}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| format!("{path} has no {field}"))
}
