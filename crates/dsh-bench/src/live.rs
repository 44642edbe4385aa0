//! `dsh run`'s live view, through the real binary on the scripted model: a
//! parent that delegates to [`CHILDREN`] children at once, 8 running at a
//! time, each streaming a short answer slowly, so the tree changes many
//! times a second for about two seconds.
//!
//! - **On a terminal** (a pseudo-terminal of 40 rows and 200 columns as
//!   stderr) the view redraws the tree in place. A reader thread stamps
//!   each read of the terminal's output; each clear to the end of the
//!   screen (`ESC [ J`) starts a frame. The figure is the most frames a
//!   second any run drew while it went on: the frames before the last
//!   (the whole tree, drawn once the run has ended, when it ends) over the
//!   time from the run's start to the last of them, against the view's
//!   period of 100 ms (10 a second). A reader that falls behind cannot
//!   make frames, so the rate holds under load; the shortest gap between
//!   two frames is shown beside it, but a late read shortens the gap
//!   after it, so under load it reads below the period that the view
//!   keeps.
//! - **Not a terminal**: the same run with stderr to a pipe, where there
//!   is no live view, against the same with `--plain` (the view turned
//!   off by hand): the CPU time (user and system) of the `dsh` process,
//!   alternated run for run, the median of each.
//!
//! The CPU time of each run is `getrusage(RUSAGE_CHILDREN)` before and
//! after it, the bench waiting for one child at a time.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::pty::{Winsize, openpty};
use nix::sys::resource::{UsageWho, getrusage};

use crate::{Row, median, yes_no};

/// Children the parent delegates to in one answer.
pub const CHILDREN: usize = 48;

/// The live view's period: it draws at most once per this.
const FRAME: Duration = Duration::from_millis(100);

/// The parent delegates to every child in its first answer and ends with
/// a short text; each child answers six words, one every 40 ms.
fn script() -> serde_json::Value {
    let calls: Vec<serde_json::Value> = (0..CHILDREN)
        .map(|index| {
            serde_json::json!({"name": "subagent", "arguments": {
                "description": format!("part {index}"),
                "prompt": format!("do part {index}"),
            }})
        })
        .collect();
    serde_json::json!({"rules": [
        {"when": {"first_user_contains": "PARENT", "last_message": "user"}, "reply": {"tool_calls": calls}},
        {"when": {"first_user_contains": "PARENT", "last_message": "tool"}, "reply": {"text": "all done"}},
        {"when": {}, "reply": {"text": "part done, nothing else to add", "delay_ms": 40}}
    ]})
}

/// Where stderr goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stderr {
    /// A pseudo-terminal: the live view draws.
    Terminal,
    /// A pipe, read to its end.
    Pipe,
}

/// What one `dsh run` showed.
struct Run {
    /// Its CPU time, user and system.
    cpu: Duration,
    /// When each frame began, from the start of the run (terminal only).
    frames: Vec<Duration>,
}

/// The scratch directory: the script and each run's data directory.
struct Scratch {
    dir: PathBuf,
    script: PathBuf,
}

impl Scratch {
    fn new() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("dsh-bench-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        let path = dir.join("script.json");
        std::fs::write(&path, script().to_string()).map_err(|error| format!("{}: {error}", path.display()))?;
        Ok(Self { dir, script: path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The CPU time of every waited-for child so far.
fn children_cpu() -> Result<Duration, String> {
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).map_err(|error| format!("getrusage: {error}"))?;
    let time = |value: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(value.tv_sec()).unwrap_or(0))
            + Duration::from_micros(u64::try_from(value.tv_usec()).unwrap_or(0))
    };
    Ok(time(usage.user_time()) + time(usage.system_time()))
}

/// One `dsh run` of the script, stderr to `stderr`, with `--plain` when
/// `plain`; its CPU time and, on a terminal, its frames.
fn run(dsh: &Path, scratch: &Scratch, index: usize, stderr: Stderr, plain: bool) -> Result<Run, String> {
    let data = scratch.dir.join(format!("data-{index}"));
    let mut command = crate::dsh::dsh_command(dsh);
    command
        .arg("run")
        .arg("--data-dir")
        .arg(&data)
        .arg("--script")
        .arg(&scratch.script)
        .args(["--max-concurrent", "8"]);
    if plain {
        command.arg("--plain");
    }
    command.arg("PARENT task").stdin(Stdio::null()).stdout(Stdio::piped());
    let (reader, frames) = match stderr {
        Stderr::Terminal => {
            let size = Winsize {
                ws_row: 40,
                ws_col: 200,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            let pty = openpty(Some(&size), None).map_err(|error| format!("openpty: {error}"))?;
            command.stderr(Stdio::from(pty.slave));
            let (tx, rx) = mpsc::channel();
            (Some(read_frames(pty.master, tx)), Some(rx))
        }
        Stderr::Pipe => {
            command.stderr(Stdio::piped());
            (None, None)
        }
    };
    let before = children_cpu()?;
    let start = Instant::now();
    let child = command.spawn().map_err(|error| format!("{}: {error}", dsh.display()))?;
    // The terminal's other end is the child's alone now: its output ends
    // when the child exits.
    drop(command);
    let output = child.wait_with_output().map_err(|error| error.to_string())?;
    let cpu = children_cpu()?.saturating_sub(before);
    let _ = std::fs::remove_dir_all(&data);
    if !output.status.success() || !String::from_utf8_lossy(&output.stdout).contains("all done") {
        return Err(format!(
            "dsh run failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let frames = match (reader, frames) {
        (Some(reader), Some(frames)) => {
            let _ = reader.join();
            frames
                .try_iter()
                .map(|at| at.saturating_duration_since(start))
                .collect()
        }
        _ => Vec::new(),
    };
    Ok(Run { cpu, frames })
}

/// Reads the terminal's output to its end on a thread of its own, sending
/// the time of each read that holds the start of a frame (once per frame
/// it holds).
fn read_frames(master: OwnedFd, frames: mpsc::Sender<Instant>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut terminal = std::fs::File::from(master);
        let mut buffer = vec![0_u8; 64 * 1024];
        // The last two bytes of the read before, for a mark cut in two.
        let mut carry: Vec<u8> = Vec::new();
        // A read fails with EIO once the child, the other end's last
        // holder, has exited.
        while let Ok(read) = terminal.read(&mut buffer) {
            if read == 0 {
                break;
            }
            let at = Instant::now();
            let mut seen = std::mem::take(&mut carry);
            seen.extend_from_slice(&buffer[..read]);
            for _ in seen.windows(3).filter(|window| *window == b"\x1b[J") {
                let _ = frames.send(at);
            }
            carry = seen[seen.len().saturating_sub(2)..].to_vec();
        }
    })
}

/// The frames drawn while the run went on: all but the last.
fn running(frames: &[Duration]) -> &[Duration] {
    &frames[..frames.len().saturating_sub(1)]
}

/// Frames a second while the run went on: the running frames over the
/// time from the run's start to the last of them; `None` without one.
fn rate(frames: &[Duration]) -> Option<f64> {
    let running = running(frames);
    let last = running.last()?;
    Some(running.len() as f64 / last.as_secs_f64().max(f64::MIN_POSITIVE))
}

/// The shortest gap between two running frames; `None` with fewer than two.
fn shortest_gap(frames: &[Duration]) -> Option<Duration> {
    running(frames)
        .windows(2)
        .map(|pair| pair[1].saturating_sub(pair[0]))
        .min()
}

/// The rows: the frames on a terminal, and the view's cost off one.
pub fn rows(runs: usize) -> Result<Vec<Row>, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let scratch = Scratch::new()?;
    let runs = runs.max(1);

    let mut rates = Vec::with_capacity(runs);
    let mut gaps = Vec::with_capacity(runs);
    let mut frame_counts = Vec::with_capacity(runs);
    let mut terminal_cpu = Vec::with_capacity(runs);
    let mut piped = Vec::with_capacity(runs);
    let mut plain = Vec::with_capacity(runs);
    for index in 0..runs {
        let on_terminal = run(&dsh, &scratch, 3 * index, Stderr::Terminal, false)?;
        let (Some(rate), Some(gap)) = (rate(&on_terminal.frames), shortest_gap(&on_terminal.frames)) else {
            return Err(format!(
                "the live view drew {} frames on a terminal; the run is too short to measure",
                on_terminal.frames.len()
            ));
        };
        rates.push(rate);
        gaps.push(gap);
        frame_counts.push(on_terminal.frames.len());
        terminal_cpu.push(on_terminal.cpu);
        piped.push(run(&dsh, &scratch, 3 * index + 1, Stderr::Pipe, false)?.cpu);
        plain.push(run(&dsh, &scratch, 3 * index + 2, Stderr::Pipe, true)?.cpu);
    }
    let fastest = rates.iter().copied().fold(0.0, f64::max);
    let shortest = gaps.iter().min().copied().unwrap_or_default();
    let most = 1.0 / FRAME.as_secs_f64();
    frame_counts.sort_unstable();
    let frames = frame_counts[frame_counts.len() / 2];
    let (piped, plain, terminal_cpu) = (median(piped), median(plain), median(terminal_cpu));
    let ms = |time: Duration| time.as_secs_f64() * 1e3;
    let off = ms(piped) / ms(plain).max(f64::MIN_POSITIVE);
    Ok(vec![
        Row {
            figure: format!(
                "`dsh run`'s live view on a terminal: frames a second while it runs ({CHILDREN} children, the most of {runs} runs)"
            ),
            flavor: "-",
            ours: format!(
                "{fastest:.1} ({frames} frames a run, median; shortest gap seen {:.0} ms)",
                ms(shortest)
            ),
            floor: format!("{most:.0} (one per {:.0} ms)", ms(FRAME)),
            ratio: format!("{:.2}×", fastest / most),
            target: format!("at most every 100 ms: {}", yes_no(fastest <= most)),
        },
        Row {
            figure: "`dsh run`'s CPU time, stderr a pipe (no live view)".to_owned(),
            flavor: "-",
            ours: format!("{:.1} ms", ms(piped)),
            floor: format!("{:.1} ms (the same with --plain)", ms(plain)),
            ratio: format!("{off:.2}×"),
            target: format!("costs nothing off a terminal (≤ 1.05×): {}", yes_no(off <= 1.05)),
        },
        Row {
            figure: "`dsh run`'s CPU time, stderr a terminal (the live view drawing)".to_owned(),
            flavor: "-",
            ours: format!("{:.1} ms", ms(terminal_cpu)),
            floor: format!("{:.1} ms (stderr a pipe, --plain)", ms(plain)),
            ratio: format!("{:.2}×", ms(terminal_cpu) / ms(plain).max(f64::MIN_POSITIVE)),
            target: "(none: reported)".to_owned(),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_and_the_gap_leave_out_the_last_frame() {
        let at = |ms: &[u64]| ms.iter().map(|ms| Duration::from_millis(*ms)).collect::<Vec<_>>();
        let frames = at(&[100, 230, 330, 400, 405]);
        assert_eq!(rate(&frames), Some(10.0));
        assert_eq!(shortest_gap(&frames), Some(Duration::from_millis(70)));
        assert_eq!(rate(&at(&[100])), None);
        assert_eq!(shortest_gap(&at(&[100, 150])), None);
        assert_eq!(rate(&[]), None);
    }

    #[test]
    fn the_script_delegates_to_every_child_at_once() {
        let script = script();
        let calls = script["rules"][0]["reply"]["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), CHILDREN);
    }
}
