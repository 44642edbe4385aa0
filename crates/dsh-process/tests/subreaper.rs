//! Teardown when we are the reaper: this test process makes itself a child
//! subreaper (as a program running as PID 1 in a container is), so the
//! grandchild a child leaves behind is reparented to us and, once killed,
//! stays a zombie until we collect it. The teardown neither waits for that
//! zombie until it fails nor leaves it behind.
//!
//! Its own test binary: the subreaper setting applies to the whole process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use dsh_process::{ChildSpec, Ladder, Teardown};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use tokio::io::AsyncBufReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaned_grandchild_is_collected() {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    // `cat` (the shell, replaced) never waits for the background sleep; at
    // end of input it exits and the sleep is reparented to us.
    let spec = ChildSpec::new("sh").args(["-c", "sleep 1000 & echo $!; exec cat > /dev/null"]);
    let (child, pipes) = spec.spawn().unwrap();
    let mut line = String::new();
    tokio::io::BufReader::new(pipes.stdout)
        .read_line(&mut line)
        .await
        .unwrap();
    let grandchild = line.trim().to_owned();
    drop(pipes.stdin);
    let began = Instant::now();
    let grace = Duration::from_millis(300);
    let torn = child.teardown(&Ladder::new(grace, grace)).await.unwrap();
    let took = began.elapsed();
    assert_eq!(torn, Teardown::Terminated, "the sleep outlived the EOF grace");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert_eq!(killpg(Pid::from_raw(child.group().id()), None), Err(Errno::ESRCH));
    assert!(
        !Path::new(&format!("/proc/{grandchild}")).exists(),
        "the grandchild {grandchild} was reparented to us and collected"
    );
}
