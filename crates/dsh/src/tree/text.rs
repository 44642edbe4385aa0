//! The tree as text: one line per agent under box-drawing guides, then a
//! line per turn for an agent that ran more than once, and a line per
//! problem with its record. The live view of `dsh run` draws the same lines.

use dsh_tree::{Node, Tree, Turn};

use crate::wording::tree as words;

/// The whole tree; `now_ms` is the time a running turn counts up to.
pub(crate) fn render(tree: &Tree, now_ms: u64) -> String {
    let mut out = String::new();
    for line in lines(tree, now_ms) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The tree's lines, without line ends.
pub(crate) fn lines(tree: &Tree, now_ms: u64) -> Vec<String> {
    let mut lines = Vec::new();
    node_lines(&tree.root, "", "", now_ms, &mut lines);
    lines
}

/// `node`'s lines and its children's: `first` before its own line, `rest`
/// before every line below it.
fn node_lines(node: &Node, first: &str, rest: &str, now_ms: u64, lines: &mut Vec<String>) {
    let mut parts = vec![words::who(node)];
    parts.extend(summary(node, now_ms));
    lines.push(format!("{first}{}", parts.join(" · ")));
    let guide = if node.children.is_empty() { "   " } else { "│  " };
    if node.turns.len() > 1 {
        for (number, turn) in node.turns.iter().enumerate() {
            lines.push(format!("{rest}{guide}{}", words::turn(number + 1, &turn_parts(turn, now_ms))));
        }
    }
    if let Some(place) = words::place(&node.place) {
        lines.push(format!("{rest}{guide}{place}"));
    }
    for problem in &node.problems {
        lines.push(format!("{rest}{guide}{}", words::problem(problem)));
    }
    let count = node.children.len();
    for (index, child) in node.children.iter().enumerate() {
        let last = index + 1 == count;
        let (branch, next) = if last { ("└─ ", "   ") } else { ("├─ ", "│  ") };
        node_lines(
            child,
            &format!("{rest}{branch}"),
            &format!("{rest}{next}"),
            now_ms,
            lines,
        );
    }
}

/// What a node's line says after who it is: its last ending, its times and
/// model calls over every turn, its tokens own and subtree, its result and
/// task.
fn summary(node: &Node, now_ms: u64) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(ending) = node.ending() {
        parts.push(words::ending(ending));
    }
    if let Some(queued) = node.queued_ms().filter(|queued| *queued > 0) {
        parts.push(words::queued(queued));
    }
    if let Some(ran) = node.running_ms(now_ms) {
        parts.push(words::ran(ran));
    }
    if !node.turns.is_empty() {
        parts.push(words::model_calls(node.model_calls()));
    }
    match &node.tokens {
        Some(tokens) => parts.push(words::own_tokens(tokens)),
        None if node.model_calls() > 0 => parts.push(words::NO_USAGE.to_owned()),
        None => {}
    }
    if let Some(subtree) = &node.subtree_tokens
        && !node.children.is_empty()
        && Some(subtree) != node.tokens.as_ref()
    {
        parts.push(words::subtree_tokens(subtree));
    }
    if let Some(result) = &node.result
        && let Some(text) = words::result(result.full_bytes, result.shown_bytes, result.cut)
    {
        parts.push(text);
    }
    if let Some(task) = &node.task_id {
        parts.push(words::task(task));
    }
    parts
}

/// One turn's parts: its ending, wait, time running, model calls and tokens.
fn turn_parts(turn: &Turn, now_ms: u64) -> Vec<String> {
    let mut parts = vec![words::ending(&turn.ending)];
    if let Some(queued) = turn.queued_ms.filter(|queued| *queued > 0) {
        parts.push(words::queued(queued));
    }
    if let Some(ran) = turn.running_ms(now_ms) {
        parts.push(words::ran(ran));
    }
    parts.push(words::model_calls(turn.model_calls));
    if let Some(tokens) = &turn.tokens {
        parts.push(words::own_tokens(tokens));
    }
    parts
}
