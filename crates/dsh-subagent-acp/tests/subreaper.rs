//! Teardown when we are the reaper: this test process makes itself a child
//! subreaper (as `dsh` is when it runs as PID 1 in a container), so an
//! orphaned grandchild of the ACP child is reparented to us and, once
//! killed, stays a zombie until we collect it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_subagent_acp::AcpConfig;
use dsh_subagent_api::CancellationToken;

mod common;

use common::{Mounted, agent};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_left_to_a_subreaper_is_reaped() {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let grandchild_file = dir.path().join("grandchild.pid");
    let config = AcpConfig::new(agent())
        .args(["refuse", "--ignore-eof", "--grandchild"])
        .env("FAULT_AGENT_GRANDCHILD_FILE", grandchild_file.display().to_string())
        .cwd(dir.path());
    let mounted = Mounted::new(config);
    let began = Instant::now();
    let call = mounted.call("adapter", "p", CancellationToken::new());
    let text = tokio::time::timeout(Duration::from_secs(40), call).await.unwrap().text;
    let took = began.elapsed();
    assert_eq!(
        text,
        "Error: subagent run failed\nDiagnostic: ACP stage session/prompt: the request failed: error -32603: Internal error"
    );
    // Before zombies counted as gone this took 15 s and failed the release.
    assert!(took < Duration::from_millis(2500), "{took:?}");
    eprintln!(
        "[timing] subreaper, grandchild reparented to us: {} ms",
        took.as_millis()
    );
    let grandchild = std::fs::read_to_string(&grandchild_file).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", grandchild.trim())).exists(),
        "the grandchild {grandchild} was reparented to us and collected"
    );
}
