//! A tree built from live events, as a run goes: the service's run events
//! ([`SubagentEvent`]) for every child of every provider, and the agent
//! loop's model calls for in-process agents.
//!
//! A harness feeds a [`LiveTree`] from its event subscription and its agent
//! observer, and takes a [`snapshot`](LiveTree::snapshot) whenever it
//! redraws.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use dsh_subagent::{CutInfo, QueuedInfo, RunEndInfo, RunInfo, SubagentEvent, WaitInfo};
use dsh_subagent_api::StopReason;
use dsh_transcript::now_ms;

use dsh_llm::Cost;

use crate::node::{Ending, Node, Place, ResultSize, Tokens, Tree, Turn};

/// The tree of one top-level agent as its events arrive. Cheap to feed:
/// each event is a few map operations under one lock.
#[derive(Debug)]
pub struct LiveTree {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    root: String,
    /// Every agent seen, by id (a queued call by a placeholder id until it
    /// starts).
    nodes: HashMap<String, LiveNode>,
    /// The agent a queued or running call is, by announced run id.
    runs: HashMap<u64, String>,
}

#[derive(Debug)]
struct LiveNode {
    node: Node,
    parent: Option<String>,
    /// The children's ids, in the order they appeared.
    children: Vec<String>,
}

impl LiveTree {
    /// A tree whose root is the top-level agent `root`, with its label and
    /// model; its first turn begins now.
    pub fn new(root: impl Into<String>, label: Option<String>, model: Option<String>) -> Self {
        let root = root.into();
        let mut node = Node::new(root.clone(), 0, Place::Live);
        node.label = label;
        node.model = model;
        node.created_at_ms = Some(now_ms());
        node.turns.push(Turn {
            started_at_ms: Some(now_ms()),
            ..Turn::default()
        });
        let mut nodes = HashMap::new();
        nodes.insert(
            root.clone(),
            LiveNode {
                node,
                parent: None,
                children: Vec::new(),
            },
        );
        Self {
            state: Mutex::new(State {
                root,
                nodes,
                runs: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in one of the service's run events; other events change nothing.
    pub fn event(&self, event: &SubagentEvent) {
        let mut state = self.lock();
        match event {
            SubagentEvent::RunQueued(queued) => state.queued(queued),
            SubagentEvent::RunAdmitted(wait) => state.left_queue(wait, false),
            SubagentEvent::RunWithdrawn(wait) => state.left_queue(wait, true),
            SubagentEvent::RunStarted(run) => state.started(run),
            SubagentEvent::RunEnded(end) => state.ended(end),
            SubagentEvent::ResultCut(cut) => state.cut(cut),
            _ => {}
        }
    }

    /// An in-process agent finished a model call: `steps` calls so far in
    /// its current run, which spent `tokens` in all (when reported) and
    /// cost `cost` (where its model's price is known).
    pub fn model_call(&self, agent: &str, steps: u32, tokens: Option<Tokens>, cost: Option<Cost>) {
        let mut state = self.lock();
        let Some(turn) = state.nodes.get_mut(agent).and_then(|live| live.node.turns.last_mut()) else {
            return;
        };
        turn.model_calls = steps;
        turn.tokens = tokens;
        turn.cost = cost;
        turn.calls_at_ms.push(now_ms());
    }

    /// An agent in another process (the ACP child of run `run`, as the
    /// run events name it) announced subagent session `session`: a node
    /// under the session that announced it (`parent`; `None`: the child
    /// itself), with its title and task, running.
    pub fn announced(
        &self,
        run: &str,
        session: &str,
        parent: Option<&str>,
        label: Option<String>,
        task: Option<String>,
    ) {
        let mut state = self.lock();
        let key = announced_key(run, session);
        if let Some(live) = state.nodes.get_mut(&key) {
            // A session that ended runs again.
            live.node.turns.push(Turn::default());
            return;
        }
        let parent = parent.map_or_else(|| run.to_owned(), |parent| announced_key(run, parent));
        let depth = state
            .nodes
            .get(&parent)
            .map_or(1, |live| live.node.depth.saturating_add(1));
        let node = crate::announced::node(run, session, depth, label, task);
        state.adopt(&parent, key, node);
    }

    /// A subagent session of the ACP child of run `run` ended, with this
    /// stop (`completed`, `cancelled`, `error: …`, `disconnected`, …).
    pub fn announced_ended(&self, run: &str, session: &str, stop: &str) {
        let mut state = self.lock();
        let key = announced_key(run, session);
        if let Some(turn) = state.nodes.get_mut(&key).and_then(|live| live.node.turns.last_mut()) {
            turn.ending = crate::announced::ending(Some(stop));
        }
    }

    /// The top-level agent's run ended, with this stop (`completed`,
    /// `error: …`, …; see [`Ending::from_stop`]).
    pub fn root_ended(&self, stop: &str) {
        let mut state = self.lock();
        let root = state.root.clone();
        if let Some(turn) = state.nodes.get_mut(&root).and_then(|live| live.node.turns.last_mut()) {
            turn.ending = Ending::from_stop(stop);
            turn.ended_at_ms = Some(now_ms());
        }
    }

    /// The tree as it stands now.
    pub fn snapshot(&self) -> Tree {
        let state = self.lock();
        Tree::new(state.build(&state.root, 0))
    }
}

impl State {
    fn node_mut(&mut self, run_id: u64) -> Option<&mut LiveNode> {
        let id = self.runs.get(&run_id)?;
        self.nodes.get_mut(id)
    }

    /// Adds `child` under `parent` (under the root when the parent is not
    /// known: an agent this tree never saw start).
    fn adopt(&mut self, parent: &str, child: String, node: Node) {
        let parent = if self.nodes.contains_key(parent) {
            parent.to_owned()
        } else {
            self.root.clone()
        };
        if let Some(live) = self.nodes.get_mut(&parent) {
            live.children.push(child.clone());
        }
        self.nodes.insert(
            child,
            LiveNode {
                node,
                parent: Some(parent),
                children: Vec::new(),
            },
        );
    }

    fn queued(&mut self, queued: &QueuedInfo) {
        let placeholder = format!("queued-{}", queued.run_id);
        let mut node = Node::new(placeholder.clone(), queued.depth, Place::Live);
        node.label.clone_from(&queued.label);
        node.provider = Some(queued.provider.clone());
        node.turns.push(Turn {
            ending: Ending::Queued,
            started_at_ms: Some(now_ms()),
            ..Turn::default()
        });
        self.runs.insert(queued.run_id, placeholder.clone());
        self.adopt(queued.parent.as_str(), placeholder, node);
    }

    /// A wait ended: the time it waited is its turn's queue time, and its
    /// start is the time it began running (withdrawn: it never does).
    fn left_queue(&mut self, wait: &WaitInfo, withdrawn: bool) {
        let waited = u64::try_from(wait.waited.as_millis()).unwrap_or(u64::MAX);
        let Some(live) = self.node_mut(wait.run_id) else {
            return;
        };
        if let Some(turn) = live.node.turns.last_mut() {
            turn.queued_ms = Some(waited);
            turn.started_at_ms = Some(now_ms());
            if withdrawn {
                turn.ending = Ending::Withdrawn;
                turn.ended_at_ms = turn.started_at_ms;
            }
        }
        if withdrawn {
            self.runs.remove(&wait.run_id);
        }
    }

    fn started(&mut self, run: &RunInfo) {
        let placeholder = self.runs.insert(run.run_id, run.id.clone());
        let waited = placeholder.and_then(|placeholder| self.take_placeholder(&placeholder));
        let turn = Turn {
            started_at_ms: Some(now_ms()),
            queued_ms: waited.as_ref().and_then(|turn| turn.queued_ms),
            ..Turn::default()
        };
        if let Some(live) = self.nodes.get_mut(&run.id) {
            // A continued child: one more turn.
            live.node.turns.push(turn);
            return;
        }
        let mut node = Node::new(run.id.clone(), run.depth, Place::Live);
        node.label.clone_from(&run.label);
        node.provider = Some(run.provider.clone());
        node.created_at_ms = Some(now_ms());
        node.turns.push(turn);
        self.adopt(run.parent.as_str(), run.id.clone(), node);
    }

    /// Removes a queued call's placeholder node, returning its turn.
    fn take_placeholder(&mut self, placeholder: &str) -> Option<Turn> {
        let live = self.nodes.remove(placeholder)?;
        if let Some(parent) = live.parent.as_ref().and_then(|parent| self.nodes.get_mut(parent)) {
            parent.children.retain(|child| child != placeholder);
        }
        live.node.turns.into_iter().last()
    }

    fn ended(&mut self, end: &RunEndInfo) {
        let Some(live) = self.node_mut(end.run.run_id) else {
            return;
        };
        if let Some(turn) = live.node.turns.last_mut() {
            turn.ending = ending(&end.stop_reason, end.diagnostic.as_deref());
            turn.ended_at_ms = Some(now_ms());
            if let Some(answer) = &end.last_assistant_message {
                turn.answer_bytes = Some(answer.len() as u64);
            }
        }
        self.runs.remove(&end.run.run_id);
    }

    /// A result was cut: it belongs to the parent's latest ended child of
    /// that label (the cut follows the end it belongs to).
    fn cut(&mut self, cut: &CutInfo) {
        let Some(parent) = self.nodes.get(cut.parent.as_str()) else {
            return;
        };
        let child = parent.children.iter().rev().find(|child| {
            self.nodes
                .get(*child)
                .is_some_and(|live| live.node.label == cut.label && live.node.result.is_none())
        });
        let Some(child) = child.cloned() else {
            return;
        };
        if let Some(live) = self.nodes.get_mut(&child) {
            live.node.result = Some(ResultSize::cut(cut.full.bytes, cut.shown.bytes));
            live.node.task_id.clone_from(&cut.task_id);
        }
    }

    /// The node `id` with its subtree, totals set.
    fn build(&self, id: &str, level: usize) -> Node {
        let Some(live) = self.nodes.get(id) else {
            return Node::new(id, 0, Place::Live);
        };
        let mut node = live.node.clone();
        if level < crate::MAX_SHOWN_DEPTH {
            node.children = live.children.iter().map(|child| self.build(child, level + 1)).collect();
        }
        node.total();
        node
    }
}

/// The key of a subagent session run `run`'s child announced: its ids are
/// the child's choice, kept apart from ours.
fn announced_key(run: &str, session: &str) -> String {
    format!("{run}/{session}")
}

/// A run's end, from the service's stop reason and diagnostic.
fn ending(reason: &StopReason, diagnostic: Option<&str>) -> Ending {
    match reason {
        StopReason::Completed => Ending::Completed,
        other => Ending::Stopped {
            reason: other.as_str().to_owned(),
            detail: diagnostic.map(str::to_owned),
        },
    }
}
