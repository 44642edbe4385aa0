//! The context fit end to end, through the real `dsh` binary: a parent
//! starts four children in parallel, each answers 2 MB, and the parent's
//! next request must fit a 24,000-token window. The model is a local
//! OpenAI-compatible server (plain HTTP/1.1 and server-sent events on
//! loopback) that counts a request's tokens as its body's bytes over four
//! plus its `max_tokens`, and refuses one over its window as a real server
//! does: OpenAI's HTTP 400 `context_length_exceeded`, llama.cpp's
//! `exceed_context_size_error` with `n_ctx`, or llama-cpp-python's HTTP 200
//! and empty stream, whose 400 only a request that is not streamed gets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::http::{event, read_request};

/// The window the server holds, in tokens.
const WINDOW: u64 = 24_000;

/// What each child answers: `HEAD`, 2 MB, `TAIL`.
const ANSWER_BYTES: usize = 2 * 1024 * 1024;

/// How the server refuses a request over its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// OpenAI (and llama-cpp-python): HTTP 400, `context_length_exceeded`,
    /// `This model's maximum context length is N tokens. …`.
    OpenAi,
    /// llama.cpp's server: HTTP 400, `exceed_context_size_error` with `n_ctx`.
    LlamaCpp,
    /// llama-cpp-python: a streamed request gets HTTP 200 and an empty
    /// stream (its error is raised after the headers); only a request that
    /// is not streamed gets its HTTP 400 `context_length_exceeded`.
    LlamaCppPython,
    /// OpenAI's refusal that names no window.
    Unnamed,
}

/// How the server counts a request's tokens and what usage it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counting {
    /// The body's bytes it counts as one token.
    bytes_per_token: u64,
    /// What its answers' usage says of the prompt.
    usage: Usage,
    /// Whether the tool definitions count.
    tools: Tools,
}

/// Whether a server counts a request's tool definitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tools {
    /// As the rest of the body.
    Counted,
    /// Not at all: a chat template that does not render them
    /// (llama-cpp-python's, unless a tool is forced).
    Left,
}

/// What the server's usage says of the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Usage {
    /// Its count.
    Counted,
    /// `prompt_tokens` 0.
    Zero,
    /// No usage at all, streamed or not.
    None,
    /// No usage in a stream, its count in a whole answer (llama-cpp-python).
    Unstreamed,
}

/// Four bytes a token, usage reported: dsh's own estimate.
const AS_DSH_COUNTS: Counting = Counting {
    bytes_per_token: 4,
    usage: Usage::Counted,
    tools: Tools::Counted,
};

/// One request the server saw: its tokens, whether it refused it, and
/// whether it was streamed.
#[derive(Clone, Copy, Debug)]
struct Seen {
    tokens: u64,
    refused: bool,
    streamed: bool,
}

/// The server, on a port of its own; it lives as long as the test.
struct Server {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(shape: Shape) -> Self {
        Self::counting(shape, AS_DSH_COUNTS)
    }

    fn counting(shape: Shape, counting: Counting) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || serve(stream, shape, counting, &log));
            }
        });
        Self { base_url, seen }
    }

    fn refusals(&self) -> usize {
        self.seen.lock().unwrap().iter().filter(|seen| seen.refused).count()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers one request on `stream` (and closes it).
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn serve(mut stream: TcpStream, shape: Shape, counting: Counting, log: &Mutex<Vec<Seen>>) {
    let Some(body) = read_request(&mut stream) else { return };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let counted = match counting.tools {
        Tools::Counted => body.len(),
        Tools::Left => body.len() - request["tools"].to_string().len(),
    };
    let tokens = (counted as u64).div_ceil(counting.bytes_per_token);
    let max_tokens = request["max_tokens"].as_u64().unwrap_or(0);
    let refused = tokens + max_tokens > WINDOW;
    let streamed = request["stream"] == true;
    log.lock().unwrap().push(Seen {
        tokens,
        refused,
        streamed,
    });
    if refused && streamed && shape == Shape::LlamaCppPython {
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
        return;
    }
    if refused {
        let error = match shape {
            Shape::OpenAi | Shape::LlamaCppPython => json!({"error": {
                "message": format!("This model's maximum context length is {WINDOW} tokens. However, you requested {} tokens ({tokens} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.", tokens + max_tokens),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            Shape::LlamaCpp => json!({"error": {
                "code": 400,
                "message": format!("request ({tokens} tokens) exceeds the available context size ({WINDOW} tokens), try increasing it"),
                "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": WINDOW}}),
            Shape::Unnamed => json!({"error": {
                "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}),
        };
        let body = error.to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    if !streamed {
        // Asked to count (`max_tokens` 1): one token of answer, and the
        // count where this server gives one.
        let usage = match counting.usage {
            Usage::Counted | Usage::Unstreamed => {
                json!({"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1})
            }
            Usage::Zero => json!({"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1}),
            Usage::None => Value::Null,
        };
        let body = json!({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "length"}], "usage": usage}).to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let child = messages
        .iter()
        .any(|message| message["role"] == "system" && text(message).contains("You are a delegated subagent"));
    let results: Vec<String> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| text(message).to_owned())
        .collect();
    // The parent answers its user: a greeting at once, any other task by
    // delegating it in four parts; and the results of its children.
    let asked = messages
        .last()
        .filter(|message| message["role"] == "user")
        .map(|message| text(message).to_owned());
    let finish = if child {
        let answer = format!("HEAD{}TAIL", "x".repeat(ANSWER_BYTES));
        for piece in answer.as_bytes().chunks(64 * 1024) {
            let piece = std::str::from_utf8(piece).unwrap_or_default();
            event(
                &mut stream,
                &json!({"choices": [{"index": 0, "delta": {"content": piece}}]}),
            );
        }
        "stop"
    } else if asked.as_deref().is_some_and(|asked| asked.starts_with("Say hello")) {
        event(
            &mut stream,
            &json!({"choices": [{"index": 0, "delta": {"content": "Hello."}}]}),
        );
        "stop"
    } else if asked.is_some() {
        let calls: Vec<Value> = (0..4)
            .map(|index| {
                let arguments = json!({"description": format!("part {index}"), "prompt": format!("Answer part {index} at length.")});
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
        let heads = results.iter().filter(|text| text.starts_with("HEAD")).count();
        let tails = results.iter().filter(|text| text.ends_with("TAIL")).count();
        let answer = format!("{} results, heads {heads}, tails {tails}", results.len());
        event(
            &mut stream,
            &json!({"choices": [{"index": 0, "delta": {"content": answer}}]}),
        );
        "stop"
    };
    event(
        &mut stream,
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    );
    let prompt_tokens = match counting.usage {
        Usage::Counted => Some(tokens),
        Usage::Zero => Some(0),
        Usage::None | Usage::Unstreamed => None,
    };
    if let Some(prompt_tokens) = prompt_tokens {
        event(
            &mut stream,
            &json!({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 10, "total_tokens": prompt_tokens + 10}}),
        );
    }
    let _ = stream.write_all(b"data: [DONE]\n\n");
}

fn text(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// `dsh run` against `server` with `args`, over the data directory `data`.
fn run_in(server: &Server, data: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(common::DSH);
    common::offline(&mut command);
    command
        .args(["run", "--data-dir"])
        .arg(data)
        .args(args)
        .current_dir(data.parent().unwrap())
        .env("DSH_BASE_URL", &server.base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "test-model");
    command.output().unwrap()
}

/// `dsh run` against `server`, with `window` in `DSH_CONTEXT_WINDOW` when set.
fn run(server: &Server, window: Option<u64>) -> (std::process::Output, tempfile::TempDir) {
    run_prompt(
        server,
        window,
        "Split the report into four parts and have each written at length.",
    )
}

/// [`run`] with `prompt`.
fn run_prompt(server: &Server, window: Option<u64>, prompt: &str) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut command = Command::new(common::DSH);
    command
        .args(["run", "--data-dir"])
        .arg(&data)
        .arg(prompt)
        .current_dir(dir.path())
        .env("DSH_BASE_URL", &server.base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "test-model")
        .env_remove("DSH_CONTEXT_WINDOW")
        .env_remove("DSH_LOG")
        .env_remove("DSH_PARENT_CONFIGS");
    if let Some(window) = window {
        command.env("DSH_CONTEXT_WINDOW", window.to_string());
    }
    (command.output().unwrap(), dir)
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The parent's request that carried the four results: the largest accepted.
fn fitted(server: &Server) -> Seen {
    server
        .seen()
        .into_iter()
        .filter(|seen| !seen.refused)
        .max_by_key(|seen| seen.tokens)
        .unwrap()
}

#[test]
fn with_the_window_configured_no_request_is_refused() {
    for shape in [Shape::OpenAi, Shape::LlamaCpp] {
        let server = Server::start(shape);
        let (output, _dir) = run(&server, Some(WINDOW));
        assert!(output.status.success(), "{shape:?}: {}", stderr(&output));
        assert_eq!(stdout(&output).trim(), "4 results, heads 4, tails 4", "{shape:?}");
        assert_eq!(server.refusals(), 0, "{shape:?}: {:?}", server.seen());
        // Four children, and the parent's two requests.
        assert_eq!(server.seen().len(), 6, "{shape:?}: {:?}", server.seen());
        assert!(
            fitted(&server).tokens + 4_096 <= WINDOW,
            "{shape:?}: {:?}",
            server.seen()
        );
    }
}

#[test]
fn with_the_window_unknown_one_refusal_teaches_it_and_the_run_finishes() {
    for shape in [Shape::OpenAi, Shape::LlamaCpp, Shape::LlamaCppPython] {
        let server = Server::start(shape);
        let (output, _dir) = run(&server, None);
        assert!(output.status.success(), "{shape:?}: {}", stderr(&output));
        assert_eq!(stdout(&output).trim(), "4 results, heads 4, tails 4", "{shape:?}");
        // llama-cpp-python's empty stream is asked once more, not streamed,
        // to read the refusal: the same one refusal, seen twice.
        let refused: Vec<bool> = server
            .seen()
            .iter()
            .filter(|seen| seen.refused)
            .map(|seen| seen.streamed)
            .collect();
        let expected = match shape {
            Shape::LlamaCppPython => vec![true, false],
            _ => vec![true],
        };
        assert_eq!(refused, expected, "{shape:?}: {:?}", server.seen());
        assert!(
            fitted(&server).tokens + 4_096 <= WINDOW,
            "{shape:?}: {:?}",
            server.seen()
        );
        // What was learned shows on stderr at the default log level.
        assert!(
            stderr(&output).contains("learned context window 24000 for model test-model from the server's refusal"),
            "{shape:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn a_refusal_that_names_no_window_is_fitted_again_to_the_configured_one() {
    // A server that counts three bytes a token, reports no usage and names
    // no window: dsh's first fit, at four, is refused; the second, with a
    // larger estimate, is taken.
    let server = Server::counting(
        Shape::Unnamed,
        Counting {
            bytes_per_token: 3,
            usage: Usage::None,
            tools: Tools::Counted,
        },
    );
    let (output, _dir) = run(&server, Some(WINDOW));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "4 results, heads 4, tails 4");
    assert_eq!(server.refusals(), 1, "{:?}", server.seen());
}

#[test]
fn a_prompt_count_of_zero_or_none_never_leaves_the_conversation_out() {
    // A long prompt: an estimate that took the zero for the conversation's
    // size would give the results room the window does not have.
    let prompt = format!(
        "Split the report into four parts and have each written at length. {}",
        "Context: ".repeat(4_000)
    );
    for usage in [Usage::Zero, Usage::None] {
        let server = Server::counting(
            Shape::OpenAi,
            Counting {
                bytes_per_token: 4,
                usage,
                tools: Tools::Counted,
            },
        );
        let (output, _dir) = run_prompt(&server, Some(WINDOW), &prompt);
        assert!(output.status.success(), "{usage:?}: {}", stderr(&output));
        assert_eq!(server.refusals(), 0, "{usage:?}: {:?}", server.seen());
        assert!(
            fitted(&server).tokens + 4_096 <= WINDOW,
            "{usage:?}: {:?}",
            server.seen()
        );
    }
}

#[test]
fn a_server_that_counts_differently_is_followed_from_its_counts() {
    // Three bytes a token (digit-heavy text counts so), counted in every
    // answer's usage: the parent's first count teaches dsh that its
    // estimate is low, so the results are fitted at the server's density,
    // nothing is refused, and the fitted request fills the window.
    let server = Server::counting(
        Shape::OpenAi,
        Counting {
            bytes_per_token: 3,
            usage: Usage::Counted,
            tools: Tools::Counted,
        },
    );
    let (output, _dir) = run(&server, Some(WINDOW));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(server.refusals(), 0, "{:?}", server.seen());
    let share = fitted(&server).tokens as f64 / (WINDOW - 4_096) as f64;
    assert!((0.8..=1.0).contains(&share), "{share}: {:?}", server.seen());
}

#[test]
fn a_refusal_that_names_no_window_stops_the_run_with_its_own_line() {
    let server = Server::start(Shape::Unnamed);
    let (output, dir) = run(&server, None);
    assert!(!output.status.success());
    assert_eq!(server.refusals(), 1, "never sent again: {:?}", server.seen());
    let stderr = stderr(&output);
    let line = stderr
        .lines()
        .find(|line| line.starts_with("dsh: the run did not finish: context-window: "))
        .unwrap_or_else(|| panic!("no context line: {stderr}"));
    assert!(
        line.contains("the model's server refused a request of about ")
            && line.ends_with("the run stopped and its transcript is kept"),
        "{line}"
    );
    // The transcript is kept, the parent's stop last.
    let agents = dir.path().join("data").join("agents");
    let parent = std::fs::read_dir(&agents)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .find(|text| text.contains("\"stop\":\"context-window: "))
        .expect("the parent's transcript ends with its stop");
    assert!(parent.lines().count() > 3);
}

#[test]
fn a_server_that_counts_only_when_not_streamed_is_asked_to_count_before_a_cut() {
    // llama-cpp-python: no usage in a stream, its count in a whole answer,
    // a chat template that leaves the tool definitions out, and text that
    // counts five bytes a token (JSON-escaped prose did so live), so dsh's
    // estimate of a whole request is far above its count. Before cutting
    // the four results on that estimate, dsh asks the server to count the
    // request without them, then with them cut to fit beside that count,
    // and cuts them on what it learned: nothing is refused and the fitted
    // request fills the usable window.
    let window = 4_096;
    let usable = window - window / 4;
    let llama = Counting {
        bytes_per_token: 5,
        usage: Usage::Unstreamed,
        tools: Tools::Left,
    };
    let server = Server::counting(Shape::LlamaCppPython, llama);
    let (output, _dir) = run(&server, Some(window));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "4 results, heads 4, tails 4");
    assert_eq!(server.refusals(), 0, "{:?}", server.seen());
    let asked: Vec<Seen> = server.seen().into_iter().filter(|seen| !seen.streamed).collect();
    assert_eq!(asked.len(), 2, "two counts, for the parent's cut: {:?}", server.seen());
    let share = fitted(&server).tokens as f64 / usable as f64;
    assert!((0.8..=1.0).contains(&share), "{share}: {:?}", server.seen());

    // A server that counts nothing, streamed or not, is asked once; its
    // results are then cut on the estimate alone, which counts the tool
    // definitions this server leaves out, and not asked again.
    let server = Server::counting(
        Shape::LlamaCppPython,
        Counting {
            usage: Usage::None,
            ..llama
        },
    );
    let (output, _dir) = run(&server, Some(window));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(server.refusals(), 0, "{:?}", server.seen());
    let share = fitted(&server).tokens as f64 / usable as f64;
    assert!(share < 0.8, "{share}: {:?}", server.seen());
    assert_eq!(server.seen().iter().filter(|seen| !seen.streamed).count(), 1);
    assert!(
        stderr(&output).contains("did not count a request's prompt tokens when asked"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_resume_fits_to_the_window_an_earlier_run_kept_and_is_not_refused() {
    let server = Server::start(Shape::LlamaCpp);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A first parent only greets: nothing is learned.
    let first = run_in(&server, &data, &["Say hello."]);
    assert!(first.status.success(), "{}", stderr(&first));
    let agents: Vec<String> = std::fs::read_dir(data.join("agents"))
        .unwrap()
        .map(|entry| {
            entry
                .unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let [greeter] = agents.try_into().unwrap();
    // Another run meets the window: refused once, learned, kept.
    let second = run_in(
        &server,
        &data,
        &["Split the report into four parts and have each written at length."],
    );
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(server.refusals(), 1, "{:?}", server.seen());
    // The greeter, resumed, delegates four answers far over the window:
    // fitted to the kept window before it is sent, never refused.
    let resumed = run_in(
        &server,
        &data,
        &[
            "--resume",
            &greeter,
            "Now split the report into four parts and have each written at length.",
        ],
    );
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(stdout(&resumed).trim(), "4 results, heads 4, tails 4");
    assert_eq!(server.refusals(), 1, "the resume was not refused: {:?}", server.seen());
    assert!(fitted(&server).tokens + 4_096 <= WINDOW, "{:?}", server.seen());
    let kept = std::fs::read_dir(data.join("learned"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let kept: Value = serde_json::from_slice(&std::fs::read(kept).unwrap()).unwrap();
    assert_eq!(kept["models"]["test-model"]["window"], WINDOW, "{kept}");

    // A window of 0 in the file is not learned: one line names the file,
    // and the next run is refused once again and relearns the window.
    let file = std::fs::read_dir(data.join("learned"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&format!("\"window\":{WINDOW}"), "\"window\":0");
    std::fs::write(&file, text).unwrap();
    let bad = run_in(
        &server,
        &data,
        &["--resume", &greeter, "Split the report again, at length."],
    );
    assert!(bad.status.success(), "{}", stderr(&bad));
    let ignored = stderr(&bad)
        .lines()
        .filter(|line| line.contains("ignored what an earlier run kept in"))
        .count();
    assert_eq!(ignored, 1, "{}", stderr(&bad));
    assert!(stderr(&bad).contains(&file.display().to_string()), "{}", stderr(&bad));
    assert_eq!(server.refusals(), 2, "{:?}", server.seen());
}
