//! `dsh mcp` driven by rmcp's client over its stdio, and `--mcp-server`
//! giving agents the tools of a test MCP server. Offline: the embedded
//! scripted model or `--script`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

mod common;

use common::{DSH, GUARD, mcp_test_server as test_server};

/// A script whose children answer prompts containing "slow" only after a minute.
const SLOW_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_user_contains": "slow"}, "reply": {"text": "never finished", "delay_ms": 60000}},
  {"when": {}, "reply": {"text": "quick answer"}}
]}"#;

/// Collects progress notifications.
struct Client {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let _ = self.progress.send(params);
    }
}

/// A running `dsh mcp` (in its own process group), its rmcp client, its stderr and progress.
struct Session {
    child: Child,
    client: Option<RunningService<RoleClient, Client>>,
    stderr: Arc<Mutex<String>>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
}

async fn start(dir: &Path, extra: &[&str]) -> Session {
    let mut child = Command::new(DSH)
        .arg("mcp")
        .arg("--data-dir")
        .arg(dir.join(".dsh"))
        .args(["--progress-interval", "50ms"])
        .args(extra)
        .current_dir(dir)
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let sink = stderr.clone();
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(read @ 1..) = pipe.read(&mut buffer).await {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    });
    let (tx, progress) = mpsc::unbounded_channel();
    let transport = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = tokio::time::timeout(GUARD, Client { progress: tx }.serve(transport))
        .await
        .unwrap()
        .unwrap_or_else(|error| panic!("initialize failed: {error}; stderr: {}", stderr.lock().unwrap()));
    Session {
        child,
        client: Some(client),
        stderr,
        progress,
    }
}

impl Session {
    fn client(&self) -> &RunningService<RoleClient, Client> {
        self.client.as_ref().unwrap()
    }

    async fn call(&self, tool: &str, args: Value) -> (String, bool) {
        text_of(&self.call_result(tool, args).await)
    }

    /// The whole `tools/call` result, `_meta` included.
    async fn call_result(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        tokio::time::timeout(
            GUARD,
            self.client()
                .peer()
                .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
        )
        .await
        .unwrap()
        .unwrap()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes the client (and so dsh's stdin) and waits for dsh to exit.
    async fn close(mut self) -> (std::process::ExitStatus, String) {
        if let Some(client) = self.client.take() {
            let _ = client.cancel().await;
        }
        let status = tokio::time::timeout(GUARD, self.child.wait()).await.unwrap().unwrap();
        (status, self.stderr())
    }
}

fn text_of(result: &CallToolResult) -> (String, bool) {
    let text = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    (text, result.is_error == Some(true))
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    std::fs::write(dir.join(name), body).unwrap();
    name.to_owned()
}

/// The members of group `pgid` that still run, per `/proc` (zombies have
/// exited: they only wait for their reaper).
fn running(pgid: Pid) -> Vec<String> {
    let pgid = pgid.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| {
            let tail = stat.rsplit_once(')').map_or("", |(_, tail)| tail);
            let fields: Vec<&str> = tail.split_whitespace().collect();
            let zombie = matches!(fields.first(), Some(&("Z" | "X")));
            fields.get(2) == Some(&pgid.as_str()) && !zombie
        })
        .collect()
}

async fn wait_group_gone(pgid: Pid) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while killpg(pgid, None) != Err(Errno::ESRCH) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process group {pgid} still exists"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `dsh mcp` section of the catalog: (name, description, schema text) per tool.
fn catalog_tools() -> Vec<(String, String, String)> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tool-catalog.md")).unwrap();
    let section = page
        .split("\n## `dsh mcp`\n")
        .nth(1)
        .expect("the catalog has a dsh mcp section");
    let section = section.split("\n## ").next().unwrap();
    section
        .split("\n### `")
        .skip(1)
        .map(|tool| {
            let (name, rest) = tool.split_once("`\n\n").unwrap();
            let (description, rest) = rest.split_once("\n\n```json\n").unwrap();
            let (schema, _) = rest.split_once("\n```\n").unwrap();
            (name.to_owned(), description.to_owned(), schema.to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_and_tools_list_match_the_catalog_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let session = start(dir.path(), &["--quiet"]).await;
    let info = session.client().peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("dsh"));
    assert!(info.capabilities.tools.is_some());
    let listed = session.client().peer().list_all_tools().await.unwrap();
    let served: Vec<(String, String, String)> = listed
        .iter()
        .map(|tool| {
            (
                tool.name.to_string(),
                tool.description.as_deref().unwrap_or_default().to_owned(),
                serde_json::to_string_pretty(&*tool.input_schema).unwrap(),
            )
        })
        .collect();
    let catalog = catalog_tools();
    assert_eq!(
        served.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
        ["send_message", "subagent", "task_kill", "task_list", "task_output"]
    );
    assert_eq!(served, catalog);
    let (status, stderr) = session.close().await;
    assert!(status.success(), "{stderr}");
    assert_eq!(stderr, "", "--quiet keeps stderr empty");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_reads_cut_with_its_notice_and_pages_back_through_task_output() {
    let dir = tempfile::tempdir().unwrap();
    // 60,000 characters, 90,000 bytes: over the default budget of 32,000.
    let answer: String = (0..60_000).map(|i| if i % 2 == 0 { 'é' } else { 'z' }).collect();
    let rules = json!({"rules": [{"when": {}, "reply": {"text": answer, "stream_by": "whole"}}]});
    let script = script(dir.path(), "long.json", &rules.to_string());
    let session = start(dir.path(), &["--script", &script]).await;
    let result = session
        .call_result(
            "subagent",
            json!({"description": "write at length", "prompt": "Write."}),
        )
        .await;
    let (text, is_error) = text_of(&result);
    assert!(!is_error, "{text}");
    assert!(text.len() <= 32_000, "{}", text.len());
    assert!(text.starts_with("éz") && text.ends_with("éz"));
    assert!(
        text.contains("characters shown, the first ")
            && text.contains(r#"call task_output {"task_id": "subagent-1", "offset": "#),
        "{text}"
    );
    let meta = serde_json::to_value(result.meta.as_ref().unwrap()).unwrap();
    let cut = &meta["dsh/resultCut"];
    assert_eq!(
        (cut["fullChars"].clone(), cut["fullBytes"].clone()),
        (json!(60_000), json!(90_000))
    );
    assert_eq!(cut["taskId"], "subagent-1");

    // Every page through MCP, from the start: exactly the answer.
    let mut read_back = String::new();
    let mut offset = 0u64;
    loop {
        let (page, is_error) = session
            .call("task_output", json!({"task_id": "subagent-1", "offset": offset}))
            .await;
        assert!(!is_error, "{page}");
        assert!(page.len() <= 32_000);
        let body = page.strip_suffix("\n[status: completed]").unwrap();
        match body.rsplit_once("\n\n[characters ") {
            Some((shown, notice)) => {
                read_back.push_str(shown);
                let next = notice.rsplit_once(r#""offset": "#).unwrap().1.trim_end_matches("}]");
                offset = next.parse().unwrap();
            }
            None => {
                read_back.push_str(body);
                break;
            }
        }
    }
    assert!(
        read_back == answer,
        "{} of {} bytes read back",
        read_back.len(),
        answer.len()
    );
    let (status, stderr) = session.close().await;
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "↳ subagent \"write at length\" completed (90 KB answer, 32 KB shown; task_output reads the rest from task subagent-1)"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_runs_in_the_foreground_and_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let session = start(dir.path(), &["--quiet"]).await;
    let (text, is_error) = session
        .call("subagent", json!({"description": "say hi", "prompt": "Say hi."}))
        .await;
    assert!(!is_error, "{text}");
    assert!(
        text.starts_with("Scripted subagent here. I was asked: \"Say hi.\""),
        "{text}"
    );

    let (started, is_error) = session
        .call(
            "subagent",
            json!({"description": "in the back", "prompt": "Work quietly.", "run_in_background": true}),
        )
        .await;
    assert!(!is_error, "{started}");
    // The foreground call took `subagent-1` for its result had it been
    // cut (it was not: a gap), so the background task is `subagent-2`.
    assert!(
        started.starts_with("started subagent ") && started.ends_with(" as task subagent-2"),
        "{started}"
    );
    let (output, is_error) = session
        .call(
            "task_output",
            json!({"task_id": "subagent-2", "wait": true, "timeout_ms": 30000}),
        )
        .await;
    assert!(!is_error, "{output}");
    assert!(output.contains("I was asked: \"Work quietly.\""), "{output}");
    assert!(output.ends_with("[status: completed]"), "{output}");

    let (bad, is_error) = session.call("subagent", json!({"description": "x", "prompt": 7})).await;
    assert!(is_error);
    assert_eq!(
        bad,
        "Error: subagent argument \"prompt\" must be a string, got a number"
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_delegation_reports_progress_then_ends_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(dir.path(), "slow.json", SLOW_SCRIPT);
    let mut session = start(dir.path(), &["--script", &slow]).await;
    let mut args = serde_json::Map::new();
    args.insert("description".into(), json!("slow work"));
    args.insert("prompt".into(), json!("slow task"));
    let handle = session
        .client()
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("subagent").with_arguments(args),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    // First the child's start, then (the child working on, silently)
    // heartbeats; the client may hear them in either order.
    let mut heard = Vec::new();
    for _ in 0..2 {
        let params = tokio::time::timeout(GUARD, session.progress.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(params.progress_token, handle.progress_token);
        heard.push(params);
    }
    heard.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let (progress, heartbeat) = (&heard[0], &heard[1]);
    assert_eq!((progress.progress, heartbeat.progress), (1.0, 2.0));
    assert!(
        progress
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("subagent \"slow work\" started (spawn, "),
        "{progress:?}"
    );
    assert!(
        heartbeat
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("subagent still running after "),
        "{heartbeat:?}"
    );
    handle.cancel(Some("the user changed their mind".into())).await.unwrap();
    let line = "dsh mcp: the client cancelled a call to subagent; it ended with: Error: subagent run was cancelled";
    let deadline = tokio::time::Instant::now() + GUARD;
    while !session.stderr().contains(line) {
        assert!(tokio::time::Instant::now() < deadline, "{}", session.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The session goes on.
    let (text, _) = session
        .call("subagent", json!({"description": "next", "prompt": "quick"}))
        .await;
    assert_eq!(text, "quick answer");
    let (status, _) = session.close().await;
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegations_progress_carries_the_childs_start_model_calls_tool_calls_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let script_body = json!({"rules": [
        {"when": {"last_message": "user", "tool_offered": "mcp__t__echo"},
         "reply": {"tool_calls": [{"name": "mcp__t__echo", "arguments": {"text": "from the child"}}]}},
        {"when": {"last_tool": "mcp__t__echo"}, "reply": {"text": "the child heard: {{last_tool_result}}"}}
    ]});
    let echo = script(dir.path(), "echo.json", &script_body.to_string());
    let server = format!("t={}", test_server().display());
    let mut session = start(dir.path(), &["--quiet", "--script", &echo, "--mcp-server", &server]).await;
    let mut args = serde_json::Map::new();
    args.insert("description".into(), json!("echo it"));
    args.insert("prompt".into(), json!("use the echo tool"));
    let handle = session
        .client()
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(
                CallToolRequestParams::new("subagent").with_arguments(args),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let answer = tokio::time::timeout(GUARD, handle.await_response())
        .await
        .unwrap()
        .unwrap();
    assert!(
        format!("{answer:?}").contains("the child heard: echo: from the child"),
        "{answer:?}"
    );
    // The client may hear notifications after the answer, and not in the
    // order they were sent: collect them all, then order them.
    let mut heard: Vec<ProgressNotificationParam> = Vec::new();
    let complete = |heard: &[ProgressNotificationParam]| {
        (1..=heard.len()).all(|n| heard.iter().any(|params| params.progress == n as f64))
            && heard
                .iter()
                .any(|params| params.message.as_deref().is_some_and(|m| m.contains(" completed")))
    };
    while !complete(&heard) {
        let params = tokio::time::timeout(GUARD, session.progress.recv())
            .await
            .unwrap_or_else(|_| panic!("not all heard: {heard:?}"))
            .unwrap();
        heard.push(params);
    }
    heard.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let messages: Vec<String> = heard
        .into_iter()
        .map(|params| params.message.unwrap_or_default())
        // Heartbeats come only when nothing happened for 50 ms: leave them out.
        .filter(|message| !message.starts_with("subagent still running after "))
        .flat_map(|message| message.split("; ").map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let id = messages
        .first()
        .and_then(|first| first.strip_prefix("subagent \"echo it\" started (spawn, "))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{messages:?}"))
        .to_owned();
    // The child's id and its token counts (estimated from the text) vary.
    let messages: Vec<String> = messages
        .iter()
        .map(|message| {
            message
                .replace(&id, "<child>")
                .split(" · ")
                .map(|part| if part.ends_with(" tokens") { "<n> tokens" } else { part })
                .collect::<Vec<_>>()
                .join(" · ")
        })
        .collect();
    assert_eq!(
        messages,
        [
            "subagent \"echo it\" started (spawn, <child>)",
            "subagent \"echo it\" working · 1 model call · <n> tokens",
            "subagent \"echo it\" calls mcp__t__echo",
            "subagent \"echo it\" working · 2 model calls · <n> tokens",
            "subagent \"echo it\" completed · 2 model calls · <n> tokens",
        ]
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_do_not_see_each_others_children_or_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(dir.path(), "slow.json", SLOW_SCRIPT);
    // Both sessions share one data directory (and so one child store).
    let first = start(dir.path(), &["--quiet", "--script", &slow]).await;
    let second = start(dir.path(), &["--quiet", "--script", &slow]).await;
    let (started, _) = first
        .call(
            "subagent",
            json!({"description": "first's child", "prompt": "quick job", "run_in_background": true}),
        )
        .await;
    let child_id = started
        .strip_prefix("started subagent ")
        .and_then(|rest| rest.strip_suffix(" as task subagent-1"))
        .unwrap()
        .to_owned();
    let (done, _) = first
        .call("task_output", json!({"task_id": "subagent-1", "wait": true}))
        .await;
    assert!(done.ends_with("[status: completed]"), "{done}");

    let (list, _) = second.call("task_list", json!({})).await;
    assert!(!list.contains("subagent-1"), "{list}");
    let (output, is_error) = second.call("task_output", json!({"task_id": "subagent-1"})).await;
    assert!(is_error, "{output}");
    // Messaging the first session's child starts a task that fails: it is not this session's child.
    let (sent, _) = second
        .call(
            "send_message",
            json!({"subagent_id": child_id, "message": "hello from elsewhere"}),
        )
        .await;
    let task = sent.split_whitespace().nth(3).unwrap_or_default().to_owned();
    let (failed, _) = second.call("task_output", json!({"task_id": task, "wait": true})).await;
    assert!(failed.contains("[status: failed"), "{sent} / {failed}");
    // The owner can continue it.
    let (continued, is_error) = first
        .call("send_message", json!({"subagent_id": child_id, "message": "and again"}))
        .await;
    assert!(!is_error, "{continued}");
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_cancels_everything_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(dir.path(), "slow.json", SLOW_SCRIPT);
    let log = dir.path().join("server.log");
    let server = format!(
        "t=env MCP_TEST_LOG={} {} --grandchild",
        log.display(),
        test_server().display()
    );
    let session = start(dir.path(), &["--quiet", "--script", &slow, "--mcp-server", &server]).await;
    let dsh_group = Pid::from_raw(session.child.id().unwrap() as i32);
    let (started, _) = session
        .call(
            "subagent",
            json!({"description": "forever", "prompt": "slow", "run_in_background": true}),
        )
        .await;
    assert!(started.ends_with("as task subagent-1"), "{started}");
    let (echo, _) = session.call("mcp__t__echo", json!({"text": "hi"})).await;
    assert_eq!(echo, "echo: hi", "dsh mcp serves the parent's MCP tools too");
    let pid_line = std::fs::read_to_string(&log).unwrap();
    let server_group = Pid::from_raw(pid_line.lines().next().unwrap()[4..].parse().unwrap());

    let (status, stderr) = session.close().await;
    assert!(status.success(), "{stderr}");
    wait_group_gone(server_group).await;
    wait_group_gone(dsh_group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_stops_dsh_with_exit_2_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let model = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    model.set_nonblocking(true).unwrap();
    let base_url = format!("http://{}", model.local_addr().unwrap());
    for command in ["run", "acp", "mcp"] {
        let mut args = vec![
            command,
            "--base-url",
            &base_url,
            "--mcp-server",
            "nope=/nonexistent/server --flag",
        ];
        if command == "run" {
            args.push("do something");
        }
        let output = std::process::Command::new(DSH)
            .args(&args)
            .current_dir(dir.path())
            .env("DSH_API_KEY", "k")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(output.stdout.is_empty(), "{command}");
        assert_eq!(
            stderr.trim_end(),
            "dsh: MCP server \"nope\" failed to start: cannot run \"/nonexistent/server\": No such file or directory (os error 2)",
            "{command}"
        );
    }
    assert!(model.accept().is_err(), "no model call was made");
    let bad = std::process::Command::new(DSH)
        .args(["run", "--mcp-server", "no equals sign", "x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected <name>=<command line>, got \"no equals sign\""));
}

#[test]
fn dsh_run_gives_a_child_the_mcp_tools_and_the_child_reports_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let script_body = json!({"rules": [
        {"when": {"last_user_contains": "ask the echo server", "last_message": "user", "tool_offered": "mcp__t__echo"},
         "reply": {"tool_calls": [{"name": "mcp__t__echo", "arguments": {"text": "from the child"}}]}},
        {"when": {"last_tool": "mcp__t__echo"},
         "reply": {"text": "the child heard: {{last_tool_result}}"}},
        {"when": {"last_tool": "subagent"},
         "reply": {"text": "parent done: {{last_tool_result}}"}},
        {"when": {"last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "echo", "prompt": "ask the echo server"}}]}}
    ]});
    std::fs::write(dir.path().join("mcp.json"), script_body.to_string()).unwrap();
    let server = format!("t={}", test_server().display());
    let output = std::process::Command::new(DSH)
        .args(["run", "--quiet", "--script", "mcp.json", "--mcp-server", &server, "go"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.trim_end(), "parent done: the child heard: echo: from the child");
}

#[test]
fn stdout_carries_only_the_protocol() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(DSH)
        .args(["mcp", "--data-dir", ".dsh", "--mcp-server"])
        .arg(format!("t={}", test_server().display()))
        .current_dir(dir.path())
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "subagent", "arguments": {"description": "d", "prompt": "p"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "mcp__t__echo", "arguments": {"text": "raw"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    // Answers come before stdin closes: wait for them by reading, then close.
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut answered = Vec::new();
    while answered.len() < 3 {
        let line = lines.next().unwrap().unwrap();
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout: {line:?}: {e}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(id) = message["id"].as_u64() {
            answered.push((id, message));
        }
    }
    drop(stdin);
    for line in lines {
        let line = line.unwrap();
        assert!(
            serde_json::from_str::<Value>(&line).is_ok(),
            "not JSON on stdout: {line:?}"
        );
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    answered.sort_by_key(|(id, _)| *id);
    assert_eq!(answered[2].1["result"]["content"][0]["text"], "echo: raw");
    assert_eq!(answered[1].1["result"]["isError"], false);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("\ndsh: using the embedded scripted model"),
        "the banner goes to stderr: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_acp_release_their_mcp_servers_before_exiting() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["run", "acp"] {
        let log = dir.path().join(format!("{command}.log"));
        let server = format!(
            "t=env MCP_TEST_LOG={} {} --grandchild",
            log.display(),
            test_server().display()
        );
        let mut args = vec![command, "--quiet", "--mcp-server", &server];
        if command == "run" {
            args.extend(["--data-dir", ".dsh", "hello"]);
        }
        let output = Command::new(DSH)
            .args(&args)
            .current_dir(dir.path())
            .env_remove("DSH_API_KEY")
            .env_remove("DSH_BASE_URL")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let pid_line = std::fs::read_to_string(&log).unwrap();
        let group = Pid::from_raw(pid_line.lines().next().unwrap()[4..].parse().unwrap());
        // Released before dsh exited: nothing of the group (server and
        // grandchild) still runs. The grandchild's zombie, if init has not
        // collected it yet, counts as gone (as it does for the release).
        assert_eq!(running(group), Vec::<String>::new(), "{command}");
    }
}

#[test]
fn a_server_that_crashes_mid_run_fails_its_tool_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let script_body = json!({"rules": [
        {"when": {"last_tool": "mcp__t__crash"}, "reply": {"text": "carried on after: {{last_tool_result}}"}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "mcp__t__crash", "arguments": {}}]}}
    ]});
    std::fs::write(dir.path().join("crash.json"), script_body.to_string()).unwrap();
    let server = format!("t={}", test_server().display());
    let output = std::process::Command::new(DSH)
        .args([
            "run",
            "--quiet",
            "--script",
            "crash.json",
            "--mcp-server",
            &server,
            "go",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.trim_end(),
        "carried on after: Error: MCP server \"t\" exited during the call to its tool \"crash\" (it exited with exit code 3; its last stderr line: test server: crashing on purpose)"
    );
}

/// What the test server's `big` tool answers for `bytes`.
fn big_answer(bytes: usize) -> String {
    (0..bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tools_200_kb_answer_reaches_the_host_cut_and_pages_back_through_task_output() {
    let dir = tempfile::tempdir().unwrap();
    let server = format!("t={}", test_server().display());
    let session = start(dir.path(), &["--quiet", "--mcp-server", &server]).await;
    let result = session.call_result("mcp__t__big", json!({"bytes": 200_000})).await;
    let (text, is_error) = text_of(&result);
    assert!(!is_error, "{}", &text[..text.len().min(300)]);
    assert!(text.len() <= 32_000, "the host got {} bytes", text.len());
    assert!(
        text.contains(r#"call task_output {"task_id": "mcp-1", "offset": "#),
        "{}",
        &text[..text.len().min(300)]
    );
    let meta = serde_json::to_value(result.meta.as_ref().unwrap()).unwrap();
    let cut = &meta["dsh/resultCut"];
    assert_eq!(cut["fullBytes"], json!(200_000));
    assert_eq!(cut["taskId"], "mcp-1");
    // Every page, from the start, through MCP: exactly the answer.
    let mut read_back = String::new();
    let mut offset = 0u64;
    loop {
        let (page, is_error) = session
            .call("task_output", json!({"task_id": "mcp-1", "offset": offset}))
            .await;
        assert!(!is_error, "{page}");
        assert!(page.len() <= 32_000);
        let body = page.strip_suffix("\n[status: completed]").unwrap();
        match body.rsplit_once("\n\n[characters ") {
            Some((shown, notice)) => {
                read_back.push_str(shown);
                let next = notice.rsplit_once(r#""offset": "#).unwrap().1.trim_end_matches("}]");
                offset = next.parse().unwrap();
            }
            None => {
                read_back.push_str(body);
                break;
            }
        }
    }
    assert!(read_back == big_answer(200_000), "{} bytes read back", read_back.len());
    let (listed, _) = session.call("task_list", json!({})).await;
    assert_eq!(listed, "mcp-1 [status: completed] (mcp: mcp__t__big)");
    let (status, stderr) = session.close().await;
    assert!(status.success(), "{stderr}");
}

#[test]
fn a_childs_mcp_tool_answer_of_200_kb_reaches_its_next_request_cut() {
    let dir = tempfile::tempdir().unwrap();
    // The child calls the big tool, then answers with what its next
    // request carried: cut (with the notice naming its kept task) or whole.
    let script_body = json!({"rules": [
        {"when": {"last_user_contains": "fetch the big answer", "last_message": "user", "tool_offered": "mcp__t__big"},
         "reply": {"tool_calls": [{"name": "mcp__t__big", "arguments": {"bytes": 200_000}}]}},
        {"when": {"last_tool": "mcp__t__big", "last_tool_result_contains": r#"call task_output {"task_id": "mcp-1", "offset": "#},
         "reply": {"text": "the child read it cut, the rest kept as mcp-1"}},
        {"when": {"last_tool": "mcp__t__big"},
         "reply": {"text": "the child read it whole"}},
        {"when": {"last_tool": "subagent"},
         "reply": {"text": "parent done: {{last_tool_result}}"}},
        {"when": {"last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "big", "prompt": "fetch the big answer"}}]}}
    ]});
    std::fs::write(dir.path().join("big.json"), script_body.to_string()).unwrap();
    let server = format!("t={}", test_server().display());
    let output = std::process::Command::new(DSH)
        .args(["run", "--quiet", "--script", "big.json", "--mcp-server", &server])
        .args(["--data-dir", ".dsh", "go"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.trim_end(),
        "parent done: the child read it cut, the rest kept as mcp-1"
    );
    // The child's transcript holds the tool result as its next request
    // carried it: within the budget, not 200 KB.
    let agents = dir.path().join(".dsh").join("agents");
    let largest = std::fs::read_dir(&agents)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .filter(|transcript| transcript.contains("mcp__t__big"))
        .map(|transcript| transcript.len())
        .max()
        .unwrap();
    assert!(largest < 100_000, "a transcript of {largest} bytes");
}
