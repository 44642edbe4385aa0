//! The `dsh` binary, end to end: offline by default, and against a local
//! OpenAI-compatible server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

fn dsh(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command.args(args).current_dir(dir);
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn dsh_run_with_no_configuration_answers_offline() {
    let dir = tempfile::tempdir().unwrap();
    let output = dsh(dir.path(), &["run", "Summarize the README."], &[]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "The subagent finished the task. Its report:\n\nScripted subagent here. I was asked: \"Summarize the README.\". In a real run I would do that work now; this demo model only reports back.\n"
    );
    let first = stderr.lines().next().unwrap();
    assert!(first.starts_with("dsh: using the embedded scripted model"), "{first}");
    assert!(first.contains("DSH_API_KEY") && first.contains("DSH_BASE_URL"));
    assert!(
        stderr.contains("↳ subagent \"Summarize the README.\" completed"),
        "{stderr}"
    );
    // The child's start names its provider; its end, the model calls the
    // agent loop reported for it.
    assert!(
        stderr.lines().any(
            |line| line.starts_with("↳ subagent \"Summarize the README.\" started (") && line.ends_with(", spawn)")
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("↳ subagent \"Summarize the README.\" completed · 1 model call · "),
        "{stderr}"
    );

    // Both transcripts exist and read back; the child's shows its own work.
    let agents: Vec<String> = std::fs::read_dir(dir.path().join(".dsh/agents"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".jsonl")
                .to_owned()
        })
        .collect();
    assert_eq!(agents.len(), 2);
    let readable: Vec<String> = agents
        .iter()
        .map(|id| {
            let output = dsh(dir.path(), &["transcript", id], &[]);
            assert!(output.status.success());
            text(&output.stdout)
        })
        .collect();
    let child = readable.iter().find(|t| t.contains("(child of ")).unwrap();
    assert!(child.contains("assistant: Scripted subagent here."));
    assert!(child.contains("── run ended: completed (1 model call,"));
}

#[test]
fn quiet_hides_everything_but_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let output = dsh(dir.path(), &["run", "--quiet", "hi"], &[]);
    assert!(output.status.success());
    assert_eq!(text(&output.stderr), "");
    assert!(text(&output.stdout).contains("I was asked: \"hi\""));
}

#[test]
fn bad_input_exits_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = dsh(dir.path(), &["transcript", "nobody"], &[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no transcript for agent nobody"));
    let escape = dsh(dir.path(), &["transcript", "../../etc/passwd"], &[]);
    assert_eq!(escape.status.code(), Some(2));
    assert!(text(&escape.stderr).contains("is not an agent id"));
    std::fs::write(
        dir.path().join("broken.json"),
        "{\"rules\": [{\"when\": {\"colour\": 1}}]}",
    )
    .unwrap();
    let script = dsh(dir.path(), &["run", "--script", "broken.json", "hi"], &[]);
    assert_eq!(script.status.code(), Some(2));
    let stderr = text(&script.stderr);
    assert!(stderr.contains("broken.json") && stderr.contains("colour"), "{stderr}");
}

/// A minimal OpenAI-compatible chat server on loopback: the parent delegates
/// once, the child answers, the parent reports. Records each request.
/// With `usage` false it omits usage from its streams, as some local servers do.
fn serve(status: u16, usage: bool, requests: Arc<Mutex<Vec<(String, Value)>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut auth) = (0, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("authorization:") {
                    auth = line.trim().to_owned();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let request: Value = serde_json::from_slice(&body).unwrap();
            requests.lock().unwrap().push((auth, request.clone()));
            if status != 200 {
                let body = r#"{"error":{"message":"Authentication Fails (bad key)","type":"authentication_error"}}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                continue;
            }
            let offers_subagent = request["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["function"]["name"] == "subagent"));
            let last = request["messages"].as_array().unwrap().last().unwrap().clone();
            let delta = if offers_subagent && last["role"] == "user" {
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                    "function": {"name": "subagent", "arguments": "{\"description\": \"count\", \"prompt\": \"Count to three.\"}"}}]})
            } else if offers_subagent {
                json!({"content": format!("Parent heard: {}", last["content"].as_str().unwrap())})
            } else {
                json!({"content": "one, two, three"})
            };
            let finish = if delta.get("tool_calls").is_some() {
                "tool_calls"
            } else {
                "stop"
            };
            let mut events = vec![
                json!({"choices": [{"index": 0, "delta": delta}]}),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            ];
            if usage {
                events.push(
                    json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
                );
            }
            let mut sse = String::new();
            for event in events {
                sse.push_str(&format!("data: {event}\n\n"));
            }
            sse.push_str("data: [DONE]\n\n");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{sse}"
            );
        }
    });
    format!("http://{address}")
}

#[test]
fn dsh_run_talks_to_a_local_openai_compatible_server() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let base_url = serve(200, true, requests.clone());
    let dir = tempfile::tempdir().unwrap();
    let output = dsh(
        dir.path(),
        &["run", "--model", "local-model", "Count to three."],
        &[("DSH_BASE_URL", &base_url), ("DSH_API_KEY", "test-key")],
    );
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(text(&output.stdout), "Parent heard: one, two, three\n");
    let first = stderr.lines().next().unwrap();
    assert!(
        first.starts_with("dsh: using model local-model at http://127.0.0.1:"),
        "{first}"
    );
    // Two parent calls and one child call of 15 tokens each.
    assert!(
        stderr.contains("dsh: own model calls: 30 tokens · children: 15 tokens · total: 45 tokens"),
        "{stderr}"
    );
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3, "parent, child, parent");
    for (auth, body) in requests.iter() {
        assert_eq!(auth.to_ascii_lowercase(), "authorization: bearer test-key");
        assert_eq!((&body["model"], &body["stream"]), (&json!("local-model"), &json!(true)));
    }
    // The child was offered no delegation tools.
    assert!(
        requests[1]
            .1
            .get("tools")
            .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty))
    );
}

/// A server that reports no usage (llama-cpp-python's streams) is not read
/// as "0 tokens": each call's tokens are estimated, and every line that
/// shows them says so.
#[test]
fn a_server_that_reports_no_usage_reads_estimated_tokens() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let base_url = serve(200, false, requests);
    let dir = tempfile::tempdir().unwrap();
    let output = dsh(
        dir.path(),
        &["run", "Count to three."],
        &[("DSH_BASE_URL", &base_url), ("DSH_API_KEY", "test-key")],
    );
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains(" 0 tokens"), "{stderr}");
    assert!(!stderr.contains("usage not reported"), "{stderr}");
    let child = stderr
        .lines()
        .find(|line| line.starts_with("↳ subagent \"count\" completed · 1 model call · "))
        .unwrap_or_else(|| panic!("the child's line: {stderr}"));
    assert!(child.contains(" tokens (estimated) · "), "{child}");
    // The usage line: own, children and total, each marked, the total their sum.
    let line = stderr
        .lines()
        .find_map(|line| line.strip_prefix("dsh: own model calls: "))
        .unwrap_or_else(|| panic!("no usage line: {stderr}"));
    let counts: Vec<u64> = line
        .split(" · ")
        .map(|part| {
            let count = part.rsplit(": ").next().unwrap();
            let count = count
                .strip_suffix(" tokens (estimated)")
                .unwrap_or_else(|| panic!("{line}"));
            count.parse().unwrap()
        })
        .collect();
    assert_eq!(counts.len(), 3, "{line}");
    assert!(
        counts[0] > 0 && counts[1] > 0 && counts[0] + counts[1] == counts[2],
        "{line}"
    );
    let parent = std::fs::read_dir(dir.path().join(".dsh/agents"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| !std::fs::read_to_string(path).unwrap().contains("\"parent\":\""))
        .unwrap();
    let id = parent.file_stem().unwrap().to_string_lossy().into_owned();
    let transcript = text(&dsh(dir.path(), &["transcript", &id], &[]).stdout);
    assert!(
        transcript.contains(&format!(
            "(2 model calls, {} tokens (estimated); children {} tokens (estimated); total {} tokens (estimated))",
            counts[0], counts[1], counts[2]
        )),
        "{transcript}"
    );
}

#[test]
fn a_rejected_key_fails_with_the_servers_message() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let base_url = serve(401, true, requests.clone());
    let dir = tempfile::tempdir().unwrap();
    let output = dsh(
        dir.path(),
        &["run", "hi"],
        &[("DSH_BASE_URL", &base_url), ("DSH_API_KEY", "wrong")],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("the run did not finish"), "{stderr}");
    assert!(stderr.contains("Authentication Fails (bad key)"), "{stderr}");
    assert_eq!(requests.lock().unwrap().len(), 1, "a 401 is not retried");
}

#[test]
fn dsh_run_can_start_a_background_child_and_collect_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"rules": [
        {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "background result"}},
        {"when": {"last_tool": "task_output"}, "reply": {"text": "Collected: {{last_tool_result}}"}},
        {"when": {"last_tool": "subagent"},
         "reply": {"tool_calls": [{"name": "task_output", "arguments": {"task_id": "subagent-1", "wait": true}}]}},
        {"when": {"last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "in the background", "prompt": "work", "run_in_background": true}}]}}
    ]});
    std::fs::write(dir.path().join("bg.json"), script.to_string()).unwrap();
    let output = dsh(dir.path(), &["run", "--script", "bg.json", "go"], &[]);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        text(&output.stdout),
        "Collected: background result\n[status: completed]\n"
    );

    // The parent heard of the finished task through the completion notice.
    let parent = std::fs::read_dir(dir.path().join(".dsh/agents"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .find(|transcript| !transcript.contains("\"parent\":"))
        .unwrap();
    assert!(
        parent.contains("background task subagent-1 (subagent: in the background) finished [status: completed]. Read its output with task_output."),
        "{parent}"
    );
}
