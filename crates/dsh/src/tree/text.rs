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
            lines.push(format!(
                "{rest}{guide}{}",
                words::turn(number + 1, &turn_parts(turn, now_ms))
            ));
        }
    }
    if let Some(place) = words::place(&node.place) {
        lines.push(format!("{rest}{guide}{place}"));
    }
    if let Some(task) = &node.task {
        lines.push(format!("{rest}{guide}{}", words::asked(task)));
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
    // An agent in another process reports no model calls here: unknown, not none.
    let unknown_calls = matches!(node.place, dsh_tree::Place::Elsewhere { .. }) && node.model_calls() == 0;
    if !node.turns.is_empty() && !unknown_calls {
        parts.push(words::model_calls(node.model_calls()));
    }
    match &node.tokens {
        Some(tokens) => parts.push(words::own_tokens(tokens)),
        None if node.model_calls() > 0 => parts.push(words::NO_USAGE.to_owned()),
        None => {}
    }
    if let Some(cost) = &node.cost {
        parts.push(words::cost(cost));
    }
    if let Some(subtree) = &node.subtree_tokens
        && !node.children.is_empty()
        && Some(subtree) != node.tokens.as_ref()
    {
        parts.push(words::subtree_tokens(subtree));
        if let Some(cost) = &node.subtree_cost {
            parts.push(words::subtree_cost(cost));
        }
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
    if let Some(cost) = &turn.cost {
        parts.push(words::cost(cost));
    }
    parts
}

#[cfg(test)]
mod tests {
    use dsh_tree::{Ending, Node, Place, Problem, ResultSize, Tokens, Tree, Turn};

    use super::render;

    fn turn(ending: Ending, queued: Option<u64>, started: u64, ended: u64, calls: u32, tokens: Option<Tokens>) -> Turn {
        let mut turn = Turn::new(ending);
        turn.queued_ms = queued;
        turn.started_at_ms = Some(started);
        turn.ended_at_ms = Some(ended);
        turn.model_calls = calls;
        turn.tokens = tokens;
        turn
    }

    fn child(id: &str, label: &str, tool: &str, turns: Vec<Turn>) -> Node {
        let mut node = Node::new(id, 1, Place::Live);
        node.label = Some(label.into());
        node.tool = Some(tool.into());
        node.provider = Some("spawn".into());
        node.model = Some("deepseek-chat".into());
        node.turns = turns;
        node
    }

    #[test]
    #[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
    fn a_tree_reads_as_one_line_per_agent_with_its_turns_and_problems() {
        let mut short = child(
            "c1",
            "short one",
            "subagent",
            vec![turn(
                Ending::Completed,
                None,
                1_000,
                1_900,
                1,
                Some(Tokens::reported(171, 30)),
            )],
        );
        short.result = Some(ResultSize::new(Some(2), Some(2)));
        let mut long = child(
            "c2",
            "long one",
            "subagent_fork",
            vec![turn(
                Ending::Completed,
                Some(400),
                1_400,
                3_600,
                2,
                Some(Tokens::reported(900, 12_000).with_cached(512)),
            )],
        );
        long.result = Some(ResultSize::cut(2_200_000, 32_000));
        long.task_id = Some("subagent-1".into());
        let mut continued = child(
            "c3",
            "again",
            "subagent",
            vec![
                turn(
                    Ending::Completed,
                    None,
                    1_000,
                    2_000,
                    1,
                    Some(Tokens::reported(10, 5).estimated()),
                ),
                turn(
                    Ending::Stopped {
                        reason: "error".into(),
                        detail: Some("the model call failed".into()),
                    },
                    None,
                    5_000,
                    5_500,
                    1,
                    None,
                ),
            ],
        );
        continued.problems.push(Problem::Torn {
            message: "line 7 cut".into(),
        });
        let mut remote = Node::new(
            "acp-1",
            1,
            Place::Elsewhere {
                ran: "acp:remote".into(),
            },
        );
        remote.tool = Some("subagent_remote".into());
        remote.turns = vec![turn(Ending::Completed, None, 1_000, 80_000, 0, None)];
        for node in [&mut short, &mut long, &mut continued, &mut remote] {
            node.total();
        }
        let mut root = Node::new("root", 0, Place::Live);
        root.label = Some("dsh run".into());
        root.model = Some("deepseek-chat".into());
        root.turns = vec![turn(
            Ending::Completed,
            None,
            0,
            4_100,
            2,
            Some(Tokens::reported(2956, 54)),
        )];
        root.children = vec![short, long, continued, remote];
        root.total();
        insta::assert_snapshot!(render(&Tree::new(root), 10_000), @r#"
        "dsh run" root (deepseek-chat) · completed · ran 4.1s · 2 model calls · tokens 2956 in, 54 out · subtree ~4037 in, ~12089 out, 512 cached (estimated)
        ├─ subagent "short one" c1 (spawn, deepseek-chat) · completed · ran 0.9s · 1 model call · tokens 171 in, 30 out · result 2 B
        ├─ subagent_fork "long one" c2 (spawn, deepseek-chat) · completed · queued 0.4s · ran 2.2s · 2 model calls · tokens 900 in, 12000 out, 512 cached · result 2.2 MB, 32 KB shown (cut) · task subagent-1
        ├─ subagent "again" c3 (spawn, deepseek-chat) · error: the model call failed · ran 1.5s · 2 model calls · tokens ~10 in, ~5 out (estimated)
        │     turn 1: completed · ran 1.0s · 1 model call · tokens ~10 in, ~5 out (estimated)
        │     turn 2: error: the model call failed · ran 0.5s · 1 model call
        │     ! torn transcript: line 7 cut
        └─ subagent_remote acp-1 · completed · ran 1m 19s
              ran in acp:remote, whose records are not read here
        "#);
    }
}
