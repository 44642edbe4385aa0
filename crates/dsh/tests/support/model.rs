//! A scripted OpenAI-compatible model on loopback (plain HTTP/1.1 and
//! server-sent events), for tests that run the real `dsh` binary and must
//! stop it at a chosen instant.
//!
//! A script answers each request with the chunks of its stream. The server
//! logs every request it receives, when it arrived and when its response
//! completed (its last chunk and `[DONE]` written), on one clock. It can
//! hold a chosen request: after sending some of its chunks (none, or the
//! middle of a streamed answer), it stops answering it, and every request
//! after it, until released; the test then knows the instant has come. Or
//! it holds every request a test picks, and answers the others, until it is
//! released: unanswered, or answered after all.
#![allow(dead_code)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{event, read_request};

/// What a script answers to one request: the chunks of its stream (each a
/// `data:` event), after a delay.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reply {
    /// The events, in order; `[DONE]` follows them.
    pub(crate) chunks: Vec<Value>,
    /// How long the server waits before it answers.
    pub(crate) delay: Duration,
}

impl Reply {
    /// These chunks, as they are (`[DONE]` follows them): a stream that
    /// reports usage, or one a server cuts.
    pub(crate) fn chunks(chunks: Vec<Value>) -> Self {
        Self {
            chunks,
            delay: Duration::ZERO,
        }
    }

    /// A final answer `text`, streamed in `parts` pieces of about equal size
    /// (after the role's chunk), then its finish.
    pub(crate) fn text(text: &str, parts: usize) -> Self {
        let mut chunks = vec![role()];
        chunks.extend(
            split(text, parts)
                .into_iter()
                .map(|part| delta(json!({"content": part}))),
        );
        chunks.push(finish("stop"));
        Self {
            chunks,
            delay: Duration::ZERO,
        }
    }

    /// Tool calls `(id, name, arguments)`, each call's arguments streamed in
    /// two pieces, then the finish.
    pub(crate) fn tool_calls(calls: &[(String, &str, Value)]) -> Self {
        let mut chunks = vec![role()];
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            let arguments = arguments.to_string();
            let [head, tail]: [String; 2] = split(&arguments, 2).try_into().unwrap_or_default();
            chunks.push(delta(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": head}}]}),
            ));
            chunks.push(delta(
                json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}),
            ));
        }
        chunks.push(finish("tool_calls"));
        Self {
            chunks,
            delay: Duration::ZERO,
        }
    }

    /// This reply, answered after `delay`.
    pub(crate) fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// `text` in `parts` pieces of about equal size (by characters).
fn split(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts.max(1)).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|piece| piece.iter().collect()).collect();
    pieces.resize(parts.max(1), String::new());
    pieces
}

/// The chunk that names the role and carries no text (llama-cpp-python's
/// first).
pub(crate) fn role() -> Value {
    delta(json!({"role": "assistant"}))
}

/// A chunk of answer text.
pub(crate) fn content(text: &str) -> Value {
    delta(json!({"content": text}))
}

/// A chunk with this `delta`.
pub(crate) fn delta(delta: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

/// The chunk that ends an answer for `reason` (`stop`, `tool_calls`, …).
pub(crate) fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// The script: a reply to each request body.
pub(crate) type Script = dyn Fn(&Value) -> Reply + Send + Sync;

/// One request the server received.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    /// Its body.
    pub(crate) body: Value,
    /// The run of `dsh` it came from ([`ModelServer::next_run`]).
    pub(crate) run: usize,
    /// When it arrived, on the server's clock.
    pub(crate) arrived: u64,
    /// When its response completed, on the server's clock; `None` when it
    /// never did (held, or its client went away).
    pub(crate) completed: Option<u64>,
    /// Whether the server held it.
    pub(crate) held: bool,
}

/// Where the server stops answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HoldAt {
    /// The request, counted from 1 over the server's life.
    pub(crate) request: usize,
    /// How many of its chunks are sent first (0: none, not even the
    /// response's head).
    pub(crate) chunks: usize,
}

/// Which requests a picked hold holds.
pub(crate) type Pick = dyn Fn(&Value) -> bool + Send + Sync;

#[derive(Default)]
struct Hold {
    at: Option<HoldAt>,
    /// Set when the hold point was reached: every later request is held too.
    reached: bool,
    /// The hold point as the first request this picks (no chunk sent).
    first: Option<Arc<Pick>>,
    /// Held as they arrive, with no chunk sent: the requests this picks.
    pick: Option<Arc<Pick>>,
    /// How many requests are held now.
    held: usize,
    /// Bumped by each release; held requests end when it changes.
    generation: u64,
    /// Whether the last release answers the held requests after all.
    answer: bool,
}

struct State {
    script: Box<Script>,
    log: Mutex<Vec<Exchange>>,
    clock: AtomicU64,
    run: AtomicU64,
    hold: Mutex<Hold>,
    changed: Condvar,
}

impl State {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    fn log(&self) -> MutexGuard<'_, Vec<Exchange>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn hold(&self) -> MutexGuard<'_, Hold> {
        self.hold.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The server, on a port of its own; it lives as long as the test.
pub(crate) struct ModelServer {
    pub(crate) base_url: String,
    state: Arc<State>,
}

impl ModelServer {
    /// Starts a server that answers each request with `script`'s reply.
    pub(crate) fn start(script: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let state = Arc::new(State {
            script: Box::new(script),
            log: Mutex::default(),
            clock: AtomicU64::new(0),
            run: AtomicU64::new(0),
            hold: Mutex::default(),
            changed: Condvar::new(),
        });
        let serving = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let state = serving.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Self { base_url, state }
    }

    /// Every request so far, in the order they arrived.
    pub(crate) fn log(&self) -> Vec<Exchange> {
        self.state.log().clone()
    }

    /// Marks the requests from now on as the next run's.
    pub(crate) fn next_run(&self) -> usize {
        self.state.run.fetch_add(1, Ordering::SeqCst) as usize + 1
    }

    /// Holds the request `at` (and every one after it) until [`release`](Self::release).
    pub(crate) fn hold_at(&self, at: HoldAt) {
        let mut hold = self.state.hold();
        hold.at = Some(at);
        hold.reached = false;
    }

    /// Holds the first request `first` picks (no chunk sent), and every one
    /// after it, until [`release`](Self::release): a hold point named by
    /// what the request is, not by its number.
    pub(crate) fn hold_first(&self, first: impl Fn(&Value) -> bool + Send + Sync + 'static) {
        let mut hold = self.state.hold();
        hold.first = Some(Arc::new(first));
        hold.reached = false;
    }

    /// Holds every request `pick` picks (no chunk sent) and answers the
    /// others, until [`release`](Self::release) or
    /// [`answer_held`](Self::answer_held).
    pub(crate) fn hold_picked(&self, pick: impl Fn(&Value) -> bool + Send + Sync + 'static) {
        self.state.hold().pick = Some(Arc::new(pick));
    }

    /// Whether the hold point was reached.
    pub(crate) fn reached(&self) -> bool {
        self.state.hold().reached
    }

    /// How many requests are held now.
    pub(crate) fn held(&self) -> usize {
        self.state.hold().held
    }

    /// Waits until `ready` holds of the log, or `timeout` passes; whether
    /// it held.
    pub(crate) fn wait_for(&self, timeout: Duration, ready: impl Fn(&[Exchange]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while !ready(&self.log()) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Waits up to `timeout` for the hold point; whether it was reached.
    pub(crate) fn wait_reached(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut hold = self.state.hold();
        while !hold.reached {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            hold = self
                .state
                .changed
                .wait_timeout(hold, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Ends every held request (their connections close unanswered) and
    /// answers every later one.
    pub(crate) fn release(&self) {
        self.end_hold(false);
    }

    /// Answers every held request after all (whole, from where it stopped)
    /// and every later one.
    pub(crate) fn answer_held(&self) {
        self.end_hold(true);
    }

    fn end_hold(&self, answer: bool) {
        let mut hold = self.state.hold();
        hold.at = None;
        hold.reached = false;
        hold.first = None;
        hold.pick = None;
        hold.answer = answer;
        hold.generation += 1;
        self.state.changed.notify_all();
    }

    /// The log, one line a request: its number, run, whether it completed
    /// or was held, and its body's messages in short.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for (index, exchange) in self.log().iter().enumerate() {
            let state = match (exchange.completed, exchange.held) {
                (Some(_), _) => "completed",
                (None, true) => "held",
                (None, false) => "unanswered",
            };
            out.push_str(&format!(
                "#{} run {} {state}: {}\n",
                index + 1,
                exchange.run,
                short(&exchange.body)
            ));
        }
        out
    }
}

/// A request's messages in short: each role and the start of its text, or
/// the tools it called.
pub(crate) fn short(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .map(|message| {
            let text = message["content"].as_str().unwrap_or_default();
            let calls: Vec<&str> = message["tool_calls"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .filter_map(|call| call["function"]["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            let head: String = text.chars().take(60).collect::<String>().replace('\n', "⏎");
            if calls.is_empty() {
                format!("{}:{head:?}", message["role"].as_str().unwrap_or("?"))
            } else {
                format!("{}:{head:?}{calls:?}", message["role"].as_str().unwrap_or("?"))
            }
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Answers one request on `stream` (and closes it), or holds it.
fn serve(mut stream: TcpStream, state: &State) {
    let Some(body) = read_request(&mut stream) else { return };
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let (number, index) = {
        let mut log = state.log();
        log.push(Exchange {
            body: body.clone(),
            run: state.run.load(Ordering::SeqCst) as usize,
            arrived: state.tick(),
            completed: None,
            held: false,
        });
        (log.len(), log.len() - 1)
    };
    let reply = (state.script)(&body);
    std::thread::sleep(reply.delay);
    let sent_first = {
        let mut hold = state.hold();
        let point = hold.at.filter(|at| at.request == number).map(|at| at.chunks);
        let point = point.or_else(|| hold.first.as_ref().filter(|first| first(&body)).map(|_| 0));
        let first = match (&point, &hold.pick) {
            _ if hold.reached => Some(0),
            (Some(chunks), _) => Some(*chunks),
            (None, Some(pick)) if pick(&body) => Some(0),
            (None, _) => None,
        };
        if first.is_some() {
            state.log()[index].held = true;
            hold.held += 1;
        }
        if point.is_some() {
            hold.reached = true;
        }
        first.map(|chunks| (chunks, hold.generation))
    };
    let mut sent = 0;
    if let Some((chunks, generation)) = sent_first {
        if chunks > 0 {
            head(&mut stream);
            for chunk in reply.chunks.iter().take(chunks) {
                event(&mut stream, chunk);
            }
            let _ = stream.flush();
            sent = chunks;
        }
        let mut hold = state.hold();
        state.changed.notify_all();
        while hold.generation == generation {
            hold = state.changed.wait(hold).unwrap_or_else(PoisonError::into_inner);
        }
        hold.held -= 1;
        if !hold.answer {
            return;
        }
    }
    if sent == 0 {
        head(&mut stream);
    }
    for chunk in reply.chunks.iter().skip(sent) {
        event(&mut stream, chunk);
    }
    let _ = stream.flush();
    // Completed from here: the client has every chunk but the end, which
    // follows at once.
    state.log()[index].completed = Some(state.tick());
    let _ = stream.write_all(b"data: [DONE]\n\n");
    let _ = stream.flush();
}

fn head(stream: &mut TcpStream) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
}
