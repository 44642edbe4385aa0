//! `dsh acp` as a real child of the `acp` provider, and as a raw JSON-RPC
//! peer. Offline: the child uses the embedded scripted model or `--script`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_llm::ScriptedModel;
use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, StopReason, SubagentProvider};
use dsh_tools::ToolExecution;
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use serde_json::json;

use common::{DSH, GUARD, PARENT_DELEGATING_TO_SUBAGENT_ACP, Peer, mount_subagent_acp};

/// A child script: prompts containing "slow" never finish (until cancelled).
const SLOW_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_user_contains": "slow"}, "reply": {"text": "never finished", "delay_ms": 60000}},
  {"when": {}, "reply": {"text": "quick answer"}}
]}"#;

/// `dsh acp --quiet <extra>` as the provider's child. A shell records each
/// child's pid (= its process-group id) in `dir/pids/` and then execs dsh.
fn config(dir: &Path, extra: &[&str]) -> AcpConfig {
    let pids = dir.join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let mut args = vec![
        "-c".to_owned(),
        "echo $$ > \"$PID_DIR/$$\"; exec \"$0\" acp --quiet \"$@\"".to_owned(),
        DSH.to_owned(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    AcpConfig::new("sh")
        .args(args)
        .env("PID_DIR", pids.display().to_string())
        .cwd(dir)
        .startup_timeout(Duration::from_secs(30))
        .cancel_grace(Duration::from_secs(5))
        .eof_grace(Duration::from_secs(5))
        .term_grace(Duration::from_secs(2))
}

fn groups(dir: &Path) -> Vec<Pid> {
    std::fs::read_dir(dir.join("pids"))
        .unwrap()
        .map(|entry| Pid::from_raw(entry.unwrap().file_name().to_string_lossy().parse().unwrap()))
        .collect()
}

fn assert_groups_gone(dir: &Path, expected: usize) {
    let groups = groups(dir);
    assert_eq!(groups.len(), expected, "children started");
    for pgid in groups {
        assert_eq!(
            killpg(pgid, None),
            Err(Errno::ESRCH),
            "process group {pgid} still exists"
        );
    }
}

const BUILTIN_ANSWER: &str = "The subagent finished the task. Its report:\n\nScripted subagent here. I was asked: \"Summarize the README.\". In a real run I would do that work now; this demo model only reports back.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_agent_delegates_through_subagent_acp_to_dsh_acp() {
    let dir = tempfile::tempdir().unwrap();
    let mount = mount_subagent_acp(config(dir.path(), &[]));
    let tools = mount.tools.clone();
    // The parent delegates its task to `subagent_acp` and reports the answer.
    let parent_model = ScriptedModel::from_json_str(PARENT_DELEGATING_TO_SUBAGENT_ACP).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(parent_model), tools));
    let parent = Agent::builder(runtime).build().unwrap();
    let outcome = tokio::time::timeout(GUARD, parent.run("Summarize the README.", &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(outcome.stop, AgentStop::Completed);
    // The child (dsh acp on the embedded model) delegated once more, in its own process.
    assert_eq!(outcome.text, format!("Parent heard: {BUILTIN_ANSWER}"));
    assert_groups_gone(dir.path(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_delegation_reaches_dsh_acp_and_settles_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.json");
    std::fs::write(&script, SLOW_SCRIPT).unwrap();
    let provider = AcpProvider::new(config(dir.path(), &["--script", script.to_str().unwrap()])).unwrap();
    let cancel = CancellationToken::new();
    let request = StartRequest::text("be slow", AgentRef::new("parent"), cancel.clone());
    let mut run = tokio::time::timeout(GUARD, provider.start(request))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    cancel.cancel();
    let result = tokio::time::timeout(GUARD, run.result()).await.unwrap().unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    assert_eq!(
        result.diagnostic, None,
        "dsh acp answered session/cancel with `cancelled`"
    );
    assert_eq!(result.text(), "");
    tokio::time::timeout(GUARD, run.dispose()).await.unwrap().unwrap();
    assert_groups_gone(dir.path(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_delegations_run_in_two_children() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, SLOW_SCRIPT.replace("quick answer", "answer to {{last_user}}")).unwrap();
    let mount = mount_subagent_acp(config(dir.path(), &["--script", script.to_str().unwrap()]));
    let tools = mount.tools.clone();
    let call = |prompt: &str| {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("parent"));
        tools.call("subagent_acp", json!({"description": "d", "prompt": prompt}), exec)
    };
    let (first, second) = tokio::time::timeout(GUARD, async { futures::join!(call("one"), call("two")) })
        .await
        .unwrap();
    assert_eq!(
        (first.text.as_str(), second.text.as_str()),
        ("answer to one", "answer to two")
    );
    assert_groups_gone(dir.path(), 2);
}

fn script_file(dir: &Path) -> PathBuf {
    let path = dir.join("slow.json");
    std::fs::write(&path, SLOW_SCRIPT).unwrap();
    path
}

#[test]
fn dsh_acp_speaks_json_rpc_on_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let script = script_file(dir.path());
    let mut peer = Peer::start(dir.path(), &["--script", script.to_str().unwrap()]);

    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    let init = peer.until_response(1);
    assert_eq!(init.len(), 1);
    assert_eq!(init[0]["result"]["protocolVersion"], 1);
    assert_eq!(init[0]["result"]["agentInfo"]["name"], "dsh");

    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": dir.path(), "mcpServers": []}}));
    let session = peer.until_response(2)[0]["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A prompt: the answer streams as an agent_message_chunk (the scripted
    // model's two words come at once, so they are one chunk), then end_turn.
    peer.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}}));
    let turn = peer.until_response(3);
    assert_eq!(turn.len(), 2, "{turn:?}");
    let chunk = &turn[0];
    assert_eq!(chunk["method"], "session/update");
    assert_eq!(chunk["params"]["sessionId"], session.as_str());
    assert_eq!(chunk["params"]["update"]["sessionUpdate"], "agent_message_chunk");
    assert_eq!(
        chunk["params"]["update"]["content"],
        json!({"type": "text", "text": "quick answer"})
    );
    assert_eq!(turn[1]["result"]["stopReason"], "end_turn");

    // A slow prompt, cancelled: the turn ends `cancelled`.
    peer.send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "slow please"}]}}));
    std::thread::sleep(Duration::from_millis(200));
    peer.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let cancelled = peer.until_response(4);
    assert_eq!(cancelled.last().unwrap()["result"]["stopReason"], "cancelled");

    // An unknown session is refused.
    peer.send(json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt",
        "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}}));
    let refused = peer.until_response(5);
    assert_eq!(refused[0]["error"]["code"], -32602);
    assert_eq!(refused[0]["error"]["message"], "unknown session nope");

    // EOF on stdin ends the server cleanly, with nothing more on stdout.
    let Peer {
        mut child,
        stdin,
        lines,
    } = peer;
    drop(stdin);
    assert!(lines.recv_timeout(GUARD).is_err(), "stdout closes without another line");
    assert!(child.wait().unwrap().success());
}

/// `dsh acp` reads its stdin pipe non-blocking while it serves (non-blocking
/// mode belongs to the pipe's open file, which other processes may share)
/// and sets it back to blocking before it exits.
#[test]
fn dsh_acp_sets_its_stdin_pipe_back_to_blocking() {
    use std::io::{BufRead, Write};

    use nix::fcntl::{FcntlArg, OFlag, fcntl};

    let non_blocking = |fd: &std::io::PipeReader| {
        OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap()).contains(OFlag::O_NONBLOCK)
    };
    let (reader, mut writer) = std::io::pipe().unwrap();
    let shared = reader.try_clone().unwrap();
    let mut child = std::process::Command::new(DSH)
        .args(["acp", "--quiet"])
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(reader)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    writeln!(
        writer,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    )
    .unwrap();
    let mut answer = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut answer)
        .unwrap();
    assert!(answer.contains("\"protocolVersion\":1"), "{answer}");
    assert!(non_blocking(&shared), "served from a non-blocking pipe");
    drop(writer);
    assert!(child.wait().unwrap().success());
    assert!(!non_blocking(&shared), "blocking again after dsh acp exited");
}

/// Stdin and stdout need not be pipes: with a file for each (so tokio's
/// portable stdio serves them), the request is read, answered, and `dsh acp`
/// exits at the file's end.
#[test]
fn dsh_acp_serves_files_on_stdin_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    std::fs::write(&input, format!("{request}\n")).unwrap();
    let output = dir.path().join("out.jsonl");
    let status = std::process::Command::new(DSH)
        .args(["acp", "--quiet"])
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(std::fs::File::open(&input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let written = std::fs::read_to_string(&output).unwrap();
    let answers: Vec<serde_json::Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(answers.len(), 1, "{written}");
    assert_eq!(answers[0]["id"], 1);
    assert_eq!(answers[0]["result"]["protocolVersion"], 1);
}

/// `initialize` is answered before the shared runtime is built, so a build
/// that fails (a configured MCP server that cannot start) comes after that
/// answer: no session is created, and `dsh acp` exits 2 naming the server.
#[test]
fn dsh_acp_answers_initialize_then_exits_2_when_its_runtime_fails_to_build() {
    use std::io::{BufRead, Read, Write};
    use std::sync::mpsc::RecvTimeoutError;

    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(DSH)
        .args(["acp", "--quiet", "--mcp-server", "nope=/nonexistent/server"])
        .current_dir(dir.path())
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut next = |what: &str| match lines.recv_timeout(GUARD) {
        Ok(line) => Some(line),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            panic!("dsh acp gave no {what} within {GUARD:?}");
        }
    };
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    )
    .unwrap();
    let answer: serde_json::Value = serde_json::from_str(&next("answer").unwrap()).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    // The session waits for the runtime, whose build fails: no answer, stdout ends.
    let _ = writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": dir.path(), "mcpServers": []}})
    );
    let rest: Vec<String> = std::iter::from_fn(|| next("end of stdout")).collect();
    assert!(rest.iter().all(|line| !line.contains("sessionId")), "{rest:?}");
    drop(stdin);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "dsh: MCP server \"nope\" failed to start: cannot run \"/nonexistent/server\": No such file or directory (os error 2)"
    );
}

/// A child that a session left running in the background does not outlive
/// the connection: when the client closes stdin, `dsh acp` cancels it and
/// waits for its release before exiting (the progress line says it was
/// aborted), even a child that ignores the end of its own stdin (here a
/// `dsh acp` fed through `cat` and then a `sleep`, so it sees no EOF); its
/// whole process group is gone.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn a_sessions_background_child_is_released_when_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    std::fs::create_dir_all(&pids).unwrap();
    let slow = dir.path().join("slow.json");
    std::fs::write(&slow, SLOW_SCRIPT).unwrap();
    let parent = dir.path().join("parent.json");
    std::fs::write(
        &parent,
        r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "subagent_slow",
    "arguments": {"description": "slow", "prompt": "slow work", "run_in_background": true}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "started"}}
]}"#,
    )
    .unwrap();
    let shell = r#"echo $$ > "$1/$$"; { cat; sleep 30; } | "$0" acp --quiet --script "$2""#;
    let config = format!(
        r#"[[subagents]]
tool_name = "subagent_slow"
provider = "acp"
command = "sh"
args = ["-c", {shell:?}, {dsh:?}, {pids:?}, {slow:?}]
max_depth = "provider-managed"
enable_run_in_background = true
"#,
        dsh = DSH,
        pids = pids.display().to_string(),
        slow = slow.display().to_string(),
    );
    std::fs::write(dir.path().join("parent.toml"), config).unwrap();
    let mut peer = Peer::with_stderr(
        dir.path(),
        &["--config", "parent.toml", "--script", parent.to_str().unwrap()],
        std::process::Stdio::piped(),
    );
    peer.initialize();
    let session = peer.new_session(dir.path());
    peer.prompt(3, &session, "Start it.");
    // The call returns at once; the turn then waits for its background
    // child before it answers (a prompt leaves no child running).
    let completed = loop {
        let message = peer.next();
        assert!(
            message.get("id") != Some(&serde_json::json!(3)),
            "the turn answered first: {message:#?}"
        );
        if message["params"]["update"]["status"] == "completed" {
            break message;
        }
    };
    let result = &completed["params"]["update"]["content"][0]["content"]["text"];
    assert!(result.as_str().unwrap().contains("subagent-1"), "{result}");
    // The background child starts on its own time: wait until it has (its
    // progress line on stderr), so that it is cancelled, not its start.
    let Peer { mut child, stdin, .. } = peer;
    let (tx, progress) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = "↳ subagent \"slow\" started";
    while !progress
        .recv_timeout(GUARD)
        .expect("the child's start")
        .starts_with(started)
    {}
    assert_eq!(groups(dir.path()).len(), 1, "one child process group");

    drop(stdin);
    let status = child.wait().unwrap();
    let rest: Vec<String> = progress.iter().collect();
    assert!(status.success(), "{rest:#?}");
    assert!(
        rest.iter().any(|line| line.starts_with("↳ subagent \"slow\" aborted")),
        "{rest:#?}"
    );
    // Released: the group was torn down (SIGTERM after the EOF grace) and
    // waited for; allow for the reaping of its last processes.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while groups(dir.path())
        .into_iter()
        .any(|pgid| killpg(pgid, None) != Err(Errno::ESRCH))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "a child's process group outlived dsh acp"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
