//! Cut answers end to end, through the real `dsh` binary: a local
//! OpenAI-compatible server that ends streams the way llama-cpp-python does
//! when another request arrives (`data: [DONE]` and no finish reason). Two
//! children started in parallel are cut after some text: each fails with its
//! partial output, never "completed" with an empty answer; the parent's own
//! stream cut before any text is sent again; and a parent whose answer is cut
//! after some text does not exit 0, its stop line saying the server cut it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::model::{ModelServer, Reply, content, finish, role};

/// Where the server cuts the parent's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parent {
    /// Its answer after the children's results is cut once before any
    /// text (the client sends it again), then answered whole.
    CutOnceBeforeText,
    /// Its first answer is cut after some text, every time.
    CutAfterText,
}

/// One request the server saw: who sent it, and the tool results it carried.
#[derive(Clone, Debug)]
struct Seen {
    child: bool,
    results: Vec<String>,
}

/// The server, on a port of its own; it lives as long as the test.
struct Server {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    _model: ModelServer,
}

impl Server {
    fn start(parent: Parent) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let model = ModelServer::start(move |request| answer(request, parent, &log));
        Self {
            base_url: model.base_url.clone(),
            seen,
            _model: model,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The stream that answers one request. llama-cpp-python's first chunk
/// names the role and carries no text; a stream it cuts ends with
/// `data: [DONE]` and no finish reason.
fn answer(request: &Value, parent: Parent, log: &Mutex<Vec<Seen>>) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let child = messages
        .iter()
        .any(|message| message["role"] == "system" && text(message).contains("You are a delegated subagent"));
    let results: Vec<String> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| text(message).to_owned())
        .collect();
    let answers_so_far = {
        let mut seen = log.lock().unwrap();
        seen.push(Seen {
            child,
            results: results.clone(),
        });
        seen.iter()
            .filter(|seen| !seen.child && !seen.results.is_empty())
            .count()
    };
    if child {
        let prompt = messages
            .iter()
            .rev()
            .find(|message| message["role"] == "user")
            .map_or("", text);
        return Reply::chunks(vec![role(), content(&format!("Half of the answer to: {prompt}"))]);
    }
    if results.is_empty() {
        if parent == Parent::CutAfterText {
            return Reply::chunks(vec![role(), content("I was about to delegate")]);
        }
        let calls: Vec<Value> = (0..2)
            .map(|index| {
                let arguments =
                    json!({"description": format!("part {index}"), "prompt": format!("Write part {index}.")});
                json!({"index": index, "id": format!("call_{index}"), "type": "function",
                       "function": {"name": "subagent", "arguments": arguments.to_string()}})
            })
            .collect();
        return Reply::chunks(vec![
            role(),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
            finish("tool_calls"),
        ]);
    }
    if answers_so_far == 1 {
        // Interrupted before any text: the client sends the request again.
        return Reply::chunks(vec![role()]);
    }
    let failed = results
        .iter()
        .filter(|result| result.starts_with("Error: subagent run failed"))
        .count();
    Reply::chunks(vec![
        role(),
        content(&format!("{failed} of {} parts failed", results.len())),
        finish("stop"),
    ])
}

fn text(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// `dsh run` against `server`.
fn run(server: &Server) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let output = Command::new(common::DSH)
        .args(["run", "--data-dir"])
        .arg(&data)
        .arg("Have the two parts written, one child each.")
        .current_dir(dir.path())
        .env("DSH_BASE_URL", &server.base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "test-model")
        .env_remove("DSH_CONTEXT_WINDOW")
        .env_remove("DSH_LOG")
        .env_remove("DSH_PARENT_CONFIGS")
        .output()
        .unwrap();
    (output, dir)
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn two_parallel_children_cut_by_the_server_fail_with_their_partial_output() {
    let server = Server::start(Parent::CutOnceBeforeText);
    let (output, dir) = run(&server);
    let (stdout, stderr) = (stdout(&output), stderr(&output));
    // The parent read two failures, not two empty answers, and said so.
    assert_eq!(stdout.trim(), "2 of 2 parts failed", "{stderr}");
    // Whatever the parent's model wrote, the last line says no delegation
    // did its work; the exit status stays the model's success.
    assert!(output.status.success(), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    insta::assert_snapshot!("every_delegation_failed_line", last);
    let seen = server.seen();
    // Each child was asked once: its text had reached it when the cut came.
    assert_eq!(seen.iter().filter(|seen| seen.child).count(), 2, "{seen:?}");
    // The parent's answer cut before any text was asked again.
    let answers: Vec<&Seen> = seen
        .iter()
        .filter(|seen| !seen.child && !seen.results.is_empty())
        .collect();
    assert_eq!(answers.len(), 2, "{seen:?}");
    let mut results = answers[1].results.clone();
    results.sort();
    for (index, result) in results.iter().enumerate() {
        assert!(
            result.ends_with(&format!(
                "Partial output before the run ended:\nHalf of the answer to: Write part {index}."
            )),
            "{result}"
        );
    }
    insta::assert_snapshot!("cut_child_result", results[0]);
    // The children's transcripts end with the stop.
    let agents = dir.path().join("data").join("agents");
    let stops = std::fs::read_dir(&agents)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .filter(|text| text.contains("\"stop\":\"answer-cut: stream ended before the model finished"))
        .count();
    assert_eq!(stops, 2, "{stderr}");
}

#[test]
fn a_parent_whose_answer_is_cut_does_not_exit_0_and_says_the_server_cut_it() {
    let server = Server::start(Parent::CutAfterText);
    let (output, _dir) = run(&server);
    let (stdout, stderr) = (stdout(&output), stderr(&output));
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // The partial text is printed, and the line says what it is.
    assert_eq!(stdout.trim(), "I was about to delegate");
    let line = stderr
        .lines()
        .find(|line| line.starts_with("dsh: the run did not finish: "))
        .unwrap_or_else(|| panic!("no stop line: {stderr}"));
    insta::assert_snapshot!("cut_parent_stop_line", line);
    assert_eq!(server.seen().len(), 1, "text had reached the agent: not sent again");
}
