//! Release when we are the reaper: this test process makes itself a child
//! subreaper (as `dsh` is when it runs as PID 1 in a container), so the
//! grandchild a server leaves behind is reparented to us and, once killed,
//! stays a zombie until we collect it. Release must neither wait for that
//! zombie forever nor leave it behind.
//!
//! Its own test binary: the subreaper setting applies to the whole process.
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

/// The pid the test server logged as `<key> <pid>`.
fn logged_pid(log: &Path, key: &str) -> Pid {
    let text = std::fs::read_to_string(log).unwrap();
    let prefix = format!("{key} ");
    let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap();
    Pid::from_raw(line[prefix.len()..].parse().unwrap())
}

/// Mounts the test server with `flags` and `--grandchild`, releases it, and
/// checks the release: `Ok`, under [`LIMIT`], the group gone and the
/// grandchild collected.
async fn released_with_its_grandchild(flags: &[&str]) {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut words = vec![
        "env".to_owned(),
        format!("MCP_TEST_LOG={}", log.display()),
        server().to_owned(),
    ];
    words.extend(flags.iter().chain(&["--grandchild"]).map(|flag| (*flag).to_owned()));
    let mut spec = McpServerSpec::new("leaky", &words[0], &words[1..]).unwrap();
    if let Some(launch) = spec.launch_mut() {
        *launch = launch.clone().eof_grace(GRACE).term_grace(GRACE);
    }
    let tools = ToolRegistry::new();
    let mount = McpMount::start(&spec, &tools, &ClientOptions::default()).await.unwrap();
    let (pgid, grandchild) = (logged_pid(&log, "pid"), logged_pid(&log, "grandchild"));
    let began = Instant::now();
    tokio::time::timeout(Duration::from_secs(30), mount.release())
        .await
        .expect("the release returned")
        .unwrap();
    let took = began.elapsed();
    assert!(took < LIMIT, "the release took {took:?}");
    eprintln!("[timing] subreaper, MCP server {flags:?}: {} ms", took.as_millis());
    assert_eq!(killpg(pgid, None), Err(Errno::ESRCH), "process group {pgid} is gone");
    assert!(
        !Path::new(&format!("/proc/{grandchild}")).exists(),
        "the grandchild {grandchild} was reparented to us and collected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_left_by_a_server_that_exits_at_end_of_input_is_reaped() {
    released_with_its_grandchild(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_left_by_a_server_that_ignores_end_of_input_is_reaped() {
    released_with_its_grandchild(&["--ignore-eof"]).await;
}
