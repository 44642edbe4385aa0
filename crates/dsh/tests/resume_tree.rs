//! What `dsh tree` and the parent's model are told of children a resume
//! found again: a resumed child's result is the answer its resume ended
//! with; an ACP child, whose session cannot be taken up again, is
//! `disconnected`, and the parent's model reads one result saying so.
//! Through the real binary and the scripted tree of [`support::tree`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

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
