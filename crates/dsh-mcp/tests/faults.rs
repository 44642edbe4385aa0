//! Release against servers that do not go quietly: one that keeps running
//! after its input ends, one that also ignores SIGTERM, and one whose
//! grandchild is left to another reaper. Each release climbs the ladder
//! (stdin closed, SIGTERM, SIGKILL to the group), returns within its graces,
//! and leaves no process of the server's group running.
//!
//! The grandchild left to a subreaper (us) is `tests/subreaper.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use dsh_mcp::{ClientOptions, McpMount, McpServerSpec};
use dsh_tools::ToolRegistry;
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// The test MCP server, built by `dsh-test-programs`.
fn server() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        dsh_test_programs::Program::McpTestServer
            .path()
            .into_os_string()
            .into_string()
            .unwrap()
    })
}

/// The graces of these releases: 300 ms after EOF, 300 ms after SIGTERM.
const GRACE: Duration = Duration::from_millis(300);

/// How long a release may take with those graces.
const LIMIT: Duration = Duration::from_millis(1500);

/// Runs `words` with `MCP_TEST_LOG` pointing at `log`.
fn spec(log: &Path, words: &[&str]) -> McpServerSpec {
    let mut all = vec!["env".to_owned(), format!("MCP_TEST_LOG={}", log.display())];
    all.extend(words.iter().map(|word| (*word).to_owned()));
    let mut spec = McpServerSpec::new("stubborn", &all[0], &all[1..]).unwrap();
    if let Some(launch) = spec.launch_mut() {
        *launch = launch.clone().eof_grace(GRACE).term_grace(GRACE);
    }
    spec
}

/// The server's pid (its process group) from its log.
fn server_pid(log: &Path) -> Pid {
    let text = std::fs::read_to_string(log).unwrap();
    let line = text.lines().find(|l| l.starts_with("pid ")).unwrap();
    Pid::from_raw(line[4..].parse().unwrap())
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

/// Mounts the server and releases it: `Ok`, under [`LIMIT`], and not before
/// `rungs` graces passed (so the fault was met: a server that ignores end
/// of input holds the release through the EOF grace). Returns the server's
/// process group.
async fn released_in_time(words: &[&str], rungs: u32) -> Pid {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&spec(&log, words), &tools, &ClientOptions::default())
        .await
        .unwrap();
    let pgid = server_pid(&log);
    let began = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), mount.release())
        .await
        .expect("the release returned")
        .unwrap();
    let took = began.elapsed();
    assert!(took < LIMIT, "the release took {took:?}");
    assert!(
        took >= GRACE * rungs,
        "the release took {took:?}, less than {rungs} graces"
    );
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("input ended, ignored"), "{log}");
    pgid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_end_of_input_is_terminated() {
    let pgid = released_in_time(&[server(), "--ignore-eof"], 1).await;
    assert_eq!(killpg(pgid, None), Err(Errno::ESRCH), "process group {pgid} is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_end_of_input_and_sigterm_is_killed() {
    // `trap '' TERM` is inherited across exec: the server ignores SIGTERM too.
    let pgid = released_in_time(&["sh", "-c", "trap '' TERM; exec \"$0\" --ignore-eof", server()], 2).await;
    assert_eq!(killpg(pgid, None), Err(Errno::ESRCH), "process group {pgid} is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_zombie_left_to_another_reaper_does_not_hold_the_release() {
    // At SIGTERM the server and its never-reaped grandchild die together;
    // the grandchild's zombie goes to init, which collects it when it will.
    let pgid = released_in_time(&[server(), "--ignore-eof", "--grandchild"], 1).await;
    assert_eq!(running(pgid), Vec::<String>::new(), "nothing of group {pgid} runs");
}
