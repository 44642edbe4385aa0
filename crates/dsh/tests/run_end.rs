//! How `dsh run` ends without losing a child's work, through the real
//! binary and the scripted tree of [`support::tree`]: by default it waits
//! for the background children its parent left running; with `--no-wait`
//! (or `[run] wait = false`) it stops them resumably and exits 3, naming
//! each and the command that goes on; the first SIGINT stops the whole
//! tree resumably (exit 130), and `dsh run --resume` finishes it; a second
//! SIGINT exits at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use nix::sys::signal::Signal;
use support::model::Exchange;
use support::tree::{GUARD, Tree, agent, expected_markers, problems, step, task};

fn is_child(body: &serde_json::Value) -> bool {
    agent(body) != "P"
}

/// The parent's answer came, and its request had read no marker: the
/// parent answered while its background children still ran.
fn answered_early(log: &[Exchange]) -> bool {
    log.iter()
        .any(|exchange| agent(&exchange.body) == "P" && step(&exchange.body) == 1 && exchange.completed.is_some())
}

/// The parent answers at once while its two background children work: the
/// run waits for them, the parent reads their results, and its printed
/// answer carries them. Exit 0.
#[test]
fn a_run_waits_for_the_background_children_its_parent_left_running() {
    let children = ["B1", "B2"];
    let tree = Tree::new("");
    tree.server
        .hold_picked(|body| agent(body) == "B1" || agent(body) == "B2");
    let running = tree.start(&[task(&children)]);
    assert!(
        tree.server.wait_for(GUARD, answered_early),
        "the parent never answered:\n{}",
        tree.server.describe()
    );
    tree.server.answer_held();
    let ran = running.wait();
    let problems = problems(&tree, &ran, &expected_markers(&children));
    assert!(problems.is_empty(), "{problems:?}\n{}\n{ran}", tree.server.describe());
}

/// `--no-wait`, and `[run] wait = false`: the parent answers while its two
/// background children work; they are stopped resumably (their
/// transcripts say `interrupted`), the last stderr lines name each and give
/// the command that goes on, and the exit status is 3. That command then
/// finishes them, and the parent reads their results.
#[test]
fn without_waiting_the_children_are_stopped_resumably_and_the_run_exits_3() {
    for (more, args) in [
        ("", vec!["--no-wait".to_owned()]),
        ("[run]\nwait = false\n", Vec::new()),
    ] {
        let children = ["F1", "B1", "B2"];
        let tree = Tree::new(more);
        tree.server
            .hold_picked(|body| agent(body) == "B1" || agent(body) == "B2");
        let mut args = args.clone();
        args.push(task(&children));
        let ran = tree.run(&args);
        tree.server.release();
        let context = format!("{args:?}\n{}\n{ran}", tree.server.describe());
        assert_eq!(ran.status.code(), Some(3), "{context}");
        assert_eq!(ran.stdout, "Markers read: MARK-F1\n", "{context}");
        let id = tree.parent_id().unwrap();
        let lines: Vec<&str> = ran.stderr.lines().collect();
        let [.., first, second, last] = lines[..] else {
            panic!("{context}")
        };
        let mut named = [first, second];
        named.sort_unstable();
        assert_eq!(
            named,
            [
                "dsh: stopped, to resume: subagent-2 \"part B1\"",
                "dsh: stopped, to resume: subagent-3 \"part B2\""
            ],
            "{context}"
        );
        assert_eq!(
            last,
            format!(
                "dsh: the parent answered, and 2 background children were stopped before they finished; go on with: dsh run --data-dir data --resume {id}"
            ),
            "{context}"
        );
        // Stopped resumably, never said to be aborted.
        assert!(!ran.stderr.contains("aborted"), "{context}");
        let stops = tree.children_stops();
        assert_eq!(
            stops,
            [
                ("part B1".to_owned(), Some("interrupted".to_owned())),
                ("part B2".to_owned(), Some("interrupted".to_owned())),
                ("part F1".to_owned(), Some("completed".to_owned())),
            ],
            "{context}"
        );
        let resumed = tree.run(&["--resume".to_owned(), id]);
        let problems = problems(&tree, &resumed, &expected_markers(&children));
        assert!(problems.is_empty(), "{problems:?}\n{context}\n{resumed}");
    }
}

/// SIGINT while every child works: the tree stops resumably (exit 130), the
/// last stderr line gives the command that goes on, and no agent is shown
/// running. `dsh run --resume` without an id finds that run and finishes
/// it: every marker once, no completed request sent again.
#[test]
fn ctrl_c_stops_the_tree_resumably_and_resume_finishes_it() {
    let children = ["F1", "F2", "F3", "B1", "B2"];
    let tree = Tree::new("");
    tree.server.hold_picked(is_child);
    let running = tree.start(&[task(&children)]);
    assert!(
        tree.server
            .wait_for(GUARD, |log| log.iter().filter(|exchange| exchange.held).count() == 5),
        "the children never asked:\n{}",
        tree.server.describe()
    );
    // Every completed response written down (the parent's first).
    std::thread::sleep(Duration::from_millis(200));
    running.signal(Signal::SIGINT);
    let ran = running.wait();
    tree.server.release();
    let id = tree.parent_id().unwrap();
    let context = format!("{}\n{ran}", tree.server.describe());
    assert_eq!(ran.status.code(), Some(130), "{context}");
    assert!(
        ran.stderr
            .contains("dsh: stopping the run resumably (its children too); press Ctrl-C again to exit at once\n"),
        "{context}"
    );
    assert_eq!(
        ran.stderr.lines().last(),
        Some(format!("dsh: interrupted; go on with: dsh run --data-dir data --resume {id}").as_str()),
        "{context}"
    );
    let json = tree.tree_json().unwrap();
    for node in support::tree::nodes(&json["root"]) {
        let ending = &node["turns"].as_array().unwrap().last().unwrap()["ending"];
        assert_eq!(ending["state"], "interrupted", "{}: {context}", node["label"]);
    }

    let resumed = tree.run(&["--resume".to_owned()]);
    assert!(
        resumed
            .stderr
            .starts_with(&format!("dsh: resuming {id} and its delegation tree\n")),
        "{resumed}"
    );
    let problems = problems(&tree, &resumed, &expected_markers(&children));
    assert!(problems.is_empty(), "{problems:?}\n{context}\n{resumed}");
}

/// An ACP child that ignores cancellation (and the end of its input): the
/// first SIGINT's resumable stop waits for it, for seconds.
fn slow_to_stop(agent: &std::path::Path) -> String {
    format!(
        r#"
[[subagents]]
tool_name = "subagent_acp"
provider = "acp"
command = "{}"
args = ["ignore-cancel"]
pass_env = ["FAULT_AGENT_PID_FILE"]
max_depth = "provider-managed"
cancel_grace = "1500ms"
eof_grace = "1500ms"
term_grace = "1s"
"#,
        agent.display()
    )
}

/// Whether process `pid` still runs, given a moment to die: a zombie (a
/// killed process its new parent has not collected yet) does not run.
fn alive(pid: i32) -> bool {
    let runs = || {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        state != Some("Z")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while runs() {
        if std::time::Instant::now() > deadline {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A second SIGINT while the first one's resumable stop waits for a child
/// that ignores cancellation: `dsh` exits at once (130), its last line
/// saying so, and leaves no child process behind.
#[test]
fn a_second_ctrl_c_exits_at_once() {
    let agent = dsh_test_programs::Program::AcpFaultAgent.path();
    let tree = Tree::new(&slow_to_stop(&agent));
    let pid_file = tree.path().join("agent.pid");
    let running = tree.start_with_env(&[task(&["A1"])], &[("FAULT_AGENT_PID_FILE", pid_file.as_os_str())]);
    let wait = |what: &str, ready: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + GUARD;
        while !ready() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait("the ACP child's turn", &|| {
        running.stderr().contains("\"part A1\" started")
    });
    std::thread::sleep(Duration::from_millis(200));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    running.signal(Signal::SIGINT);
    wait("the first signal's stop", &|| {
        running.stderr().contains("dsh: stopping the run resumably")
    });
    running.signal(Signal::SIGINT);
    let ran = running.wait();
    let alive_after = alive(pid);
    // Whatever happened, nothing outlives the test.
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    assert_eq!(ran.status.code(), Some(130), "{ran}");
    assert_eq!(
        ran.stderr.lines().last(),
        Some("dsh: exiting at once; what was written stays, and `dsh run --resume` goes on from it"),
        "{ran}"
    );
    assert!(!alive_after, "the ACP child {pid} outlived dsh:\n{ran}");
}
