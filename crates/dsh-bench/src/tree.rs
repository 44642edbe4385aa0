//! `dsh tree` on a data directory of 10,000 agents: the bench writes one
//! (a top-level agent, 99 children, 100 grandchildren under each), beside
//! an unrelated tree of the same size, and times `dsh tree` drawing the
//! newest one, its peak RSS, and how much of the directory its loader reads.
//!
//! The measuring runs in a child process of the bench (`--tree <dsh>`), so
//! the peak RSS of its own children (`getrusage(RUSAGE_CHILDREN)`) is that
//! of the `dsh tree` runs alone, and its read bytes (`/proc/self/io`
//! `rchar`) those of [`dsh_tree::load`] alone. The floor: reading the
//! shown tree's transcripts whole, once each, in the same process.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Row, median, yes_no};

/// Children of the top-level agent.
const CHILDREN: usize = 99;

/// Children of each child.
const GRANDCHILDREN: usize = 100;

/// Agents of one generated tree.
pub const AGENTS: usize = 1 + CHILDREN + CHILDREN * GRANDCHILDREN;

/// `dsh tree` runs timed.
const RUNS: usize = 5;

/// A system prompt of about a kilobyte, as a real header carries.
fn system_prompt() -> String {
    "You are a capable assistant working on one part of a larger task. ".repeat(16)
}

/// One transcript's lines.
struct Transcript {
    lines: Vec<Value>,
}

impl Transcript {
    fn header(id: &str, parent: Option<&str>, depth: u64, index: usize, at: u64) -> Self {
        let mut header = json!({
            "type": "header", "version": 1, "id": id, "depth": depth,
            "label": format!("part {index}"), "model": "bench-model",
            "system_prompt": system_prompt(), "created_at_ms": at,
        });
        if let Some(parent) = parent {
            header["parent"] = json!(parent);
            header["start"] = json!({"tool": "subagent", "call_id": format!("call_{index}"), "provider": "spawn"});
        }
        let task =
            json!({"type": "message", "message": {"role": "user", "content": format!("Do part {index} of the work.")}});
        Self {
            lines: vec![header, task],
        }
    }

    fn message(&mut self, message: Value) {
        self.lines.push(json!({"type": "message", "message": message}));
    }

    /// The run's end: `steps` model calls over `at`..`at + 2000` ms.
    fn end(&mut self, steps: u32, at: u64, answer: &str) {
        let calls: Vec<u64> = (1..=u64::from(steps))
            .map(|call| at + call * 2000 / u64::from(steps))
            .collect();
        self.lines.push(json!({
            "type": "turn_end", "stop": "completed", "steps": steps,
            "usage": {"prompt_tokens": 1200 * steps, "completion_tokens": 150 * steps, "total_tokens": 1350 * steps},
            "cost": {"nanos": 500_000 * u64::from(steps)},
            "times": {"started_at_ms": at, "calls_at_ms": calls, "ended_at_ms": at + 2000, "answer_bytes": answer.len()},
        }));
    }

    /// Writes the transcript as `<id>.jsonl`, last modified at `clock` ms
    /// since the Unix epoch, and moves `clock` on by a millisecond: each
    /// file is strictly newer than the one written before it, as in a run,
    /// where the file system's coarse clock would give many of them one
    /// time (and `dsh tree` would read those headers to tell them apart).
    fn write(&self, dir: &Path, id: &str, clock: &mut u64) -> Result<u64, String> {
        let mut text = String::new();
        for line in &self.lines {
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let path = dir.join(format!("{id}.jsonl"));
        let failed = |error: std::io::Error| format!("{}: {error}", path.display());
        let mut file = std::fs::File::create(&path).map_err(failed)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed)?;
        file.set_modified(std::time::UNIX_EPOCH + Duration::from_millis(*clock))
            .map_err(failed)?;
        *clock += 1;
        Ok(text.len() as u64)
    }
}

/// A parent that delegated `children` (by id) in one answer and then answered.
fn parent(transcript: &mut Transcript, children: &[String], at: u64, answer: &str) {
    let calls: Vec<Value> = (0..children.len())
        .map(|index| {
            let arguments =
                json!({"description": format!("part {index}"), "prompt": format!("Do part {index} of the work.")});
            json!({"id": format!("call_{index}"), "name": "subagent", "arguments": arguments.to_string()})
        })
        .collect();
    transcript.message(json!({"role": "assistant", "content": "", "tool_calls": calls}));
    for child in children {
        transcript.lines.push(json!({"type": "child", "id": child}));
    }
    for index in 0..children.len() {
        transcript.message(json!({"role": "tool", "tool_call_id": format!("call_{index}"), "content": answer}));
    }
    transcript.message(json!({"role": "assistant", "content": answer}));
    transcript.end(2, at, answer);
}

/// Writes a tree of [`AGENTS`] agents whose ids start with `prefix` into
/// `agents` (the data directory's `agents/`), its top-level agent last;
/// its id and the bytes of its transcripts.
fn generate(agents: &Path, prefix: &str, at: u64) -> Result<(String, u64), String> {
    let answer = "The part is done: the findings are summarised here in a few sentences, with the one number that matters and where the rest of the detail can be found. ".repeat(2);
    let root = format!("{prefix}-root");
    let mut bytes = 0;
    let mut clock = at;
    let mut children = Vec::with_capacity(CHILDREN);
    for child in 0..CHILDREN {
        let id = format!("{prefix}-{child:03}");
        let mut grandchildren = Vec::with_capacity(GRANDCHILDREN);
        for grandchild in 0..GRANDCHILDREN {
            let leaf = format!("{id}-{grandchild:03}");
            let mut transcript = Transcript::header(&leaf, Some(&id), 2, grandchild, at);
            transcript.message(json!({"role": "assistant", "content": answer}));
            transcript.end(1, at, &answer);
            bytes += transcript.write(agents, &leaf, &mut clock)?;
            grandchildren.push(leaf);
        }
        let mut transcript = Transcript::header(&id, Some(&root), 1, child, at);
        parent(&mut transcript, &grandchildren, at, &answer);
        bytes += transcript.write(agents, &id, &mut clock)?;
        children.push(id);
    }
    let mut transcript = Transcript::header(&root, None, 0, 0, at);
    parent(&mut transcript, &children, at, &answer);
    bytes += transcript.write(agents, &root, &mut clock)?;
    Ok((root, bytes))
}

/// The bytes this process has read so far (`/proc/self/io` `rchar`).
fn read_bytes() -> Result<u64, String> {
    let io = std::fs::read_to_string("/proc/self/io").map_err(|error| format!("/proc/self/io: {error}"))?;
    io.lines()
        .find_map(|line| line.strip_prefix("rchar:"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| "/proc/self/io has no rchar".to_owned())
}

/// The child-process half: writes the two trees into a fresh directory,
/// times `dsh tree` (the binary at `dsh`) on it, and prints `<dsh tree ms>
/// <floor ms> <peak RSS kB> <bytes the loader read> <the tree's bytes>
/// <the directory's bytes> <nodes>`.
pub fn measure_child(dsh: &Path) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("dsh-bench-tree-{}", std::process::id()));
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).map_err(|error| format!("{}: {error}", agents.display()))?;
    let outcome = measure_in(dsh, &dir, &agents);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

fn measure_in(dsh: &Path, dir: &Path, agents: &Path) -> Result<String, String> {
    let at = 1_790_000_000_000;
    let (_, other_bytes) = generate(agents, "other", at)?;
    // Written last, so it is the most recent top-level agent `dsh tree` shows.
    let (root, tree_bytes) = generate(agents, "shown", at + 60_000)?;

    // The loader alone: what it reads of the directory.
    let before = read_bytes()?;
    let tree = dsh_tree::load(dir, None).map_err(|error| error.to_string())?;
    let read = read_bytes()?.saturating_sub(before);
    let nodes = tree.walk().len();
    if tree.root.id != root || nodes != AGENTS {
        return Err(format!("dsh_tree::load showed {} with {nodes} agents", tree.root.id));
    }
    drop(tree);

    // The floor: the shown tree's transcripts read whole, once each.
    let floor = {
        let start = Instant::now();
        let mut total = 0;
        for entry in std::fs::read_dir(agents).map_err(|error| error.to_string())? {
            let path = entry.map_err(|error| error.to_string())?.path();
            if path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("shown-"))
            {
                total += std::fs::read(&path).map_err(|error| error.to_string())?.len();
            }
        }
        if total as u64 != tree_bytes {
            return Err(format!("the floor read {total} bytes of {tree_bytes}"));
        }
        start.elapsed()
    };

    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        times.push(dsh_tree_run(dsh, dir)?);
    }
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_err(|error| format!("getrusage: {error}"))?;
    let peak_kb = usage.max_rss();
    Ok(format!(
        "{} {} {peak_kb} {read} {tree_bytes} {} {nodes}",
        median(times).as_millis(),
        floor.as_millis().max(1),
        tree_bytes + other_bytes,
    ))
}

/// One `dsh tree --data-dir <dir>`, its text read whole; how long it took.
fn dsh_tree_run(dsh: &Path, dir: &Path) -> Result<Duration, String> {
    let start = Instant::now();
    let output = crate::dsh::dsh_command(dsh)
        .arg("tree")
        .arg("--data-dir")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("{}: {error}", dsh.display()))?;
    let took = start.elapsed();
    let lines = output.stdout.iter().filter(|byte| **byte == b'\n').count();
    if !output.status.success() || lines < AGENTS {
        return Err(format!(
            "dsh tree printed {lines} lines: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(took)
}

/// The rows: `dsh tree`'s time and peak RSS against the floor, and what
/// its loader read of the directory.
pub fn rows() -> Result<Vec<Row>, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let exe = std::env::current_exe().map_err(|error| error.to_string())?;
    let output = Command::new(exe)
        .arg("--tree")
        .arg(&dsh)
        .output()
        .map_err(|error| error.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    let [ms, floor_ms, peak_kb, read, tree_bytes, dir_bytes, nodes] = <[u64; 7]>::try_from(numbers).map_err(|_| {
        format!(
            "the --tree child failed: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let peak_mb = peak_kb as f64 / 1024.0;
    let mb = |bytes: u64| bytes as f64 / 1e6;
    // Only the shown tree: at most its own bytes, and a few kilobytes more
    // (the directory's listing and one header per file newer than the root).
    let only_the_tree = read <= tree_bytes + 64 * 1024;
    Ok(vec![
        Row {
            figure: format!("`dsh tree` on {nodes} agents (beside another {AGENTS})"),
            flavor: "-",
            ours: format!("{ms} ms, peak RSS {peak_mb:.1} MB"),
            floor: format!("{floor_ms} ms (its transcripts read)"),
            ratio: format!("{:.1}×", ms as f64 / floor_ms as f64),
            target: format!("< 1 s and < 100 MB: {}", yes_no(ms < 1000 && peak_mb < 100.0)),
        },
        Row {
            figure: "bytes `dsh tree`'s loader reads of that directory".to_owned(),
            flavor: "-",
            ours: format!("{:.1} MB of {:.1} MB", mb(read), mb(dir_bytes)),
            floor: format!("{:.1} MB (the tree's)", mb(tree_bytes)),
            ratio: format!("{:.2}×", read as f64 / tree_bytes as f64),
            target: format!("only the tree it shows: {}", yes_no(only_the_tree)),
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_tree_loads_whole_and_only_its_transcripts_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        let (_, other_bytes) = generate(&agents, "other", 1).unwrap();
        let (root, tree_bytes) = generate(&agents, "shown", 2).unwrap();
        let before = read_bytes().unwrap();
        let tree = dsh_tree::load(dir.path(), Some(&root)).unwrap();
        let read = read_bytes().unwrap() - before;
        assert_eq!(tree.walk().len(), AGENTS);
        assert!(tree.walk().iter().all(|(_, node)| node.problems.is_empty()));
        assert_eq!(tree.root.children.len(), CHILDREN);
        assert_eq!(tree.root.children[0].tool.as_deref(), Some("subagent"));
        assert!(tree.root.subtree_cost.is_some());
        // Other tests' threads read too: the margin is half the other tree.
        assert!(read < tree_bytes + other_bytes / 2, "{read} of {tree_bytes}");
    }
}
