//! The ladder against real processes: each rung where it is needed, the
//! whole group gone afterwards, and the environment each policy gives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use dsh_process::{Child, ChildSpec, Environment, Ladder, Teardown};
use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

const GRACE: Duration = Duration::from_millis(300);

fn sh(script: &str) -> ChildSpec {
    ChildSpec::new("sh").args(["-c", script])
}

/// The members of group `pgid` that still run, per `/proc`. A killed
/// grandchild may stay a zombie for a moment, until init collects it: the
/// teardown counts it as gone, and so does this.
fn running(pgid: i32) -> Vec<String> {
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

/// Asserts that no member of the child's group still runs.
fn assert_gone(child: &Child) {
    let left = running(child.group().id());
    assert!(left.is_empty(), "group {} still runs: {left:?}", child.group().id());
}

/// Spawns `spec`, closes its stdin and tears it down on 300 ms graces.
async fn torn_down(spec: ChildSpec) -> (Child, Teardown, Duration) {
    let (child, pipes) = spec.spawn().unwrap();
    drop(pipes.stdin);
    let began = Instant::now();
    let torn = child.teardown(&Ladder::new(GRACE, GRACE)).await.unwrap();
    (child, torn, began.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_exits_at_end_of_input_needs_no_signal() {
    let (child, torn, took) = torn_down(sh("cat > /dev/null; echo done >&2")).await;
    assert_eq!(torn, Teardown::Eof);
    assert!(took < GRACE, "{took:?}");
    assert_eq!(child.exit().unwrap().to_string(), "exit code 0");
    // A lone child, reaped by its waiter: not even a zombie is left.
    assert_eq!(killpg(Pid::from_raw(child.group().id()), None), Err(Errno::ESRCH));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_ignores_end_of_input_gets_sigterm() {
    // The shell waits for its background sleep, which ignores stdin.
    let (child, torn, took) = torn_down(sh("sleep 1000 & wait")).await;
    assert_eq!(torn, Teardown::Terminated);
    assert!(took < GRACE * 2, "{took:?}");
    assert_eq!(child.exit().unwrap().to_string(), "killed by signal SIGTERM");
    assert_gone(&child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_ignores_sigterm_gets_sigkill() {
    // `trap '' TERM` is inherited across exec and by the background sleep.
    let (child, torn, took) = torn_down(sh("trap '' TERM; sleep 1000 & exec sleep 1000")).await;
    assert_eq!(torn, Teardown::Killed);
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert_eq!(child.exit().unwrap().to_string(), "killed by signal SIGKILL");
    assert_gone(&child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_child_kills_its_group() {
    let (child, _pipes) = sh("sleep 1000 & exec sleep 1000").spawn().unwrap();
    let pgid = child.group().id();
    drop(child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running(pgid).is_empty() {
        assert!(Instant::now() < deadline, "process group {pgid} still exists");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stderr_tail_keeps_the_last_bytes() {
    // 25 bytes written, 20 kept: `first` is cut.
    let spec = sh("printf 'first\\n\\033[31mlast\\033[0m line\\n' >&2").stderr_tail_bytes(20);
    let (child, _torn, _took) = torn_down(spec).await;
    let tail = child.stderr_tail_after_close(Duration::from_secs(5)).await;
    assert_eq!(tail.text().as_deref(), Some("…last line"));
}

/// What `env` prints in a child of `spec`, one `NAME=value` per line.
async fn env_of(spec: ChildSpec) -> Vec<String> {
    let (child, mut pipes) = spec.spawn().unwrap();
    let mut out = String::new();
    pipes.stdout.read_to_string(&mut out).await.unwrap();
    drop(pipes.stdin);
    child.teardown(&Ladder::new(GRACE, GRACE)).await.unwrap();
    out.lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_policy_gives_its_environment() {
    // Cargo sets this for every test run; a scrubbed child must not see it.
    let name = "CARGO_MANIFEST_DIR";
    let parent = std::env::var(name).ok();
    let has = |lines: &[String]| {
        lines
            .iter()
            .find_map(|line| line.strip_prefix(&format!("{name}=")).map(str::to_owned))
    };

    let scrubbed = env_of(
        ChildSpec::new("env")
            .environment(Environment::Scrubbed { pass: vec![] })
            .env("SET", "1"),
    )
    .await;
    assert_eq!(has(&scrubbed), None);
    assert!(scrubbed.contains(&"SET=1".to_owned()), "{scrubbed:?}");
    let names: Vec<&str> = scrubbed
        .iter()
        .filter_map(|line| line.split_once('='))
        .map(|(n, _)| n)
        .collect();
    assert!(
        names.iter().all(|n| *n == "SET" || dsh_process::BASE_ENV.contains(n)),
        "only the base and the set entries: {names:?}"
    );

    let passed = env_of(ChildSpec::new("env").environment(Environment::Scrubbed {
        pass: vec![name.to_owned()],
    }))
    .await;
    assert_eq!(has(&passed), parent);

    let inherited = env_of(ChildSpec::new("env").env("SET", "1")).await;
    assert_eq!(has(&inherited), parent);
    assert!(inherited.contains(&"SET=1".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withheld_variable_reaches_the_child_under_no_policy() {
    // Cargo sets both for every test run.
    let (secret, other) = ("CARGO_MANIFEST_DIR", "CARGO_PKG_NAME");
    let names = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
            .collect()
    };
    let inherited = env_of(ChildSpec::new("env").withhold_env(secret)).await;
    assert!(!names(&inherited).contains(&secret.to_owned()), "{inherited:?}");
    assert!(names(&inherited).contains(&other.to_owned()), "the rest is inherited");
    let passed = env_of(
        ChildSpec::new("env")
            .environment(Environment::Scrubbed {
                pass: vec![secret.to_owned(), other.to_owned()],
            })
            .withhold_env(secret),
    )
    .await;
    assert!(!names(&passed).contains(&secret.to_owned()), "{passed:?}");
    assert!(names(&passed).contains(&other.to_owned()), "the rest passes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_cannot_run_is_an_io_error() {
    let error = ChildSpec::new("/nonexistent/program").spawn().unwrap_err();
    assert_eq!(error.to_string(), "No such file or directory (os error 2)");
}
