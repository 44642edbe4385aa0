//! Parallel children against a server that interrupts, as llama-cpp-python
//! does with its default `interrupt_requests`, through the real `dsh`
//! binary: a request that arrives while another stream runs cuts that
//! stream (`data: [DONE]` after the role, before any text). Two and then
//! eight children must all complete, the parent's answer carrying every
//! result; the wait shows as queued time in `dsh tree`, and what was
//! learned (one request at a time) is kept for the next run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http::{event, read_request};

/// How long the server "evaluates" a prompt before it answers; a request
/// arriving meanwhile cuts the stream.
const EVALUATION: Duration = Duration::from_millis(300);

/// What the server saw: every arrival, and how many streams it cut.
#[derive(Debug, Default)]
struct Seen {
    arrivals: usize,
    cut: usize,
    children: usize,
}

struct Server {
    base_url: String,
    seen: Arc<Mutex<Seen>>,
}

impl Server {
    /// A parent's first request is answered with `children` calls of
    /// `subagent`.
    fn start(children: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || serve(stream, children, &log));
            }
        });
        Self { base_url, seen }
    }
}

fn serve(mut stream: TcpStream, children: usize, log: &Mutex<Seen>) {
    let Some(body) = read_request(&mut stream) else { return };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let mine = {
        let mut seen = log.lock().unwrap();
        seen.arrivals += 1;
        seen.arrivals
    };
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
    event(
        &mut stream,
        &json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
    );
    // Evaluating: another request arriving now interrupts this stream.
    let began = Instant::now();
    while began.elapsed() < EVALUATION {
        std::thread::sleep(Duration::from_millis(5));
        let mut seen = log.lock().unwrap();
        if seen.arrivals > mine {
            seen.cut += 1;
            drop(seen);
            let _ = stream.write_all(b"data: [DONE]\n\n");
            return;
        }
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let child = messages
        .iter()
        .any(|message| message["role"] == "system" && text(message).contains("You are a delegated subagent"));
    let results: Vec<String> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| text(message).to_owned())
        .collect();
    let reason = if child {
        log.lock().unwrap().children += 1;
        let prompt = messages
            .iter()
            .rev()
            .find(|message| message["role"] == "user")
            .map_or("", text);
        event(&mut stream, &content(&format!("Done: {prompt}")));
        "stop"
    } else if results.is_empty() {
        let calls: Vec<Value> = (0..children)
            .map(|index| {
                let arguments =
                    json!({"description": format!("part {index}"), "prompt": format!("Write part {index}.")});
                json!({"index": index, "id": format!("call_{index}"), "type": "function",
                       "function": {"name": "subagent", "arguments": arguments.to_string()}})
            })
            .collect();
        event(
            &mut stream,
            &json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
        );
        "tool_calls"
    } else {
        event(&mut stream, &content(&format!("Heard: {}", results.join(" | "))));
        "stop"
    };
    event(
        &mut stream,
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}),
    );
    let _ = stream.write_all(b"data: [DONE]\n\n");
}

fn text(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

fn content(text: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"content": text}}]})
}

/// `dsh` with `args` against `server`, in `dir`.
fn dsh(server: &Server, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    dsh_keyed(server, dir, args, "EMPTY")
}

/// [`dsh`] with `key` as the API key.
fn dsh_keyed(server: &Server, dir: &std::path::Path, args: &[&str], key: &str) -> std::process::Output {
    let mut command = Command::new(common::DSH);
    common::offline(&mut command);
    command
        .args(args)
        .current_dir(dir)
        .env("DSH_BASE_URL", &server.base_url)
        .env("DSH_API_KEY", key)
        .env("DSH_MODEL", "test-model")
        .output()
        .unwrap()
}

#[test]
fn parallel_children_cut_by_an_interrupting_server_all_complete() {
    for children in [2, 8] {
        let server = Server::start(children);
        let dir = tempfile::tempdir().unwrap();
        let output = dsh(&server, dir.path(), &["run", "--plain", "Have every part written."]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{children}: {stderr}");
        for index in 0..children {
            assert!(
                stdout.contains(&format!("Done: Write part {index}.")),
                "{children}: part {index} missing: {stdout}\n{stderr}"
            );
        }
        let seen = server.seen.lock().unwrap();
        assert!(seen.cut >= 1, "{children}: the server cut no stream: {seen:?}");
        assert_eq!(
            seen.children, children,
            "{children}: each child answered once: {seen:?}"
        );
        // One line says the endpoint is now sent one request at a time.
        let told = stderr.matches("it is sent one request at a time from now on").count();
        assert_eq!(told, 1, "{children}: {stderr}");
        assert!(!stderr.contains("delegations failed"), "{stderr}");
        drop(seen);

        // The waits show as queued time.
        let tree = dsh(&server, dir.path(), &["tree", "--json"]);
        let tree: Value = serde_json::from_slice(&tree.stdout).unwrap();
        let queued = tree["root"]["children"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|child| child["turns"][0]["queued_ms"].as_u64().is_some_and(|ms| ms > 0))
            .count();
        assert!(queued >= 1, "{children}: no child shows its wait: {tree}");
        let text = dsh(&server, dir.path(), &["tree"]);
        assert!(
            String::from_utf8_lossy(&text.stdout).contains(" · queued "),
            "{children}"
        );

        // Kept for the next run: one request at a time from the start.
        let kept = std::fs::read_dir(dir.path().join(".dsh/learned"))
            .unwrap()
            .next()
            .unwrap();
        let kept: Value = serde_json::from_slice(&std::fs::read(kept.unwrap().path()).unwrap()).unwrap();
        assert_eq!(kept["models"]["test-model"]["concurrency"], 1, "{kept}");
        let before = server.seen.lock().unwrap().cut;
        let again = dsh(&server, dir.path(), &["run", "--plain", "Once more."]);
        assert!(again.status.success());
        assert_eq!(
            server.seen.lock().unwrap().cut,
            before,
            "{children}: nothing cut the second time"
        );
    }
}

#[test]
fn a_run_recorded_with_a_short_key_against_an_interrupting_server_replays() {
    for key in ["x", "none", "EMPTY"] {
        let server = Server::start(2);
        let dir = tempfile::tempdir().unwrap();
        let task = "Have every part written.";
        let recorded = dsh_keyed(&server, dir.path(), &["run", "-q", "--record", "run.jsonl", task], key);
        assert!(
            recorded.status.success(),
            "{key}: {}",
            String::from_utf8_lossy(&recorded.stderr)
        );
        let cassette = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
        // The tool descriptions are as they were sent: "its own context" whole.
        assert!(!cassette.contains("[redacted]"), "{key}");
        assert!(cassette.contains("context"), "{key}");
        for _ in 0..3 {
            let replayed = dsh_keyed(&server, dir.path(), &["run", "-q", "--replay", "run.jsonl", task], key);
            let stderr = String::from_utf8_lossy(&replayed.stderr);
            assert!(replayed.status.success(), "{key}: {stderr}");
            assert_eq!(replayed.stdout, recorded.stdout, "{key}: {stderr}");
        }
    }
}
