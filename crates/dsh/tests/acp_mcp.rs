//! The MCP servers an ACP client hands `dsh acp` in `session/new`, with the
//! official ACP SDK as the client and `dsh-mcp`'s test server (stdio) or
//! `dsh mcp --listen` (Streamable HTTP) as the MCP server: the session's
//! agent and its children get its tools, another session does not, a server
//! that cannot start fails `session/new` naming it and the cause, and the
//! end of the session releases the server. Offline: scripted models,
//! loopback only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use acp::schema::ProtocolVersion;
use acp::v1::schema::{
    ContentBlock, EnvVariable, InitializeRequest, LoadSessionRequest, McpServer, McpServerHttp, McpServerSse,
    McpServerStdio, NewSessionRequest, PromptRequest, SessionId, SessionNotification, SessionUpdate, StopReason,
    TextContent,
};
use agent_client_protocol as acp;
use common::{DSH, GUARD, mcp_test_server};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The parent calls the test server's `echo` when it is offered, then
/// delegates to a spawn child, which says whether it was offered `echo`
/// too; the parent's last words are the child's.
const SCRIPT: &str = r#"{"rules": [
  {"when": {"tool_not_offered": "subagent", "tool_offered": "mcp__tools__echo"}, "reply": {"text": "child sees echo"}},
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "child without echo"}},
  {"when": {"last_message": "tool", "last_tool": "subagent"}, "reply": {"text": "{{last_tool_result}}"}},
  {"when": {"last_message": "tool", "last_tool": "mcp__tools__echo"}, "reply": {"text": "{{last_tool_result}} | ", "tool_calls": [
    {"name": "subagent", "arguments": {"description": "look", "prompt": "look"}}]}},
  {"when": {"last_message": "user", "tool_offered": "mcp__tools__echo"}, "reply": {"tool_calls": [
    {"name": "mcp__tools__echo", "arguments": {"text": "hi"}}]}},
  {"when": {"last_message": "user"}, "reply": {"text": "no echo | ", "tool_calls": [
    {"name": "subagent", "arguments": {"description": "look", "prompt": "look"}}]}}
]}"#;

/// The test server as a client hands it over: by name, command and variables.
fn test_server(name: &str, log: &Path) -> McpServer {
    McpServer::Stdio(
        McpServerStdio::new(name, mcp_test_server())
            .env(vec![EnvVariable::new("MCP_TEST_LOG", log.display().to_string())]),
    )
}

/// The pid the test server logged at its start.
fn logged_pid(log: &Path) -> Pid {
    let text = std::fs::read_to_string(log).unwrap();
    let pid = text
        .lines()
        .find_map(|line| line.strip_prefix("pid "))
        .unwrap_or_else(|| panic!("no pid in {text:?}"));
    Pid::from_raw(pid.parse().unwrap())
}

/// What the client saw: each session's streamed text.
#[derive(Default)]
struct Seen {
    text: HashMap<String, String>,
}

/// `dsh acp --quiet --script <script> <extra>` in `dir`, its stdio piped.
fn dsh_acp(dir: &Path, script: &Path, extra: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(DSH)
        .args(["acp", "--quiet", "--script"])
        .arg(script)
        .args(extra)
        .current_dir(dir)
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .env_remove("DSH_PARENT_CONFIGS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// What the client does with a notification: record each session's
/// streamed text in `seen`.
fn client(seen: &Arc<Mutex<Seen>>) -> impl Fn(&SessionNotification) + Send + Sync + 'static {
    let seen = seen.clone();
    move |notification: &SessionNotification| {
        if let SessionUpdate::AgentMessageChunk(chunk) = &notification.update
            && let ContentBlock::Text(text) = &chunk.content
        {
            let mut seen = seen.lock().unwrap();
            let session = notification.session_id.to_string();
            seen.text.entry(session).or_default().push_str(&text.text);
        }
    }
}

fn go(session: &SessionId) -> PromptRequest {
    PromptRequest::new(session.clone(), vec![ContentBlock::Text(TextContent::new("go"))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_gets_the_stdio_mcp_servers_its_client_hands_it_and_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let log = dir.path().join("server.log");

    let mut child = dsh_acp(dir.path(), &script, &[]);
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = client(&seen);
    let cwd = dir.path().to_owned();
    let server = test_server("tools", &log);
    let broken = McpServer::Stdio(McpServerStdio::new("broken", dir.path().join("no-such-server")));
    let remote = McpServer::Sse(McpServerSse::new("docs", "http://127.0.0.1:9/sse"));

    let session = async move {
        acp::Client
            .v1()
            .name("acp-mcp-test")
            .on_receive_notification(
                async move |notification: SessionNotification, _cx| {
                    record(&notification);
                    Ok(())
                },
                acp::on_receive_notification!(),
            )
            .connect_with(
                acp::ByteStreams::new(stdin.compat_write(), stdout.compat()),
                async move |cx: acp::v1::ConnectionTo<acp::Agent>| {
                    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    // A server that cannot start fails the session, naming
                    // it and the cause; so does one of a transport dsh acp
                    // does not take (SSE, the older HTTP transport).
                    let failed = cx
                        .send_request(NewSessionRequest::new(cwd.clone()).mcp_servers(vec![broken]))
                        .block_task()
                        .await
                        .unwrap_err();
                    let refused = cx
                        .send_request(NewSessionRequest::new(cwd.clone()).mcp_servers(vec![remote]))
                        .block_task()
                        .await
                        .unwrap_err();
                    let with = cx
                        .send_request(NewSessionRequest::new(cwd.clone()).mcp_servers(vec![server]))
                        .block_task()
                        .await?
                        .session_id;
                    let without = cx
                        .send_request(NewSessionRequest::new(cwd.clone()))
                        .block_task()
                        .await?
                        .session_id;
                    let mut stops = Vec::new();
                    for session in [&with, &without] {
                        stops.push(cx.send_request(go(session)).block_task().await?.stop_reason);
                    }
                    Ok((failed, refused, with.to_string(), without.to_string(), stops))
                },
            )
            .await
    };
    let (failed, refused, with, without, stops) = tokio::time::timeout(GUARD, session).await.unwrap().unwrap();

    assert!(
        failed.message.contains("MCP server \"broken\" failed to start"),
        "{failed:?}"
    );
    assert!(failed.message.contains("no-such-server"), "the cause: {failed:?}");
    assert_eq!(refused.code, acp::ErrorCode::INVALID_PARAMS);
    assert!(refused.message.contains("\"docs\""), "{refused:?}");
    assert!(refused.message.contains("SSE"), "{refused:?}");

    assert_eq!(stops, [StopReason::EndTurn, StopReason::EndTurn]);
    let text = seen.lock().unwrap().text.clone();
    // The session with the server: its agent called `echo` there (with the
    // variables its client gave, so the server logged), and its child was
    // offered `echo` too.
    assert_eq!(text[&with], "echo: hi | child sees echo");
    // The other session, in the same process, has no such tool, nor its child.
    assert_eq!(text[&without], "no echo | child without echo");
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.matches("started echo").count(), 1, "{calls}");

    // The end of the session (the client closes the connection) releases
    // the server: its process group is gone once dsh acp has exited.
    let pid = logged_pid(&log);
    let status = tokio::time::timeout(GUARD, child.wait()).await.unwrap().unwrap();
    assert!(status.success());
    assert_eq!(killpg(pid, None), Err(Errno::ESRCH), "the server's group is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
async fn a_loaded_session_gets_the_servers_of_its_load_and_a_new_load_replaces_them() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let data = dir.path().join("data");
    let extra = ["--data-dir", data.to_str().unwrap()];
    let cwd = dir.path().to_owned();
    let seen = Arc::new(Mutex::new(Seen::default()));

    // A first process makes the session (no servers) and one turn.
    let mut first = dsh_acp(dir.path(), &script, &extra);
    let (stdin, stdout) = (first.stdin.take().unwrap(), first.stdout.take().unwrap());
    let record = client(&seen);
    let made = acp::Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                record(&notification);
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_with(
            acp::ByteStreams::new(stdin.compat_write(), stdout.compat()),
            async |cx: acp::v1::ConnectionTo<acp::Agent>| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let session = cx
                    .send_request(NewSessionRequest::new(cwd.clone()))
                    .block_task()
                    .await?
                    .session_id;
                cx.send_request(go(&session)).block_task().await?;
                Ok(session)
            },
        );
    let session = tokio::time::timeout(GUARD, made).await.unwrap().unwrap();
    assert!(
        tokio::time::timeout(GUARD, first.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );
    assert_eq!(
        seen.lock().unwrap().text[&session.to_string()],
        "no echo | child without echo"
    );
    seen.lock().unwrap().text.clear();

    // A second process loads it with the test server, takes a turn, then
    // loads it again without: the server goes at once, and so does `echo`.
    let log = dir.path().join("server.log");
    let server = test_server("tools", &log);
    let mut second = dsh_acp(dir.path(), &script, &extra);
    let (stdin, stdout) = (second.stdin.take().unwrap(), second.stdout.take().unwrap());
    let record = client(&seen);
    let turns = seen.clone();
    let loaded = acp::Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                record(&notification);
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_with(
            acp::ByteStreams::new(stdin.compat_write(), stdout.compat()),
            async |cx: acp::v1::ConnectionTo<acp::Agent>| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let load = |servers| LoadSessionRequest::new(session.clone(), cwd.clone()).mcp_servers(servers);
                cx.send_request(load(vec![server])).block_task().await?;
                // The replayed history is not this turn's text.
                turns.lock().unwrap().text.clear();
                cx.send_request(go(&session)).block_task().await?;
                let with = turns.lock().unwrap().text.remove(&session.to_string());
                cx.send_request(load(Vec::new())).block_task().await?;
                let released = killpg(logged_pid(&log), None);
                turns.lock().unwrap().text.clear();
                cx.send_request(go(&session)).block_task().await?;
                let without = turns.lock().unwrap().text.remove(&session.to_string());
                Ok((with, released, without))
            },
        );
    let (with, released, without) = tokio::time::timeout(GUARD, loaded).await.unwrap().unwrap();
    assert!(
        tokio::time::timeout(GUARD, second.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );
    assert_eq!(with.as_deref(), Some("echo: hi | child sees echo"));
    assert_eq!(released, Err(Errno::ESRCH), "the first load's server is gone");
    assert_eq!(without.as_deref(), Some("no echo | child without echo"));
}

/// `dsh mcp --listen` on a loopback port (its children answer `remote
/// answer`), and its URL.
async fn http_mcp_server(dir: &Path) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;

    let script = dir.join("remote.json");
    std::fs::write(
        &script,
        r#"{"rules": [{"when": {}, "reply": {"text": "remote answer"}}]}"#,
    )
    .unwrap();
    let mut child = tokio::process::Command::new(DSH)
        .args([
            "mcp",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            "remote-data",
            "--script",
        ])
        .arg(&script)
        .current_dir(dir)
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let prefix = "dsh mcp: serving MCP at ";
    let url = tokio::time::timeout(GUARD, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix(prefix) {
                return url.to_owned();
            }
        }
        panic!("dsh mcp did not listen")
    })
    .await
    .unwrap();
    // Keep draining its stderr, so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_gets_a_streamable_http_mcp_server_its_client_hands_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut remote, url) = http_mcp_server(dir.path()).await;
    // The session's agent delegates through the remote server's `subagent`.
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"rules": [
  {"when": {"last_message": "tool", "last_tool": "mcp__remote__subagent"}, "reply": {"text": "heard: {{last_tool_result}}"}},
  {"when": {"last_message": "user", "tool_offered": "mcp__remote__subagent"}, "reply": {"tool_calls": [
    {"name": "mcp__remote__subagent", "arguments": {"description": "ask", "prompt": "ask"}}]}},
  {"when": {}, "reply": {"text": "no remote"}}
]}"#,
    )
    .unwrap();
    let mut child = dsh_acp(dir.path(), &script, &[]);
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = client(&seen);
    let cwd = dir.path().to_owned();
    let session = acp::Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                record(&notification);
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_with(
            acp::ByteStreams::new(stdin.compat_write(), stdout.compat()),
            async |cx: acp::v1::ConnectionTo<acp::Agent>| {
                let initialized = cx
                    .send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                let server = McpServer::Http(McpServerHttp::new("remote", url.clone()));
                let session = cx
                    .send_request(NewSessionRequest::new(cwd.clone()).mcp_servers(vec![server]))
                    .block_task()
                    .await?
                    .session_id;
                let stop = cx.send_request(go(&session)).block_task().await?.stop_reason;
                Ok((initialized, session.to_string(), stop))
            },
        );
    let (initialized, session, stop) = tokio::time::timeout(GUARD, session).await.unwrap().unwrap();
    assert!(
        tokio::time::timeout(GUARD, child.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );
    let _ = remote.start_kill();
    assert!(initialized.agent_capabilities.mcp_capabilities.http, "advertised");
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(seen.lock().unwrap().text[&session], "heard: remote answer");
}
