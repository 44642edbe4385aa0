//! A long answer end to end: the real `dsh` binary runs `dsh run`, whose
//! parent delegates once to a `spawn` child, against a loopback
//! OpenAI-compatible server that streams the child's answer over HTTP (SSE
//! deltas of [`DELTA`] bytes, as a model streams a few tokens at a time).
//! The parent reads the answer cut to the result budget, with the rest kept
//! for `task_output`, and answers; the server checks that the parent's last
//! request carried the cut.
//!
//! The figure is the peak RSS of the `dsh` process (`ru_maxrss` of the
//! bench's only child) with a 10 MB answer, above the same run with a 1 KB
//! answer, as a multiple of the answer: every layer that holds the whole
//! text at once adds one (the streamed text, the answer, its transcript
//! line, the kept output). Each run is made by a fresh bench process, so
//! that the only child it has waited for is that `dsh`.

use std::io::{BufRead as _, BufReader, BufWriter, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::memory::child_output;
use crate::{Row, yes_no};

/// The answer measured, in bytes.
pub const BYTES: usize = 10_000_000;

/// The answer of the baseline run, in bytes: under the result budget, so it
/// is neither cut nor kept.
const BASELINE_BYTES: usize = 1_000;

/// Bytes of answer per streamed delta (cut back to a character boundary).
pub const DELTA: usize = 64;

/// The task `dsh run` is given; the parent delegates it.
const TASK: &str = "Delegate the long answer.";

/// The prompt of the parent's `subagent` call; the child's request ends with it.
const CHILD_PROMPT: &str = "Answer at length.";

/// The parent's last answer when its tool result was the answer's cut.
const DONE: &str = "the long answer was delivered, cut";

/// A loopback OpenAI-compatible server: the parent's first request gets a
/// `subagent` call, the child's gets the answer streamed, and the parent's
/// request after the tool result gets [`DONE`] when that result was the
/// answer's head and tail around the cut notice.
fn serve(answer: String) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            // A request the server cannot read ends that connection only.
            let _ = answer_request(stream, &answer);
        }
    });
    Ok(format!("http://{address}"))
}

/// Reads one request and answers it as [`serve`] says.
fn answer_request(stream: TcpStream, answer: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0;
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
    let request: Value = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    let last = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .cloned()
        .unwrap_or_default();
    let mut out = BufWriter::with_capacity(64 * 1024, stream);
    out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
    if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or_default();
        let cut = result.starts_with("HEAD ") && result.ends_with(" TAIL") && result.len() < answer.len();
        let text = if cut || answer.len() <= BASELINE_BYTES {
            DONE.to_owned()
        } else {
            format!("the tool result was not the answer's cut: {}", head(result))
        };
        event(&mut out, &json!({"content": text}), None)?;
    } else if last["content"] == CHILD_PROMPT {
        let mut rest = answer;
        while !rest.is_empty() {
            let mut end = DELTA.min(rest.len());
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            event(&mut out, &json!({"content": &rest[..end]}), None)?;
            rest = &rest[end..];
        }
    } else {
        let arguments = json!({"description": "answer at length", "prompt": CHILD_PROMPT}).to_string();
        let call = json!({"tool_calls": [{"index": 0, "id": "call_long", "type": "function",
            "function": {"name": "subagent", "arguments": arguments}}]});
        event(&mut out, &call, None)?;
        event(&mut out, &json!({}), Some("tool_calls"))?;
    }
    if last["role"] == "tool" || last["content"] == CHILD_PROMPT {
        event(&mut out, &json!({}), Some("stop"))?;
    }
    let usage = json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    write!(out, "data: {usage}\n\ndata: [DONE]\n\n")?;
    out.flush()
}

/// One SSE chunk with `delta`, and a finish reason when given.
fn event(out: &mut impl std::io::Write, delta: &Value, finish: Option<&str>) -> std::io::Result<()> {
    let chunk = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    write!(out, "data: {chunk}\n\n")
}

fn head(text: &str) -> String {
    text.chars().take(200).collect()
}

/// The child-process half: runs `dsh run` (the binary in
/// [`DSH_BIN_ENV`](crate::dsh::DSH_BIN_ENV)) against a server streaming a
/// `bytes`-byte answer, and prints the `dsh` process's peak RSS in kB.
pub fn memory_child(bytes: usize) -> Result<String, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let base_url = serve(crate::answer::answer(bytes))?;
    let dir = std::env::temp_dir().join(format!("dsh-bench-answer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let output = run_dsh(&dsh, &dir, &base_url);
    let _ = std::fs::remove_dir_all(&dir);
    let output = output?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || stdout.trim_end() != DONE {
        return Err(format!(
            "dsh run did not deliver the {bytes}-byte answer ({}): {}{}",
            output.status,
            head(&stdout),
            head(&String::from_utf8_lossy(&output.stderr))
        ));
    }
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map_err(|error| error.to_string())?;
    Ok(usage.max_rss().to_string())
}

/// `dsh run` in `dir`, offline but for the server at `base_url`.
fn run_dsh(dsh: &Path, dir: &Path, base_url: &str) -> Result<std::process::Output, String> {
    let mut command = crate::dsh::dsh_command(dsh);
    command
        .args(["run", "--model", "bench-model", TASK])
        .current_dir(dir)
        .env("DSH_BASE_URL", base_url)
        .env("DSH_API_KEY", "bench")
        .stdin(Stdio::null());
    command.output().map_err(|error| format!("{}: {error}", dsh.display()))
}

/// The end-to-end memory row, or a row saying why it could not be measured
/// (no `dsh` binary, say), so that the other figures still print.
pub fn memory_row_or_failed() -> Row {
    memory_row().unwrap_or_else(|error| Row {
        figure: figure(),
        flavor: "-",
        ours: format!("FAILED: {error}"),
        floor: "-".to_owned(),
        ratio: "-".to_owned(),
        target: "< 2× the answer: NOT measured".to_owned(),
    })
}

fn figure() -> String {
    format!(
        "peak memory of `dsh run` whose child answers {} MB over a local HTTP stream (above a 1 KB answer's)",
        BYTES / 1_000_000
    )
}

/// The end-to-end memory row: the 10 MB run's peak above the 1 KB run's.
pub fn memory_row() -> Result<Row, String> {
    let dsh = crate::dsh::locate_dsh()?;
    let peak = |bytes: usize| child_output::<1>(&["--answer-http", &bytes.to_string()], &dsh).map(|[kb]| kb);
    let baseline = peak(BASELINE_BYTES)?;
    let long = peak(BYTES)?;
    let grown = long.saturating_sub(baseline) as f64 * 1024.0;
    let times = grown / BYTES as f64;
    Ok(Row {
        figure: figure(),
        flavor: "-",
        ours: format!("{:.1} MB ({times:.2}× the answer)", grown / 1e6),
        floor: format!("{:.1} MB peak RSS (1 KB answer)", baseline as f64 / 1024.0),
        ratio: "-".to_owned(),
        target: format!("< 2× the answer: {}", yes_no(times < 2.0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `messages` to the server as a chat request; the SSE body.
    fn ask(base_url: &str, messages: Value) -> String {
        let body = json!({"model": "m", "stream": true, "messages": messages}).to_string();
        let mut stream = TcpStream::connect(base_url.trim_start_matches("http://")).unwrap();
        write!(
            stream,
            "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    /// The chunks of an SSE body, `[DONE]` left out.
    fn chunks(sse: &str) -> Vec<Value> {
        sse.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    #[test]
    fn the_server_delegates_streams_the_answer_in_deltas_and_checks_the_cut() {
        let answer = crate::answer::answer(100_000);
        let base_url = serve(answer.clone()).unwrap();

        let first = chunks(&ask(&base_url, json!([{"role": "user", "content": TASK}])));
        assert_eq!(
            first[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
            "subagent"
        );

        let streamed = chunks(&ask(&base_url, json!([{"role": "user", "content": CHILD_PROMPT}])));
        let deltas: Vec<&str> = streamed
            .iter()
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert!(
            deltas.iter().all(|delta| delta.len() <= DELTA),
            "a delta over {DELTA} bytes"
        );
        assert_eq!(deltas.concat(), answer);
        assert!(
            streamed
                .iter()
                .any(|chunk| chunk["choices"][0]["finish_reason"] == "stop")
        );

        let reply = |result: &str| {
            let messages = json!([{"role": "user", "content": TASK}, {"role": "tool", "tool_call_id": "call_long", "content": result}]);
            chunks(&ask(&base_url, messages))[0]["choices"][0]["delta"]["content"].clone()
        };
        assert_eq!(reply("HEAD … [output cut] … TAIL"), DONE);
        assert_ne!(
            reply("HEAD without its tail"),
            DONE,
            "a result that is not the cut is reported"
        );
    }
}
