//! The subagent sessions an agent in another process announced (an ACP
//! agent with subagents of its own, the Subagents RFD), as nodes under it:
//! each with its title, task and state, at every depth.

use dsh_subagent_api::RemoteSubagent;

use crate::node::{Ending, Node, Place, Turn};
use crate::wording;

/// A node for session `session` that agent `by` announced, at `depth`.
pub(crate) fn node(by: &str, session: &str, depth: u64, label: Option<String>, task: Option<String>) -> Node {
    let mut node = Node::new(
        session,
        depth,
        Place::Elsewhere {
            ran: wording::announced_by(by),
        },
    );
    node.label = label;
    node.task = task;
    node.turns.push(Turn::default());
    node
}

/// How a session ended, from its recorded stop (`completed`, `cancelled`,
/// `error: …`, `disconnected`, …); running while it has none.
pub(crate) fn ending(stop: Option<&str>) -> Ending {
    stop.map_or(Ending::Running, Ending::from_stop)
}

/// The sessions `by` (a node at `depth`) recorded, nested by the session
/// that announced each (`None`: `by` itself), in the order announced.
pub(crate) fn children(by: &str, depth: u64, recorded: &[RemoteSubagent]) -> Vec<Node> {
    under(by, None, depth, recorded, 0)
}

fn under(by: &str, parent: Option<&str>, depth: u64, recorded: &[RemoteSubagent], level: usize) -> Vec<Node> {
    if level >= crate::node::MAX_SHOWN_DEPTH {
        return Vec::new();
    }
    recorded
        .iter()
        .filter(|session| session.parent.as_deref() == parent && Some(session.session.as_str()) != parent)
        .map(|session| {
            let depth = depth.saturating_add(1);
            let mut node = node(by, &session.session, depth, session.label.clone(), session.task.clone());
            if let Some(turn) = node.turns.last_mut() {
                turn.ending = ending(session.stop.as_deref());
            }
            node.children = under(by, Some(&session.session), depth, recorded, level + 1);
            node.total();
            node
        })
        .collect()
}
