//! What dsh keeps in its data directory, and for how long (the crate
//! README's "What is kept on disk"): transcripts are private (0600 files in
//! 0700 directories); an MCP session's transcripts go with the session
//! unless `--keep-transcripts`; `[data]` bounds the rest by age and size;
//! and resuming (`dsh run --resume`, ACP `session/load`, `send_message` to
//! an idle child) works for every transcript the policy keeps. Offline:
//! the embedded scripted model or `--script`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod mcp_session;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::{DSH, GUARD, Peer, dsh};
use dsh_mcp::{ClientOptions, McpMount, McpServerSpec, RemoteServer};
use dsh_tools::{CancellationToken, ToolExecution, ToolRegistry};
use mcp_session::McpSession;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The transcripts in `data_dir`, by agent id, sorted.
fn transcripts(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("agents")) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.trim_end_matches(".jsonl").to_owned()
        })
        .collect();
    ids.sort();
    ids
}

fn transcript(data_dir: &Path, id: &str) -> PathBuf {
    data_dir.join("agents").join(format!("{id}.jsonl"))
}

/// Dates a transcript's last write back by `age`.
fn age(data_dir: &Path, id: &str, age: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(transcript(data_dir, id))
        .unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `dsh run` in `dir` over the data directory `data`.
fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["run", "--quiet", "--data-dir", "data"];
    all.extend_from_slice(args);
    dsh(dir, &all)
}

/// Polls `done` until it holds, or fails after the guard.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + GUARD;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn the_transcripts_of_a_run_and_its_children_are_private() {
    let dir = tempfile::tempdir().unwrap();
    // The embedded model delegates once: a parent and a child.
    let output = run(dir.path(), &["Summarize why delegation keeps context small."]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let data = dir.path().join("data");
    let ids = transcripts(&data);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(mode(&data), 0o700, "the data directory dsh made");
    assert_eq!(mode(&data.join("agents")), 0o700);
    for id in &ids {
        assert_eq!(mode(&transcript(&data, id)), 0o600, "{id}");
    }
}

#[test]
fn a_run_sweeps_what_the_data_bounds_no_longer_keep_and_resumes_what_they_do() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{"rules": [{"when": {}, "reply": {"text": "seen {{assistant_turns}} answers"}}]}"#;
    std::fs::write(dir.path().join("script.json"), script).unwrap();
    let scripted = |args: &[&str]| {
        let mut all = vec!["--script", "script.json"];
        all.extend_from_slice(args);
        run(dir.path(), &all)
    };
    let data = dir.path().join("data");
    assert!(scripted(&["first"]).status.success());
    let [old] = transcripts(&data).try_into().unwrap();
    assert!(scripted(&["second"]).status.success());
    let [recent] = transcripts(&data)
        .into_iter()
        .filter(|id| id != &old)
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    // The first was last written 40 days ago, the second 2 days ago.
    age(&data, &old, 40 * DAY);
    age(&data, &recent, 2 * DAY);

    // `[data] max_age = "off"` keeps both through a run.
    std::fs::write(dir.path().join("dsh.toml"), "[data]\nmax_age = \"off\"\n").unwrap();
    assert!(scripted(&["third"]).status.success());
    assert!(transcripts(&data).contains(&old));

    // The default (30 days) takes the old one when the next run ends.
    std::fs::remove_file(dir.path().join("dsh.toml")).unwrap();
    let third = transcripts(&data);
    assert!(scripted(&["fourth"]).status.success());
    assert!(
        !transcripts(&data).contains(&old),
        "the 40-day-old transcript was swept"
    );
    assert_eq!(transcripts(&data).len(), third.len(), "one went, one came");

    // The recent one resumes with its history; the old one is gone.
    let resumed = scripted(&["--resume", &recent, "again"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "seen 1 answers\n");
    let gone = scripted(&["--resume", &old, "again"]);
    assert_eq!(gone.status.code(), Some(2), "{}", text(&gone.stderr));
}

#[test]
fn data_bounds_that_are_not_ages_or_sizes_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (file, expected) in [
        (
            "[data]\nmax_age = \"30 days\"\n",
            "dsh: dsh.toml:2:11: data.max_age: \"30 days\" is not an age: write a positive whole number and a unit, such as \"30d\", \"12h\" or \"90min\", or \"off\" to keep transcripts whatever their age\n",
        ),
        (
            "[data]\nmax_size = 1000\n",
            "dsh: dsh.toml:2:12: data.max_size: invalid type: integer `1000`, expected text such as \"30d\" or \"1GiB\", or \"off\"\n",
        ),
        (
            "[data]\nmax_files = 10\n",
            "dsh: dsh.toml:2:1: data.max_files: unknown field `max_files`, expected `max_age` or `max_size`\n",
        ),
    ] {
        std::fs::write(dir.path().join("dsh.toml"), file).unwrap();
        let output = dsh(dir.path(), &["config", "check"]);
        assert_eq!(output.status.code(), Some(2), "{file}");
        assert_eq!(text(&output.stderr), expected, "{file}");
    }
}

/// A `dsh mcp` on stdio over `<dir>/.dsh`, and its rmcp client.
async fn mcp_stdio(dir: &Path, extra: &[&str]) -> McpSession {
    McpSession::start(dir, &[&["--data-dir", ".dsh"], extra].concat()).await
}

/// A session's continuable child, continued from its transcript once its
/// first run ended (a cold resume): returns the child's id.
async fn continue_a_child(session: &McpSession) -> String {
    let started = session
        .answer(
            "subagent",
            json!({"description": "d", "prompt": "Work quietly.", "run_in_background": true}),
        )
        .await;
    let child = started
        .strip_prefix("started subagent ")
        .and_then(|rest| rest.strip_suffix(" as task subagent-1"))
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let done = session
        .answer("task_output", json!({"task_id": "subagent-1", "wait": true}))
        .await;
    assert!(done.ends_with("[status: completed]"), "{done}");
    let sent = session
        .answer("send_message", json!({"subagent_id": child, "message": "and again"}))
        .await;
    assert_eq!(
        sent,
        format!("message started task subagent-2 continuing subagent {child}")
    );
    let again = session
        .answer("task_output", json!({"task_id": "subagent-2", "wait": true}))
        .await;
    assert!(again.ends_with("[status: completed]"), "{again}");
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_sessions_transcripts_go_with_it_after_a_cold_resume_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".dsh");
    let session = mcp_stdio(dir.path(), &[]).await;
    let child = continue_a_child(&session).await;
    let kept = transcripts(&data);
    assert!(
        kept.contains(&child),
        "the child is kept while its session is open: {kept:?}"
    );
    assert_eq!(kept.len(), 2, "the session's agent and its child: {kept:?}");
    assert!(session.close().await.success());
    assert_eq!(transcripts(&data), Vec::<String>::new(), "they went with the session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_transcripts_keeps_an_mcp_sessions_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".dsh");
    let session = mcp_stdio(dir.path(), &["--keep-transcripts"]).await;
    let child = continue_a_child(&session).await;
    assert!(session.close().await.success());
    let kept = transcripts(&data);
    assert!(kept.contains(&child) && kept.len() == 2, "{kept:?}");
}

/// A `dsh mcp --listen` over `<dir>/.dsh`, and its URL.
async fn mcp_http(dir: &Path) -> (Child, String) {
    let mut child = Command::new(DSH)
        .args(["mcp", "--listen", "127.0.0.1:0", "--data-dir", ".dsh"])
        .current_dir(dir)
        .env_remove("DSH_API_KEY")
        .env_remove("DSH_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let prefix = "dsh mcp: serving MCP at ";
    let mut seen = String::new();
    let url = tokio::time::timeout(GUARD, async {
        let mut buffer = [0u8; 4096];
        loop {
            let read = stderr.read(&mut buffer).await.unwrap();
            assert!(read > 0, "dsh did not listen: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
            if let Some(line) = seen
                .lines()
                .find(|line| line.starts_with(prefix) && seen.contains("/mcp\n"))
            {
                return line[prefix.len()..].to_owned();
            }
        }
    })
    .await
    .unwrap();
    // Keep draining stderr so dsh never blocks on it.
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        while let Ok(1..) = stderr.read(&mut buffer).await {}
    });
    (child, url)
}

async fn delegate(tools: &ToolRegistry) {
    let exec = ToolExecution::new(CancellationToken::new());
    let args = json!({"description": "d", "prompt": "Work quietly."});
    let result = tokio::time::timeout(GUARD, tools.call("mcp__d__subagent", args, exec))
        .await
        .unwrap();
    assert!(!result.is_error, "{}", result.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_sessions_transcripts_go_when_it_ends_and_no_other_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".dsh");
    let (mut server, url) = mcp_http(dir.path()).await;
    let spec = McpServerSpec::remote("d", RemoteServer::new(&url).unwrap()).unwrap();
    let (first, second) = (ToolRegistry::new(), ToolRegistry::new());
    let first_mount = McpMount::start(&spec, &first, &ClientOptions::default()).await.unwrap();
    let first_only = transcripts(&data);
    assert_eq!(first_only.len(), 1, "the first session's agent: {first_only:?}");
    let _second_mount = McpMount::start(&spec, &second, &ClientOptions::default())
        .await
        .unwrap();
    delegate(&first).await;
    delegate(&second).await;
    assert_eq!(transcripts(&data).len(), 4, "two sessions, a child each");

    // Ending the first session (DELETE) takes its transcripts, not the second's.
    tokio::time::timeout(GUARD, first_mount.release())
        .await
        .unwrap()
        .unwrap();
    eventually("the first session's transcripts went", || transcripts(&data).len() == 2).await;
    assert!(!transcripts(&data).contains(&first_only[0]));

    // Stopping dsh ends the second session too.
    kill(Pid::from_raw(server.id().unwrap() as i32), Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(GUARD, server.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(transcripts(&data), Vec::<String>::new());
}

#[test]
fn acp_sweeps_as_it_starts_and_loads_every_session_the_bounds_keep() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Two earlier sessions, each one prompt long.
    let mut sessions = Vec::new();
    for prompt in ["one", "two"] {
        let mut peer = Peer::start(dir.path(), &["--quiet", "--data-dir", "data"]);
        peer.initialize();
        let session = peer.new_session(dir.path());
        peer.prompt(3, &session, prompt);
        let answered = peer.until_response(3);
        assert_eq!(answered.last().unwrap()["result"]["stopReason"], "end_turn");
        drop(peer.stdin);
        assert!(peer.child.wait().unwrap().success());
        sessions.push(session);
    }
    let [old, recent] = sessions.try_into().unwrap();
    age(&data, &old, 40 * DAY);
    age(&data, &recent, 2 * DAY);

    let mut peer = Peer::start(dir.path(), &["--quiet", "--data-dir", "data"]);
    peer.initialize();
    let started = std::time::Instant::now();
    while transcript(&data, &old).exists() {
        assert!(started.elapsed() < GUARD, "the 40-day-old session was never swept");
        std::thread::sleep(Duration::from_millis(20));
    }
    let load = |peer: &mut Peer, id: u64, session: &str| {
        peer.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/load",
            "params": {"sessionId": session, "cwd": dir.path(), "mcpServers": []}}));
        peer.until_response(id).pop().unwrap()
    };
    let loaded = load(&mut peer, 4, &recent);
    assert!(loaded["result"].is_object(), "{loaded}");
    let refused = load(&mut peer, 5, &old);
    assert_eq!(refused["error"]["message"], format!("unknown session {old}"));
    // The loaded session is held while it is open, and goes on.
    peer.prompt(6, &recent, "three");
    let answered = peer.until_response(6);
    assert_eq!(answered.last().unwrap()["result"]["stopReason"], "end_turn");
    drop(peer.stdin);
    assert!(peer.child.wait().unwrap().success());
    assert!(transcript(&data, &recent).exists());
    assert_eq!(mode(&transcript(&data, &recent)), 0o600);
}

#[test]
fn a_session_open_in_one_dsh_acp_is_refused_by_another_until_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--quiet", "--data-dir", "data"];
    let mut first = Peer::start(dir.path(), &args);
    first.initialize();
    let session = first.new_session(dir.path());
    first.prompt(3, &session, "one");
    let answered = first.until_response(3);
    assert_eq!(answered.last().unwrap()["result"]["stopReason"], "end_turn");

    let load = |peer: &mut Peer, id: u64| {
        peer.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/load",
            "params": {"sessionId": session, "cwd": dir.path(), "mcpServers": []}}));
        peer.until_response(id).pop().unwrap()
    };
    let mut second = Peer::start(dir.path(), &args);
    second.initialize();
    let refused = load(&mut second, 4);
    assert_eq!(
        refused["error"]["message"],
        format!("session {session} is open in another dsh process; close it there first"),
        "{refused}"
    );
    // `dsh run --resume` of it is refused the same way, and changes nothing.
    let resumed = dsh(
        dir.path(),
        &["run", "--quiet", "--data-dir", "data", "--resume", &session, "two"],
    );
    assert_eq!(resumed.status.code(), Some(2), "{resumed:?}");
    assert!(
        text(&resumed.stderr).contains("another dsh runs it now"),
        "{}",
        text(&resumed.stderr)
    );

    // Closed in the first, the session loads in the second and goes on.
    first.send(json!({"jsonrpc": "2.0", "id": 5, "method": "session/close",
        "params": {"sessionId": session}}));
    assert!(first.until_response(5).pop().unwrap()["result"].is_object());
    let loaded = load(&mut second, 6);
    assert!(loaded["result"].is_object(), "{loaded}");
    second.prompt(7, &session, "three");
    let answered = second.until_response(7);
    assert_eq!(answered.last().unwrap()["result"]["stopReason"], "end_turn");
    for peer in [first, second] {
        let Peer { mut child, stdin, .. } = peer;
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}
