//! What `dsh tree` and the parent's model are told of children a resume
//! found again: a resumed child's result is the answer its resume ended
//! with; an ACP child, whose session cannot be taken up again, is
//! `disconnected`, and the parent's model reads one result saying so.
//! Through the real binary and the scripted tree of [`support::tree`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;
use support::tree::{GUARD, Tree, agent, nodes, task};

/// The node labelled `label` in the parent's `dsh tree --json`.
fn node(tree: &Tree, label: &str) -> Value {
    let json = tree.tree_json().unwrap();
    nodes(&json["root"])
        .into_iter()
        .find(|node| node["label"] == label)
        .cloned()
        .unwrap_or_else(|| panic!("no node {label:?} in {json:#}"))
}

/// `F1` stopped mid-turn by SIGINT (its turn ends `interrupted`, with no
/// answer), then resumed to its answer: `dsh tree` gives its result the
/// size of the answer its resume ended with, not the 0 B of the stop.
#[test]
fn a_resumed_childs_result_is_the_answer_its_resume_ended_with() {
    let tree = Tree::new("");
    tree.server.hold_first(|body| agent(body) == "F1");
    let running = tree.start(&[task(&["F1"])]);
    assert!(tree.server.wait_reached(GUARD), "F1 never began:\n{}", running.stderr());
    running.signal(Signal::SIGINT);
    let stopped = running.wait();
    tree.server.release();
    assert_eq!(stopped.status.code(), Some(130), "{stopped}");
    assert_eq!(
        tree.children_stops(),
        [("part F1".to_owned(), Some("interrupted".to_owned()))],
        "{stopped}"
    );
    let ran = tree.run(&["--resume".to_owned(), tree.parent_id().unwrap()]);
    assert!(ran.status.success(), "{ran}");
    assert_eq!(ran.stdout, "Markers read: MARK-F1\n", "{ran}");
    let f1 = node(&tree, "part F1");
    let answer = "Part F1 written.\nMARK-F1".len() as u64;
    assert_eq!(f1["result"]["full_bytes"], answer, "{f1:#}");
    assert_eq!(f1["result"]["shown_bytes"], answer, "{f1:#}");
    assert_eq!(f1["result"]["cut"], false, "{f1:#}");
}

/// A parent whose ACP child (an agent that streams `started`, then works
/// until cancelled) is killed with it (SIGKILL): the resume cannot take
/// the child's session up again. The parent's model reads one result
/// saying the child is disconnected, with its task id and why, and goes
/// on; `dsh tree` shows the child `disconnected`.
#[test]
fn an_acp_child_that_cannot_be_resumed_is_disconnected_for_the_model_and_the_tree() {
    let agent_program = dsh_test_programs::Program::AcpFaultAgent.path();
    let tree = Tree::new(&format!(
        r#"
[[subagents]]
tool_name = "subagent_acp"
provider = "acp"
command = {agent_program:?}
args = ["cancel-ok"]
max_depth = "provider-managed"
"#
    ));
    let started = Instant::now();
    let running = tree.start(&[task(&["A1"])]);
    while !running.stderr().contains("↳ subagent \"part A1\" started") {
        assert!(started.elapsed() < GUARD, "A1 never started:\n{}", running.stderr());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its start is recorded before the call runs on; give the child a
    // moment to stream.
    std::thread::sleep(Duration::from_millis(200));
    let killed = running.kill();
    let ran = tree.run(&["--resume".to_owned(), tree.parent_id().unwrap()]);
    assert!(ran.status.success(), "{killed}{ran}");
    assert_eq!(ran.stdout, "Markers read: \n", "{ran}");
    let log = tree.server.log();
    let messages = log.last().unwrap().body["messages"].as_array().unwrap().clone();
    let results: Vec<&str> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    let [result] = results[..] else {
        panic!("the parent's model read {results:?}:\n{ran}")
    };
    let a1 = node(&tree, "part A1");
    let id = a1["id"].as_str().unwrap();
    insta::assert_snapshot!("acp_disconnected", result.replace(id, "[A1]"));
    let endings: Vec<&Value> = a1["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| &turn["ending"])
        .collect();
    assert_eq!(endings.len(), 1, "{a1:#}");
    assert_eq!(endings[0]["state"], "stopped", "{a1:#}");
    assert_eq!(endings[0]["reason"], "disconnected", "{a1:#}");
    let shown = std::process::Command::new(support::tree::DSH)
        .args(["tree", "--data-dir", "data", &tree.parent_id().unwrap()])
        .current_dir(tree.path())
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    let line = shown
        .lines()
        .find(|line| line.contains("part A1"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("disconnected"), "{shown}");
}
