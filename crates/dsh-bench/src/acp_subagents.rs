//! The Subagents RFD in `dsh acp`, measured over one long-lived `dsh acp`
//! process driven as a raw JSON-RPC client on its stdio (the embedded
//! scripted model; nothing reaches the network):
//!
//! - **Announce and stream overhead.** One prompt whose parent delegates to
//!   one in-process child that answers a few words, then answers itself:
//!   `session/prompt` → its answer, every notification read. On a
//!   connection whose client advertised `subagents` (the child announced,
//!   its text on its own session, its terminal state) against one that did
//!   not (the same run, nothing of the child's own), interleaved sample by
//!   sample, each prompt on a fresh session. Target: at most 10 % more.
//! - **Per-child cancel.** A prompt whose child's model call waits a
//!   minute: from the `session/cancel` with the child's id, sent as its
//!   announcement is read, to its terminal `cancelled` state, which is sent
//!   once its model call was cancelled and its run ended. Its floor is the
//!   same connection's own round trip: a `session/prompt` with that child's
//!   id, refused at once. Target: under 50 ms at p99.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Row, ratio};

/// How long one message may take before the bench gives up.
const GUARD: Duration = Duration::from_secs(60);

/// The parent delegates once (a slow child when the prompt says `cancel`),
/// then answers; a child answers a few words, or waits a minute.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent", "last_user_contains": "slow"}, "reply": {"text": "never", "delay_ms": 60000}},
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "one two three four five six seven eight"}},
  {"when": {"last_message": "user", "last_user_contains": "cancel"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "slow one", "prompt": "be slow"}}]}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "child", "prompt": "answer"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "done"}}
]}"#;

/// A scratch directory with the script; removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("dsh-bench-subagents-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("script.json"), SCRIPT))
            .map_err(|error| format!("cannot write {}: {error}", dir.display()))?;
        Ok(Self(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One `dsh acp` process and its stdout lines.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    next_id: u64,
}

impl Peer {
    /// Starts `dsh acp` on the script in `dir`; `initialize`, advertising
    /// `subagents` when asked.
    fn start(dsh: &Path, dir: &Path, subagents: bool) -> Result<Self, String> {
        let script = dir.join("script.json");
        let mut child = crate::dsh::dsh_command(dsh)
            .args(["acp", "--quiet", "--script"])
            .arg(&script)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", dsh.display()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("dsh acp has no pipes".to_owned());
        };
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(Ok(value)) = line.map(|line| serde_json::from_str::<Value>(&line)) else {
                    break;
                };
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let mut peer = Self {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        let capabilities = if subagents { json!({"subagents": {}}) } else { json!({}) };
        peer.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        )?;
        Ok(peer)
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}")
            .and_then(|()| self.stdin.flush())
            .map_err(|error| format!("dsh acp's stdin: {error}"))
    }

    fn next(&self) -> Result<Value, String> {
        self.lines
            .recv_timeout(GUARD)
            .map_err(|_| "dsh acp sent nothing in time".to_owned())
    }

    /// Sends a request; returns its id.
    fn ask(&mut self, method: &str, params: Value) -> Result<u64, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Reads until the response to `id`, calling `seen` with every
    /// notification before it; returns the response.
    fn until(&self, id: u64, mut seen: impl FnMut(&Value) -> Result<(), String>) -> Result<Value, String> {
        loop {
            let message = self.next()?;
            if message["id"] == id && message.get("method").is_none() {
                return Ok(message);
            }
            seen(&message)?;
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.ask(method, params)?;
        self.until(id, |_| Ok(()))
    }

    fn new_session(&mut self, dir: &Path) -> Result<String, String> {
        let answer = self.request("session/new", json!({"cwd": dir, "mcpServers": []}))?;
        answer["result"]["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("session/new answered {answer}"))
    }

    fn prompt(&mut self, session: &str, text: &str) -> Result<u64, String> {
        self.ask(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One delegating prompt on a fresh session, timed from the request to its
/// answer (every notification read).
fn delegation(peer: &mut Peer, dir: &Path) -> Result<Duration, String> {
    let session = peer.new_session(dir)?;
    let started = Instant::now();
    let id = peer.prompt(&session, "go")?;
    let answer = peer.until(id, |_| Ok(()))?;
    let took = started.elapsed();
    match answer["result"]["stopReason"].as_str() {
        Some("end_turn") => Ok(took),
        _ => Err(format!("the delegating prompt answered {answer}")),
    }
}

/// One per-child cancel: the slow child's announcement, then the time to
/// its terminal state, and the same connection's refused round trip.
fn cancel(peer: &mut Peer, dir: &Path) -> Result<(Duration, Duration), String> {
    let session = peer.new_session(dir)?;
    let id = peer.prompt(&session, "cancel")?;
    let mut child = None;
    let mut cancelled_in = None;
    let mut sent_at = Instant::now();
    let answer = peer.until(id, |message| {
        let update = &message["params"]["update"];
        if update["sessionUpdate"] != "subagent_update" {
            return Ok(());
        }
        match update["state"]["state"].as_str() {
            Some("running") if child.is_none() => {
                child = update["sessionId"].as_str().map(str::to_owned);
                sent_at = Instant::now();
                let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": child}});
                writeln!(&peer.stdin, "{cancel}").map_err(|error| error.to_string())?;
            }
            Some("idle") if update["state"]["stopReason"] == "cancelled" => {
                cancelled_in = Some(sent_at.elapsed());
            }
            _ => {}
        }
        Ok(())
    })?;
    let (Some(child), Some(cancelled_in)) = (child, cancelled_in) else {
        return Err(format!("no cancelled child before the answer {answer}"));
    };
    let started = Instant::now();
    let refused = peer.request(
        "session/prompt",
        json!({"sessionId": child, "prompt": [{"type": "text", "text": "hi"}]}),
    )?;
    let round_trip = started.elapsed();
    if refused.get("error").is_none() {
        return Err(format!("a prompt to a child's session was answered {refused}"));
    }
    Ok((cancelled_in, round_trip))
}

fn millis(duration: Duration) -> f64 {
    crate::micros(duration) / 1000.0
}

fn sorted(mut samples: Vec<Duration>) -> Vec<Duration> {
    samples.sort_unstable();
    samples
}

/// The two figures, `samples` samples each after one warm-up.
pub fn rows(samples: usize) -> Result<Vec<Row>, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let dir = Scratch::new()?;
    let mut plain = Peer::start(&dsh, dir.path(), false)?;
    let mut asking = Peer::start(&dsh, dir.path(), true)?;
    delegation(&mut plain, dir.path())?;
    delegation(&mut asking, dir.path())?;
    cancel(&mut asking, dir.path())?;
    let (mut without, mut with, mut cancels, mut trips) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..samples.max(1) {
        without.push(delegation(&mut plain, dir.path())?);
        with.push(delegation(&mut asking, dir.path())?);
        let (cancelled, trip) = cancel(&mut asking, dir.path())?;
        cancels.push(cancelled);
        trips.push(trip);
    }
    let (without, with, cancels, trips) = (sorted(without), sorted(with), sorted(cancels), sorted(trips));
    let n = without.len();
    let mut rows = Vec::new();
    for (name, p) in [("p50", 0.5), ("p90", 0.9)] {
        let (ours, floor) = (
            millis(crate::percentile(&with, p)),
            millis(crate::percentile(&without, p)),
        );
        let times = ratio(ours, floor);
        rows.push(Row {
            figure: format!("`dsh acp` delegation with `subagents` (child announced, streamed, ended) vs without ({name}, {n} samples)"),
            flavor: "-",
            ours: format!("{ours:.2} ms"),
            floor: format!("{floor:.2} ms (without `subagents`)"),
            ratio: format!("{times:.2}×"),
            target: format!("≤ 1.10× without: {}", crate::yes_no(times <= 1.10)),
        });
    }
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (ours, floor) = (
            millis(crate::percentile(&cancels, p)),
            millis(crate::percentile(&trips, p)),
        );
        rows.push(Row {
            figure: format!("per-child `session/cancel` → the child's `cancelled` state, its model call cancelled ({name}, {n} samples)"),
            flavor: "-",
            ours: format!("{ours:.2} ms"),
            floor: format!("{floor:.2} ms (a refused request's round trip)"),
            ratio: format!("{:.1}×", ratio(ours, floor)),
            target: if p > 0.9 {
                format!("< 50 ms: {}", crate::yes_no(ours < 50.0))
            } else {
                "(none)".to_owned()
            },
        });
    }
    Ok(rows)
}

/// The row that stands for these figures when they could not be measured.
pub fn failed_row(error: &str) -> Row {
    Row {
        figure: "`dsh acp` with `subagents`: announce overhead and per-child cancel".to_owned(),
        flavor: "-",
        ours: format!("FAILED: {error}"),
        floor: "-".to_owned(),
        ratio: "-".to_owned(),
        target: "(none)".to_owned(),
    }
}
