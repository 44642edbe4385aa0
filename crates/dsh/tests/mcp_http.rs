//! `dsh mcp --listen` over Streamable HTTP on a loopback port, driven by
//! dsh-mcp's client (`McpMount`) and by `dsh run --mcp-server <name>=<url>`:
//! one calling agent per session, DELETE releasing a session's children,
//! the bearer token, the refusals, and a clean stop at SIGTERM. Offline:
//! scripted models only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use dsh_mcp::{ClientOptions, McpMount, McpServerSpec, RemoteServer};
use dsh_tools::{CancellationToken, ToolExecution, ToolRegistry};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// A hang guard, far above anything these tests wait for.
const GUARD: Duration = Duration::from_secs(60);

/// Children answer prompts containing "slow" only after a minute.
const SLOW_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_user_contains": "slow"}, "reply": {"text": "never finished", "delay_ms": 60000}},
  {"when": {}, "reply": {"text": "quick answer"}}
]}"#;

/// A token long enough to guard a server (32 bytes or more).
const TOKEN: &str = "tok-0123456789abcdef0123456789abcdef";

/// A running `dsh mcp --listen`, its URL and its stderr.
struct Server {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
    /// The task reading stderr: it ends when the pipe closes.
    reader: tokio::task::JoinHandle<()>,
}

async fn serve(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    std::fs::write(dir.join("slow.json"), SLOW_SCRIPT).unwrap();
    let mut child = Command::new(DSH)
        .args([
            "mcp",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            ".dsh",
            "--script",
            "slow.json",
        ])
        .args(extra)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let sink = stderr.clone();
    let reader = tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(read @ 1..) = pipe.read(&mut buffer).await {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    });
    let prefix = "dsh mcp: serving MCP at ";
    let deadline = tokio::time::Instant::now() + GUARD;
    let url = loop {
        let text = stderr.lock().unwrap().clone();
        if let Some(line) = text.lines().find(|line| line.starts_with(prefix)) {
            break line[prefix.len()..].to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "dsh did not listen: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    Server {
        child,
        url,
        stderr,
        reader,
    }
}

impl Server {
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    async fn wait_for(&self, text: &str) {
        let deadline = tokio::time::Instant::now() + GUARD;
        while !self.stderr().contains(text) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {text:?} in: {}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then the exit status, once all of stderr has been read:
    /// the exit can be seen before the last lines are.
    async fn stop(mut self) -> std::process::ExitStatus {
        let pid = Pid::from_raw(self.child.id().unwrap() as i32);
        kill(pid, Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(GUARD, self.child.wait()).await.unwrap().unwrap();
        tokio::time::timeout(GUARD, self.reader).await.unwrap().unwrap();
        status
    }
}

async fn mount(url: &str, tools: &ToolRegistry) -> McpMount {
    let spec = McpServerSpec::remote("d", RemoteServer::new(url).unwrap()).unwrap();
    McpMount::start(&spec, tools, &ClientOptions::default()).await.unwrap()
}

async fn call(tools: &ToolRegistry, tool: &str, args: serde_json::Value) -> (String, bool) {
    let exec = ToolExecution::new(CancellationToken::new());
    let result = tokio::time::timeout(GUARD, tools.call(tool, args, exec)).await.unwrap();
    (result.text, result.is_error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_has_its_own_agent_and_delete_releases_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[], &[]).await;
    let first = ToolRegistry::new();
    let first_mount = mount(&server.url, &first).await;
    assert_eq!(
        first_mount.tool_names(),
        [
            "mcp__d__send_message",
            "mcp__d__subagent",
            "mcp__d__task_kill",
            "mcp__d__task_list",
            "mcp__d__task_output"
        ]
    );
    let second = ToolRegistry::new();
    let second_mount = mount(&server.url, &second).await;

    let (started, is_error) = call(
        &first,
        "mcp__d__subagent",
        json!({"description": "forever", "prompt": "slow", "run_in_background": true}),
    )
    .await;
    assert!(!is_error, "{started}");
    let child_id = started
        .strip_prefix("started subagent ")
        .and_then(|rest| rest.strip_suffix(" as task subagent-1"))
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    server.wait_for("↳ subagent \"forever\" started").await;

    // The other session sees none of it, and its errors name nothing of the first's.
    let (list, _) = call(&second, "mcp__d__task_list", json!({})).await;
    assert!(!list.contains("subagent-1"), "{list}");
    let (output, is_error) = call(&second, "mcp__d__task_output", json!({"task_id": "subagent-1"})).await;
    assert!(is_error, "{output}");
    let (sent, _) = call(
        &second,
        "mcp__d__send_message",
        json!({"subagent_id": child_id, "message": "hello from elsewhere"}),
    )
    .await;
    let task = sent.split_whitespace().nth(3).unwrap_or_default().to_owned();
    let (failed, _) = call(&second, "mcp__d__task_output", json!({"task_id": task, "wait": true})).await;
    assert!(failed.contains("[status: failed"), "{sent} / {failed}");
    let data_dir = dir.path().join(".dsh");
    for text in [&list, &output, &sent, &failed] {
        assert!(
            !text.contains(data_dir.to_str().unwrap()),
            "the data directory leaked: {text}"
        );
        assert!(!text.contains(".dsh/"), "a path leaked: {text}");
    }

    // Ending the first session (DELETE) releases its background child at once.
    tokio::time::timeout(GUARD, first_mount.release())
        .await
        .unwrap()
        .unwrap();
    server.wait_for("↳ subagent \"forever\" aborted").await;
    // The second session goes on.
    let (answer, is_error) = call(
        &second,
        "mcp__d__subagent",
        json!({"description": "q", "prompt": "quick"}),
    )
    .await;
    assert_eq!((answer.as_str(), is_error), ("quick answer", false));
    drop(second_mount);
    let status = server.stop().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_every_session_and_its_children_before_dsh_exits() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[], &[]).await;
    let tools = ToolRegistry::new();
    let _mount = mount(&server.url, &tools).await;
    let pending = tokio::spawn({
        let tools = tools.clone();
        async move {
            call(
                &tools,
                "mcp__d__subagent",
                json!({"description": "forever", "prompt": "slow"}),
            )
            .await
        }
    });
    server.wait_for("↳ subagent \"forever\" started").await;
    let stderr = server.stderr.clone();
    let status = server.stop().await;
    assert!(status.success(), "{status:?}");
    let stderr = stderr.lock().unwrap().clone();
    assert!(stderr.contains("↳ subagent \"forever\" aborted"), "{stderr}");
    // The client's call fails instead of hanging.
    let (text, is_error) = tokio::time::timeout(GUARD, pending).await.unwrap().unwrap();
    assert!(is_error, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_request_and_dsh_run_reads_it_from_the_named_variable() {
    let dir = tempfile::tempdir().unwrap();
    let token = [("DSH_TEST_MCP_TOKEN", TOKEN)];
    let server = serve(dir.path(), &["--bearer-token-env", "DSH_TEST_MCP_TOKEN"], &token).await;
    let client = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    for authorization in [None, Some("Bearer wrong"), Some(TOKEN)] {
        let mut request = client
            .post(&server.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(initialize.to_string());
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{authorization:?}");
    }

    // A parent of `dsh run` with the remote server in dsh.toml, its token in the variable.
    let config = format!(
        "[[mcp_servers]]\nname = \"d\"\nurl = \"{}\"\nbearer_token_env = \"DSH_TEST_MCP_TOKEN\"\n",
        server.url
    );
    std::fs::write(dir.path().join("dsh.toml"), config).unwrap();
    let parent = json!({"rules": [
        {"when": {"last_tool": "mcp__d__task_list"}, "reply": {"text": "remote says: {{last_tool_result}}"}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "mcp__d__task_list", "arguments": {}}]}}
    ]});
    std::fs::write(dir.path().join("parent.json"), parent.to_string()).unwrap();
    let run = |env: &[(&str, &str)]| {
        std::process::Command::new(DSH)
            .args(["run", "--quiet", "--script", "parent.json", "go"])
            .current_dir(dir.path())
            .env_remove("DSH_TEST_MCP_TOKEN")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let output = run(&token);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout.trim_end(), "remote says: (no tasks)");
    // Without the variable: exit 2, naming the server, before any model call.
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "dsh: MCP server \"d\" failed to start: the environment variable DSH_TEST_MCP_TOKEN (its bearer token) is not set or empty"
    );
    // With a wrong token: the server's 401, named.
    let output = run(&[("DSH_TEST_MCP_TOKEN", "wrong")]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        format!(
            "dsh: MCP server \"d\" failed to start: {} answered HTTP 401 Unauthorized (missing or wrong credentials: see bearer_token_env)",
            server.url
        )
    );
    assert!(server.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_and_missing_remote_servers_stop_dsh_with_exit_2_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[], &[]).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let missing = server.url.replace("/mcp", "/elsewhere");
    let model = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    model.set_nonblocking(true).unwrap();
    let base_url = format!("http://{}", model.local_addr().unwrap());
    for (url, cause) in [
        (&unreachable, format!("cannot reach {unreachable}: ")),
        (
            &missing,
            format!("{missing} answered HTTP 404 Not Found (no MCP endpoint at that URL?)"),
        ),
    ] {
        for command in ["run", "mcp"] {
            let server_flag = format!("d={url}");
            let mut args = vec![command, "--base-url", &base_url, "--mcp-server", &server_flag];
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
            assert!(
                stderr
                    .lines()
                    .any(|line| line.starts_with(&format!("dsh: MCP server \"d\" failed to start: {cause}"))),
                "{command}: {stderr}"
            );
        }
    }
    assert!(model.accept().is_err(), "no model call was made");
    assert!(server.stop().await.success());
}

#[test]
fn listening_beyond_loopback_without_a_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str]| {
        let output = std::process::Command::new(DSH)
            .arg("mcp")
            .args(args)
            .current_dir(dir.path())
            .env_remove("DSH_TEST_UNSET_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&output.stderr).trim_end().to_owned()
    };
    assert_eq!(
        refused(&["--listen", "0.0.0.0:0"]),
        "dsh mcp: refusing to serve MCP on 0.0.0.0:0 without a bearer token: anyone who reaches it could start agents on your model key (listen on 127.0.0.1, or set a token)"
    );
    assert_eq!(
        refused(&["--listen", "0", "--bearer-token-env", "DSH_TEST_UNSET_TOKEN"]),
        "dsh mcp: the environment variable DSH_TEST_UNSET_TOKEN (the bearer token of --bearer-token-env) is not set or empty"
    );
    assert!(refused(&["--listen", "nowhere"]).contains("expected PORT, localhost:PORT or ADDR:PORT, got \"nowhere\""));
    // A token that could be guessed is refused before anything starts
    // (and were it not, the server would run: it is stopped after a while).
    let mut child = std::process::Command::new(DSH)
        .args(["mcp", "--listen", "0", "--bearer-token-env", "DSH_TEST_SHORT_TOKEN"])
        .current_dir(dir.path())
        .env("DSH_TEST_SHORT_TOKEN", "tok-123")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + GUARD;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "dsh mcp: the bearer token is 7 bytes long: it must be at least 32 (for example 64 hex digits from `openssl rand -hex 32`)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_are_not_logged_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), &[], &[("DSH_LOG", "info")]).await;
    let response = reqwest::Client::new()
        .post(&server.url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(response);
    let mount = mount(&server.url, &ToolRegistry::new()).await;
    drop(mount);
    let stderr = server.stderr.clone();
    assert!(server.stop().await.success());
    let stderr = stderr.lock().unwrap().clone();
    assert!(stderr.contains(" INFO "), "info lines are shown: {stderr}");
    assert!(!stderr.contains(&session), "the session id leaked: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_variable_reaches_no_process_dsh_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::write(path.join("child.toml"), "").unwrap();
    // An MCP server and an ACP child that write down their environment,
    // the ACP child asking for the token's variable by name.
    let server_script = format!("env > mcp-env.txt; exec {}", common::mcp_test_server().display());
    let config = format!(
        r#"[[mcp_servers]]
name = "probe"
command = "sh"
args = ["-c", {server_script:?}]

[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = "sh"
args = ["-c", "env > acp-env.txt; exec {DSH} acp --quiet --config child.toml"]
pass_env = ["DSH_TEST_MCP_TOKEN", "DSH_TEST_PASSED"]
max_depth = "provider-managed"
"#
    );
    std::fs::write(path.join("dsh.toml"), config).unwrap();
    let env = [("DSH_TEST_MCP_TOKEN", TOKEN), ("DSH_TEST_PASSED", "visible")];
    let server = serve(path, &["--bearer-token-env", "DSH_TEST_MCP_TOKEN"], &env).await;
    let tools = ToolRegistry::new();
    let remote = RemoteServer::new(&server.url)
        .unwrap()
        .header("Authorization", format!("Bearer {TOKEN}"))
        .unwrap();
    let spec = McpServerSpec::remote("d", remote).unwrap();
    let mounted = McpMount::start(&spec, &tools, &ClientOptions::default()).await.unwrap();
    let (answer, is_error) = call(
        &tools,
        "mcp__d__subagent_remote",
        json!({"description": "probe", "prompt": "hello"}),
    )
    .await;
    assert!(!is_error, "{answer}");
    mounted.release().await.unwrap();
    assert!(server.stop().await.success());
    for file in ["mcp-env.txt", "acp-env.txt"] {
        let written = std::fs::read_to_string(path.join(file)).unwrap();
        let names: Vec<&str> = written
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(n, _)| n)
            .collect();
        assert!(names.contains(&"DSH_TEST_PASSED"), "{file}: {names:?}");
        assert!(
            !names.contains(&"DSH_TEST_MCP_TOKEN"),
            "{file} got the token: {names:?}"
        );
        assert!(!written.contains(TOKEN), "{file} holds the token");
    }
}
