//! The loopback OpenAI-compatible model of the resume rows ([`crate::resume`]):
//! it drives a tree of [`AGENTS`] agents through `dsh run` by what each
//! request's last message says, serving each connection on a thread of its
//! own:
//!
//! - the run's task: call `subagent` [`CHILDREN`] times (`part <i>`);
//! - `part <i>`: call `subagent` [`GRANDCHILDREN`] times (`part <i>.<j>`);
//! - `part <i>.<j>`: answer [`ANSWER_BYTES`] of text, except the
//!   [`HELD`] part while the server holds it: that request never gets an
//!   answer, so its agent, its parent and the top-level agent wait for it;
//! - a tool result: answer [`DONE`].
//!
//! It counts the answers it finished and stamps the first request it reads.

use std::io::{BufRead as _, BufReader, BufWriter, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Children of the top-level agent.
pub(crate) const CHILDREN: usize = 9;

/// Children of each child.
pub(crate) const GRANDCHILDREN: usize = 110;

/// Agents of the tree.
pub(crate) const AGENTS: usize = 1 + CHILDREN + CHILDREN * GRANDCHILDREN;

/// Bytes of each grandchild's answer: with the results its parent keeps,
/// about 100 MB of transcripts in all.
pub(crate) const ANSWER_BYTES: usize = 48_000;

/// The part the server holds: the last child's last grandchild.
pub(crate) const HELD: &str = "part 8.109";

/// The task `dsh run` is given.
pub(crate) const TASK: &str = "Split the work and delegate it.";

/// Every agent's answer once its tool results are in.
pub(crate) const DONE: &str = "all parts are done";

/// Bytes of answer per streamed delta.
const DELTA: usize = 4096;

/// What the server has seen, shared with its threads.
#[derive(Default)]
pub(crate) struct Seen {
    /// Answers written whole.
    pub(crate) answered: AtomicUsize,
    /// When the first request was read.
    pub(crate) first: Mutex<Option<Instant>>,
    /// Whether [`HELD`] is held (never answered).
    pub(crate) hold: AtomicBool,
}

impl Seen {
    /// When the first request was read, if one was.
    pub(crate) fn first(&self) -> Option<Instant> {
        *self.first.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts the server; its base URL and what it sees.
pub(crate) fn serve(hold: bool) -> Result<(String, Arc<Seen>), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let seen = Arc::new(Seen::default());
    seen.hold.store(hold, Ordering::Relaxed);
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let seen = shared.clone();
            // A request the server cannot read ends that connection only.
            std::thread::spawn(move || {
                let _ = answer_request(stream, &seen);
            });
        }
    });
    Ok((format!("http://{address}"), seen))
}

/// The text of a grandchild's answer.
fn answer() -> String {
    let line = "The part is done: these are its findings, line by line, with the numbers that matter.\n";
    line.repeat(ANSWER_BYTES / line.len() + 1)[..ANSWER_BYTES].to_owned()
}

/// `count` `subagent` calls, as one streamed delta.
fn calls(prefix: &str, count: usize) -> Value {
    let calls: Vec<Value> = (0..count)
        .map(|index| {
            let arguments =
                json!({"description": format!("{prefix}{index}"), "prompt": format!("{prefix}{index}")}).to_string();
            json!({"index": index, "id": format!("call_{index}"), "type": "function",
                "function": {"name": "subagent", "arguments": arguments}})
        })
        .collect();
    json!({"tool_calls": calls})
}

/// Reads one request and answers it as the [module docs](self) say.
fn answer_request(stream: TcpStream, seen: &Seen) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0;
    let mut first_line = String::new();
    reader.read_line(&mut first_line)?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut out = BufWriter::with_capacity(64 * 1024, stream);
    if !first_line.contains("chat/completions") {
        return out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
    seen.first
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(Instant::now);
    let request: Value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    let last = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .cloned()
        .unwrap_or_default();
    let content = last["content"].as_str().unwrap_or_default();
    if content == HELD && seen.hold.load(Ordering::Relaxed) {
        // Held: the connection stays open, unanswered, until the run dies
        // and the bench lets it go.
        while seen.hold.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return Ok(());
    }
    out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
    let part = content.strip_prefix("part ");
    if last["role"] == "tool" {
        event(&mut out, &json!({"content": DONE}), Some("stop"))?;
    } else if content == TASK {
        event(&mut out, &calls("part ", CHILDREN), None)?;
        event(&mut out, &json!({}), Some("tool_calls"))?;
    } else if let Some(part) = part.filter(|part| !part.contains('.')) {
        event(&mut out, &calls(&format!("part {part}."), GRANDCHILDREN), None)?;
        event(&mut out, &json!({}), Some("tool_calls"))?;
    } else {
        let text = answer();
        for chunk in text.as_bytes().chunks(DELTA) {
            event(&mut out, &json!({"content": String::from_utf8_lossy(chunk)}), None)?;
        }
        event(&mut out, &json!({}), Some("stop"))?;
    }
    let usage = json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    write!(out, "data: {usage}\n\ndata: [DONE]\n\n")?;
    out.flush()?;
    seen.answered.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// One SSE chunk with `delta`, and a finish reason when given.
fn event(out: &mut impl std::io::Write, delta: &Value, finish: Option<&str>) -> std::io::Result<()> {
    let chunk = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    write!(out, "data: {chunk}\n\n")
}
