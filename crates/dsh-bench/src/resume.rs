//! `dsh run --resume` of a crashed tree of 1,000 agents: the time from its
//! start to its first new model request, and its peak RSS.
//!
//! The bench makes the tree the way a user would, with the real `dsh`
//! binary: `dsh run` against a loopback model (the private `resume_server`)
//! delegates to 9 children, each to 110 grandchildren, which answer 48 KB
//! each (about 100 MB of transcripts in all). The server never answers one
//! grandchild (`HELD`); once every other answer is in, the bench kills
//! `dsh` with SIGKILL, so the transcripts are what a crash leaves: the
//! top-level agent's turn and one child's open, one grandchild's unanswered.
//!
//! Each measurement runs on a fresh copy of that directory in a fresh bench
//! process (`--resume-tree <dsh> <dir> <root>`), so the peak RSS of its
//! children (`getrusage(RUSAGE_CHILDREN)`) is that of its own `dsh` runs:
//! `dsh run --resume <root>` goes on with the top-level agent's turn, which
//! runs the open child's call again, whose turn goes on and runs the held
//! grandchild's call again, whose request is the first new one. The floor,
//! in the same process: a fresh `dsh run` in an empty directory with the
//! same `dsh.toml`, to its first request.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::delegation::Scratch;
use crate::resume_server::{AGENTS, CHILDREN, GRANDCHILDREN, Seen, TASK, serve};
use crate::{Row, median, yes_no};

/// The configuration of every run: one `spawn` tool two levels deep, room
/// for the whole tree at once, results whole, eight requests at a time.
const CONFIG: &str = r#"[model]
max_concurrent = 8

[[subagents]]
provider = "spawn"
max_depth = 2

[limits]
max_concurrent = 1000
max_queued = 1000
max_children = 2000
result_limit = 100000
"#;

/// The most a run may take before the bench gives up on it.
const PATIENCE: Duration = Duration::from_secs(300);

/// `dsh` with the loopback model, in `dir` (its `dsh.toml`, its `.dsh`).
fn dsh_run(dsh: &Path, dir: &Path, base_url: &str, args: &[&str]) -> Result<Child, String> {
    std::fs::write(dir.join("dsh.toml"), CONFIG).map_err(|error| format!("{}: {error}", dir.display()))?;
    let stderr = std::fs::File::create(dir.join("stderr.txt")).map_err(|error| error.to_string())?;
    crate::dsh::dsh_command(dsh)
        .arg("run")
        .args(args)
        .current_dir(dir)
        .env("DSH_BASE_URL", base_url)
        .env("DSH_API_KEY", "bench")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|error| format!("{}: {error}", dsh.display()))
}

/// What `dsh` said on stderr in `dir`, for an error.
fn stderr_of(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    text.chars()
        .rev()
        .take(600)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

/// Makes the crashed tree in `dir`: runs `dsh run` until every answer but
/// the held one is in, then kills it. The top-level agent's id, and the
/// bytes of the transcripts.
fn crash(dsh: &Path, dir: &Path) -> Result<(String, u64), String> {
    let (base_url, seen) = serve(true)?;
    let mut child = dsh_run(dsh, dir, &base_url, &["--model", "bench-model", TASK])?;
    // The top-level call, each child's first, every grandchild but the held
    // one, and the last call of every child but the held one's parent.
    let expected = 1 + CHILDREN + (CHILDREN * GRANDCHILDREN - 1) + (CHILDREN - 1);
    let started = Instant::now();
    let waited = wait_for(&seen, expected, &mut child, started);
    // Time for the last results to reach their transcripts, then the crash.
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    seen.hold.store(false, Ordering::Relaxed);
    waited.map_err(|error| format!("{error}: {}", stderr_of(dir)))?;
    let agents = dir.join(".dsh").join("agents");
    let mut root = None;
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(&agents).map_err(|error| format!("{}: {error}", agents.display()))? {
        let path = entry.map_err(|error| error.to_string())?.path();
        files += 1;
        bytes += std::fs::metadata(&path).map_err(|error| error.to_string())?.len();
        let mut first = String::new();
        let file = std::fs::File::open(&path).map_err(|error| error.to_string())?;
        std::io::BufReader::new(file)
            .read_line(&mut first)
            .map_err(|error| error.to_string())?;
        if !first.contains("\"parent\"") {
            root = path.file_stem().and_then(|stem| stem.to_str()).map(str::to_owned);
        }
    }
    match root {
        Some(root) if files == AGENTS => Ok((root, bytes)),
        _ => Err(format!(
            "the crashed run left {files} transcripts, not {AGENTS} under one parent"
        )),
    }
}

/// Waits until the server finished `expected` answers, or `child` ended.
fn wait_for(seen: &Seen, expected: usize, child: &mut Child, started: Instant) -> Result<(), String> {
    while seen.answered.load(Ordering::Relaxed) < expected {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("dsh run ended ({status}) before the crash"));
        }
        if started.elapsed() > PATIENCE {
            return Err(format!(
                "dsh run made {} answers of {expected} in {PATIENCE:?}",
                seen.answered.load(Ordering::Relaxed)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// One run to its end: the time from its start to its first request.
fn first_request(dsh: &Path, dir: &Path, args: &[&str]) -> Result<Duration, String> {
    let (base_url, seen) = serve(false)?;
    let start = Instant::now();
    let mut child = dsh_run(dsh, dir, &base_url, args)?;
    let ended = loop {
        if let Some(status) = child.try_wait().map_err(|error| error.to_string())? {
            break status;
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("dsh run {args:?} took over {PATIENCE:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut out, &mut stdout);
    }
    let first = seen.first().ok_or("no request was made")?;
    if !ended.success() {
        return Err(format!("dsh run {args:?} failed ({ended}): {stdout}{}", stderr_of(dir)));
    }
    Ok(first.duration_since(start))
}

/// The child-process half: the floor (a fresh run in a directory beside
/// `dir`), then the resume of `root` in `dir`; prints `<resume ms> <floor
/// ms> <peak RSS kB>` (ms with a fraction).
pub fn measure_child(dsh: &Path, dir: &Path, root: &str) -> Result<String, String> {
    let fresh = Scratch::new("resume-floor")?;
    let floor = first_request(dsh, fresh.path(), &["--model", "bench-model", "Say hello."])?;
    let resumed = first_request(dsh, dir, &["--resume", root])?;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_err(|error| format!("getrusage: {error}"))?;
    Ok(format!(
        "{:.1} {:.1} {}",
        resumed.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3,
        usage.max_rss()
    ))
}

/// Copies the crashed directory `from` to `to` (`cp -a`).
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .map_err(|error| format!("cp: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cp -a {} {} failed", from.display(), to.display()))
    }
}

/// The row: the median of `runs` resumes to their first new request, the
/// most peak RSS of any, against a fresh run's first request.
pub fn rows(runs: usize) -> Result<Vec<Row>, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let scratch = Scratch::new("resume")?;
    let crashed = scratch.path().join("crashed");
    std::fs::create_dir_all(&crashed).map_err(|error| error.to_string())?;
    let (root, bytes) = crash(&dsh, &crashed)?;
    let (mut times, mut floors, mut peak_kb) = (Vec::new(), Vec::new(), 0);
    for run in 0..runs.max(1) {
        let dir: PathBuf = scratch.path().join(format!("run-{run}"));
        copy(&crashed, &dir)?;
        let output = Command::new(&exe)
            .arg("--resume-tree")
            .arg(&dsh)
            .arg(&dir)
            .arg(&root)
            .output()
            .map_err(|error| error.to_string())?;
        let text = String::from_utf8_lossy(&output.stdout);
        let numbers: Vec<f64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
        let [ms, floor_ms, kb] = <[f64; 3]>::try_from(numbers).map_err(|_| {
            format!(
                "the --resume-tree child failed: {text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        times.push(Duration::from_secs_f64(ms / 1e3));
        floors.push(Duration::from_secs_f64(floor_ms / 1e3));
        peak_kb = peak_kb.max(kb as u64);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (ms, floor_ms) = (median(times).as_secs_f64() * 1e3, median(floors).as_secs_f64() * 1e3);
    let peak_mb = peak_kb as f64 / 1024.0;
    Ok(vec![Row {
        figure: format!(
            "`dsh run --resume` of a crashed tree of {AGENTS} agents ({:.0} MB of transcripts) to its first new request",
            bytes as f64 / 1e6
        ),
        flavor: "-",
        ours: format!("{ms:.0} ms, peak RSS {peak_mb:.1} MB"),
        floor: format!("{floor_ms:.0} ms (a fresh `dsh run`'s first request)"),
        ratio: format!("{:.1}×", ms / floor_ms.max(0.001)),
        target: format!("< 1 s and < 100 MB: {}", yes_no(ms < 1000.0 && peak_mb < 100.0)),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume_server::{DONE, HELD};

    #[test]
    fn the_held_part_is_one_of_the_tree() {
        assert_eq!(AGENTS, 1_000);
        assert_eq!(HELD, format!("part {}.{}", CHILDREN - 1, GRANDCHILDREN - 1));
        assert!(CONFIG.contains("max_depth = 2"));
        assert!(!DONE.is_empty());
    }
}
