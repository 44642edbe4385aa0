//! A plain ACP client over an agent's stdio, for the check: requests by
//! id, a reader that bounds every line and everything read before an
//! answer, and the agent's own requests answered as a client without a
//! file system, terminal or person would.

use std::collections::HashMap;
use std::time::Duration;

use dsh_process::{Child, ChildSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use super::rfd::Trail;
use crate::wording;

/// The longest line the check reads from the agent's stdout.
pub(crate) const MAX_LINE_BYTES: usize = 1024 * 1024;

/// The most the check reads while it waits for one answer.
pub(crate) const MAX_READ_BYTES: usize = 8 * 1024 * 1024;

/// One thing the agent wrote on stdout.
#[derive(Debug)]
enum Line {
    /// A JSON value.
    Json(Value),
    /// A line that is not JSON (its start).
    NotJson(String),
    /// A line longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// Stdout closed.
    Closed,
}

/// What the agent did instead of answering.
#[derive(Debug)]
pub(crate) enum NoAnswer {
    /// No answer within the deadline.
    TimedOut,
    /// It closed stdout (it exited, most likely).
    Closed,
    /// It wrote a line that is not JSON.
    NotJson(String),
    /// It wrote a line longer than the bound.
    TooLong,
    /// It wrote more than the bound without answering.
    Flood,
    /// The pipe to it broke.
    Write(String),
}

/// An answer: its result, or its error object.
pub(crate) type Answer = Result<Value, Value>;

/// The connection to the agent, and the updates of the turn under way.
pub(crate) struct Client {
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Line>,
    next_id: u64,
    /// The text of `agent_message_chunk` updates since the last [`Client::take_text`].
    text: String,
    /// `session/update` kinds seen, for the report.
    pub(crate) updates: Vec<String>,
    /// Agent-to-client requests answered so far (method names).
    pub(crate) asked: Vec<String>,
    /// Whether the connection broke (closed, a line too long, a flood, a
    /// failed write): nothing more can be asked.
    pub(crate) broken: bool,
    /// Every update and prompt answer, in order, for the Subagents RFD check.
    pub(super) trail: Trail,
    /// The session of each `session/prompt` not answered yet, by request id.
    prompts: HashMap<u64, String>,
}

impl NoAnswer {
    /// What the agent did instead of answering `method`, in a line.
    pub(crate) fn said(&self, method: &str, deadline: Duration) -> String {
        const MIB: usize = 1024 * 1024;
        match self {
            Self::TimedOut => wording::check_timed_out(method, deadline),
            Self::Closed => wording::check_closed(method),
            Self::NotJson(start) => wording::check_not_json(method, start),
            Self::TooLong => wording::check_line_too_long(method, MAX_LINE_BYTES / MIB),
            Self::Flood => wording::check_flood(method, MAX_READ_BYTES / MIB),
            Self::Write(error) => wording::check_not_sent(method, error),
        }
    }
}

impl Client {
    /// A client over a spawned agent's pipes.
    pub(crate) fn new(stdin: ChildStdin, stdout: ChildStdout) -> Self {
        let (tx, lines) = mpsc::channel(64);
        tokio::spawn(read_lines(stdout, tx));
        Self {
            stdin: Some(stdin),
            lines,
            next_id: 0,
            text: String::new(),
            updates: Vec::new(),
            asked: Vec::new(),
            broken: false,
            trail: Trail::default(),
            prompts: HashMap::new(),
        }
    }

    /// Sends a request and waits up to `deadline` for its answer; what the
    /// agent does meanwhile (updates, its own requests) is handled.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Duration,
    ) -> Result<Answer, NoAnswer> {
        let id = self.send_request(method, params).await?;
        self.answer(id, deadline).await
    }

    /// Sends a request and returns its id, without waiting.
    pub(crate) async fn send_request(&mut self, method: &str, params: Value) -> Result<u64, NoAnswer> {
        self.next_id += 1;
        let id = self.next_id;
        if method == "session/prompt" {
            let session = params["sessionId"].as_str().unwrap_or_default();
            self.prompts.insert(id, session.to_owned());
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Sends a notification.
    pub(crate) async fn notify(&mut self, method: &str, params: Value) -> Result<(), NoAnswer> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// The answer to request `id`, within `deadline`.
    pub(crate) async fn answer(&mut self, id: u64, deadline: Duration) -> Result<Answer, NoAnswer> {
        let waited = tokio::time::timeout(deadline, self.answer_unbounded(id)).await;
        let answer = waited.unwrap_or(Err(NoAnswer::TimedOut));
        if let Err(NoAnswer::Closed | NoAnswer::TooLong | NoAnswer::Flood | NoAnswer::Write(_)) = &answer {
            self.broken = true;
        }
        answer
    }

    async fn answer_unbounded(&mut self, id: u64) -> Result<Answer, NoAnswer> {
        let mut read = 0usize;
        loop {
            let line = self.lines.recv().await.unwrap_or(Line::Closed);
            let message = match line {
                Line::Json(message) => message,
                Line::NotJson(start) => return Err(NoAnswer::NotJson(start)),
                Line::TooLong => return Err(NoAnswer::TooLong),
                Line::Closed => return Err(NoAnswer::Closed),
            };
            read += message.to_string().len();
            if read > MAX_READ_BYTES {
                return Err(NoAnswer::Flood);
            }
            let answered = message.get("id").and_then(Value::as_u64);
            if let (None, Some(answered)) = (message.get("method"), answered) {
                let answer = match message.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                };
                if let Some(session) = self.prompts.remove(&answered) {
                    self.trail.answered(&session, &answer);
                }
                if answered == id {
                    return Ok(answer);
                }
                continue;
            }
            self.handle(&message).await?;
        }
    }

    /// An update, or a request of the agent's, read while waiting.
    async fn handle(&mut self, message: &Value) -> Result<(), NoAnswer> {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return Ok(());
        };
        if method == "session/update" {
            self.trail.update(&message["params"]);
            let update = &message["params"]["update"];
            if let Some(kind) = update.get("sessionUpdate").and_then(Value::as_str)
                && !self.updates.iter().any(|seen| seen == kind)
            {
                self.updates.push(kind.to_owned());
            }
            if update["sessionUpdate"] == "agent_message_chunk"
                && let Some(text) = update["content"]["text"].as_str()
            {
                self.text.push_str(text);
            }
            return Ok(());
        }
        let Some(id) = message.get("id").cloned() else {
            return Ok(());
        };
        self.asked.push(method.to_owned());
        let answer = if method == "session/request_permission" {
            json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "cancelled"}}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": wording::CHECK_NO_SUCH_CLIENT_METHOD}})
        };
        self.send(&answer).await
    }

    /// The answer text streamed since the last call.
    pub(crate) fn take_text(&mut self) -> String {
        std::mem::take(&mut self.text)
    }

    /// Closes the agent's stdin: the first rung of its teardown.
    pub(crate) fn close(&mut self) {
        self.stdin = None;
    }

    async fn send(&mut self, message: &Value) -> Result<(), NoAnswer> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(NoAnswer::Write(wording::CHECK_STDIN_CLOSED.to_owned()));
        };
        let mut line = message.to_string();
        line.push('\n');
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        };
        let sent = written.await.map_err(|error| NoAnswer::Write(error.to_string()));
        self.broken |= sent.is_err();
        sent
    }
}

/// Reads stdout line by line into `tx`, each line bounded.
async fn read_lines(stdout: ChildStdout, tx: mpsc::Sender<Line>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let read = loop {
            let buffer = match reader.fill_buf().await {
                Ok(buffer) => buffer,
                Err(_) => break None,
            };
            if buffer.is_empty() {
                break if line.is_empty() { None } else { Some(false) };
            }
            let (taken, ended) = match buffer.iter().position(|byte| *byte == b'\n') {
                Some(at) => (at + 1, true),
                None => (buffer.len(), false),
            };
            line.extend_from_slice(&buffer[..taken]);
            reader.consume(taken);
            if line.len() > MAX_LINE_BYTES {
                break Some(true);
            }
            if ended {
                break Some(false);
            }
        };
        let message = match read {
            None => Line::Closed,
            Some(true) => Line::TooLong,
            Some(false) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_str(text) {
                    Ok(value) => Line::Json(value),
                    Err(_) => Line::NotJson(text.chars().take(80).collect()),
                }
            }
        };
        let last = matches!(message, Line::Closed | Line::TooLong);
        if tx.send(message).await.is_err() || last {
            return;
        }
    }
}

/// Spawns the agent: its process and a client over its pipes.
pub(crate) fn spawn(spec: &ChildSpec) -> Result<(Child, Client), dsh_process::SpawnError> {
    let (child, pipes) = spec.spawn()?;
    Ok((child, Client::new(pipes.stdin, pipes.stdout)))
}
