//! What a running prompt streams: its session agent's text and tool calls
//! (the agent loop's reports), and the children it delegates to (their start
//! and end from the service's run events, an in-process child's model and
//! tool calls from the agent loop, an ACP child's tool calls and plan from
//! the ACP provider), as [`Event`]s on the prompt's channel, in the order
//! they happened. Each child has one line under its delegation call, which
//! each report replaces: what a call shows stays as small as its children.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use dsh_agent::{AgentObserver, Priced};
use dsh_llm::{ToolCall, Usage};
use dsh_subagent::{QueuedInfo, RunEndInfo, RunInfo, WaitInfo};
use dsh_tools::{AgentId, ToolResult};
use tokio::sync::mpsc::UnboundedSender;

pub(crate) use super::event::Event;
use super::subagents::{Known, Route, Subagents};
use crate::observe::{self, ChildActivity, ModelCalls, TreeObserver};
use crate::wording;
use dsh_subagent_acp::ChildUpdate;

/// The events that were ready together, with adjacent text deltas merged
/// into one: the client reads the same text either way.
///
/// A model that streams token by token sends one delta at a time, and each
/// is shown as it comes; a burst (a fast model, or several deltas in one
/// network read) costs the client one `session/update`, not one per delta.
/// Every other event is kept as it is, in order.
pub(crate) fn coalesce(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
    let mut merged: Vec<Event> = Vec::new();
    for event in events {
        match (merged.last_mut(), event) {
            (Some(Event::Text(text)), Event::Text(delta)) => text.push_str(&delta),
            (
                Some(Event::InSession { session, event: last }),
                Event::InSession {
                    session: next,
                    event: delta,
                },
            ) if *session == next && matches!((&**last, &*delta), (Event::Text(_), Event::Text(_))) => {
                if let (Event::Text(text), Event::Text(delta)) = (&mut **last, *delta) {
                    text.push_str(&delta);
                }
            }
            (_, event) => merged.push(event),
        }
    }
    merged
}

/// A session agent whose prompt is running.
struct Open {
    events: UnboundedSender<Event>,
    /// Its delegation calls in flight: the call's id and the task description.
    delegations: Vec<Delegation>,
}

struct Delegation {
    call: String,
    description: Option<String>,
    /// The children reporting under this call (and those waiting for a
    /// slot), with their current line.
    children: Vec<(Entry, String)>,
}

/// A line under a delegation call: a child, or a start waiting for a slot
/// (whose child has no id yet).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Child(AgentId),
    Queued(u64),
}

/// Where a start waiting for a slot reports, and how it is kin to the call.
#[derive(Clone)]
struct Waiting {
    reporting: Reporting,
    kin: Kin,
}

/// How a start is kin to the delegation call it reports under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kin {
    /// The call's own child: its wait for a slot makes the call pending.
    Child,
    /// A deeper descendant, reporting under its ancestor's call: its wait
    /// leaves the call as it is (the call's own child is running).
    Descendant,
}

/// Where a child reports: its session agent, the delegation call, and the
/// label its line starts with.
#[derive(Clone)]
struct Reporting {
    root: AgentId,
    call: String,
    label: String,
}

#[derive(Default)]
struct State {
    open: HashMap<AgentId, Open>,
    /// Each child reporting under a delegation call.
    children: HashMap<AgentId, Reporting>,
    /// Each start waiting for a slot (or admitted and not yet started),
    /// by announced run.
    queued: HashMap<u64, Waiting>,
    /// The children announced as subagent sessions.
    subagents: Subagents,
}

/// Routes observer events to the running prompts ([`TreeObserver`]).
///
/// A child is shown under the delegation call that started it: among its
/// parent's delegation calls in flight, the first whose `description` is the
/// child's label and that has no child yet, else the first without a child;
/// a grandchild is shown under its parent's call. A call that ends stops
/// reporting its children (a background child outlives its call).
pub(crate) struct Streams {
    delegation_tools: Vec<String>,
    calls: ModelCalls,
    activity: ChildActivity,
    state: Mutex<State>,
}

impl Streams {
    /// Streams for a parent whose delegation tools have these names.
    pub(crate) fn new(delegation_tools: Vec<String>) -> Self {
        Self {
            delegation_tools,
            calls: ModelCalls::default(),
            activity: ChildActivity::default(),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts streaming `agent`'s events to `events`, until [`close`](Self::close);
    /// its children are announced as subagent sessions when `subagents`.
    pub(crate) fn open(&self, agent: &AgentId, events: UnboundedSender<Event>, subagents: bool) {
        let mut state = self.lock();
        state.open.insert(
            agent.clone(),
            Open {
                events,
                delegations: Vec::new(),
            },
        );
        state.subagents.open(agent, subagents);
    }

    /// Stops streaming `agent`'s events; its children no longer report.
    /// Returns the terminal states of its announced children still running
    /// (`cancelled` when its turn was), to send before its answer.
    pub(crate) fn close(&self, agent: &AgentId, cancelled: bool) -> Vec<Event> {
        let mut state = self.lock();
        state.open.remove(agent);
        state.children.retain(|_, reporting| &reporting.root != agent);
        state.queued.retain(|_, waiting| &waiting.reporting.root != agent);
        state.subagents.close(agent, cancelled)
    }

    /// Where a session id that is no open session's stands: an announced
    /// child running, one that ended, or neither.
    pub(crate) fn known(&self, id: &str) -> Known {
        self.lock().subagents.known(&AgentId::new(id))
    }

    /// Sends `event` of `agent` (no session agent) to its own session, when
    /// it is an announced child ([`Subagents::route`]).
    fn route(state: &mut State, agent: &AgentId, event: impl FnOnce() -> Event) {
        if let Route::Send(root, event) = state.subagents.route(agent, event) {
            Self::send(state, &root, event);
        }
    }

    /// Sends each event to its session's prompt.
    fn send_all(state: &State, events: Vec<(AgentId, Event)>) {
        for (root, event) in events {
            Self::send(state, &root, event);
        }
    }

    /// Whether `agent`'s events are streamed now.
    #[cfg(test)]
    pub(crate) fn is_open(&self, agent: &AgentId) -> bool {
        self.lock().open.contains_key(agent)
    }

    fn send(state: &State, agent: &AgentId, event: Event) {
        if let Some(open) = state.open.get(agent) {
            // A closed receiver means the prompt has ended: nothing to show.
            let _ = open.events.send(event);
        }
    }

    /// Sets a reporting child's line (made from its label) and sends its
    /// call's lines, unless the line is unchanged: a child that reports the
    /// same thing again (an ACP child streaming its answer) sends nothing.
    fn child_line(&self, child: &AgentId, line: impl FnOnce(&str) -> String) {
        let mut state = self.lock();
        let Some(reporting) = state.children.get(child).cloned() else {
            return;
        };
        Self::set_line(&mut state, &reporting, Entry::Child(child.clone()), line);
    }

    /// Sets the line of `entry` under its call ([`Streams::child_line`]).
    fn set_line(state: &mut State, reporting: &Reporting, entry: Entry, line: impl FnOnce(&str) -> String) {
        let Reporting { root, call, label } = reporting;
        let line = line(label);
        let Some(open) = state.open.get_mut(root) else { return };
        let Some(delegation) = open.delegations.iter_mut().find(|delegation| &delegation.call == call) else {
            return;
        };
        match delegation.children.iter_mut().find(|(id, _)| *id == entry) {
            Some((_, current)) if *current == line => return,
            Some((_, current)) => *current = line,
            None => delegation.children.push((entry, line)),
        }
        let lines = delegation.children.iter().map(|(_, line)| line.clone()).collect();
        Self::send(
            state,
            root,
            Event::ChildProgress {
                call: call.clone(),
                lines,
            },
        );
    }

    /// The delegation call a child of `parent` labelled `label` reports
    /// under, and how it is kin to that call: a grandchild reports
    /// under its parent's call; a session agent's child under the first of
    /// its calls in flight whose `description` is the label and that has
    /// no child yet, else the first without a child.
    fn target(state: &State, parent: &AgentId, label: Option<&str>) -> Option<(AgentId, String, Kin)> {
        if let Some(Reporting { root, call, .. }) = state.children.get(parent) {
            return Some((root.clone(), call.clone(), Kin::Descendant));
        }
        let open = state.open.get(parent)?;
        let free = |delegation: &&Delegation| delegation.children.is_empty();
        open.delegations
            .iter()
            .filter(free)
            .find(|delegation| label.is_some() && delegation.description.as_deref() == label)
            .or_else(|| open.delegations.iter().find(free))
            .map(|delegation| (parent.clone(), delegation.call.clone(), Kin::Child))
    }
}

impl TreeObserver for Streams {
    /// A start waits for a slot: a line under the call it reports under,
    /// and the call's own child makes the call pending.
    fn run_queued(&self, queued: &QueuedInfo) {
        let mut state = self.lock();
        let Some((root, call, kin)) = Self::target(&state, &queued.parent, queued.label.as_deref()) else {
            return;
        };
        let label = queued.label.clone().unwrap_or_else(|| queued.provider.clone());
        let reporting = Reporting { root, call, label };
        if kin == Kin::Child {
            let event = Event::CallWaits {
                call: reporting.call.clone(),
            };
            Self::send(&state, &reporting.root, event);
        }
        Self::set_line(&mut state, &reporting, Entry::Queued(queued.run_id), |label| {
            wording::acp_child_queued(label, queued.ahead)
        });
        state.queued.insert(queued.run_id, Waiting { reporting, kin });
    }

    /// A wait ended with a slot: the call is in progress again, and the
    /// child's start follows.
    fn run_admitted(&self, wait: &WaitInfo) {
        let state = self.lock();
        let Some(Waiting {
            reporting,
            kin: Kin::Child,
        }) = state.queued.get(&wait.run_id).cloned()
        else {
            return;
        };
        let event = Event::CallAdmitted { call: reporting.call };
        Self::send(&state, &reporting.root, event);
    }

    /// A wait was withdrawn (its call cancelled): nothing starts.
    fn run_withdrawn(&self, wait: &WaitInfo) {
        let mut state = self.lock();
        let Some(Waiting { reporting, .. }) = state.queued.remove(&wait.run_id) else {
            return;
        };
        Self::set_line(&mut state, &reporting, Entry::Queued(wait.run_id), |label| {
            wording::acp_child_withdrawn(label)
        });
    }

    /// A child started: it reports under its parent's delegation call (a
    /// child that waited for a slot, in the place of its wait).
    fn run_started(&self, run: &RunInfo) {
        let child = AgentId::new(run.id.as_str());
        {
            let mut state = self.lock();
            if let Some(Waiting { reporting, .. }) = state.queued.remove(&run.run_id) {
                // Its line takes the place of its wait's.
                if let Some(entry) = state
                    .open
                    .get_mut(&reporting.root)
                    .and_then(|open| open.delegations.iter_mut().find(|d| d.call == reporting.call))
                    .and_then(|delegation| {
                        delegation
                            .children
                            .iter_mut()
                            .find(|(entry, _)| *entry == Entry::Queued(run.run_id))
                    })
                {
                    entry.0 = Entry::Child(child.clone());
                }
                state.children.insert(child.clone(), reporting);
            } else if let Some((root, call, _)) = Self::target(&state, &run.parent, run.label.as_deref()) {
                let label = run.label.clone().unwrap_or_else(|| run.id.clone());
                state.children.insert(child.clone(), Reporting { root, call, label });
            }
            // A background child may start after its call returned: no call
            // shows its lines, yet it is announced as a subagent session.
            let announced = state.subagents.started(run);
            Self::send_all(&state, announced);
        }
        self.child_line(&child, |label| wording::acp_child_started(label, &run.provider));
        // An ACP child may have reported before its start was announced.
        if let Some(now) = self.activity.get(&run.id).and_then(|activity| activity.now) {
            self.child_line(&child, |label| wording::acp_child_activity(label, &now));
        }
    }

    /// A child ended: its last line, and it reports no more.
    fn run_ended(&self, end: &RunEndInfo) {
        let child = AgentId::new(end.run.id.as_str());
        let summary = observe::child_summary(end, self.calls.take(&end.run.id), self.activity.take(&end.run.id));
        self.child_line(&child, |label| wording::acp_child_finished(label, &summary));
        let mut state = self.lock();
        state.children.remove(&child);
        let ended = state.subagents.ended(end);
        Self::send_all(&state, ended);
    }

    fn acp_child_update(&self, run: &str, update: &ChildUpdate) {
        if let Some(now) = self.activity.record(run, update).now {
            self.child_line(&AgentId::new(run), |label| wording::acp_child_activity(label, &now));
        }
        if let Some(event) = remote_event(update) {
            Self::route(&mut self.lock(), &AgentId::new(run), || event);
        }
    }
}

impl AgentObserver for Streams {
    fn step_finished(&self, agent: &AgentId, steps: u32, usage: Option<Usage>, cost: Priced) {
        // A session's own agent is no service run, so nothing would ever take
        // its record: only children's model calls are kept for their end line.
        if !self.lock().open.contains_key(agent) {
            self.calls.record(agent, steps, usage, cost);
        }
        self.child_line(agent, |label| wording::acp_child_step(label, steps, usage, cost));
    }

    fn text_delta(&self, agent: &AgentId, delta: &str) {
        let mut state = self.lock();
        if state.open.contains_key(agent) {
            Self::send(&state, agent, Event::Text(delta.to_owned()));
        } else {
            Self::route(&mut state, agent, || Event::Text(delta.to_owned()));
        }
    }

    fn tool_call_started(&self, agent: &AgentId, call: &ToolCall) {
        let delegation = self.delegation_tools.contains(&call.name);
        {
            let mut state = self.lock();
            if let Some(open) = state.open.get_mut(agent) {
                if delegation || call.name == dsh_subagent::wording::SEND_MESSAGE_TOOL {
                    let description = serde_json::from_str::<serde_json::Value>(&call.arguments)
                        .ok()
                        .and_then(|args| args.get("description")?.as_str().map(str::to_owned));
                    open.delegations.push(Delegation {
                        call: call.id.clone(),
                        description,
                        children: Vec::new(),
                    });
                }
                Self::send(
                    &state,
                    agent,
                    Event::ToolStarted {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        delegation,
                    },
                );
                return;
            }
            let started = || Event::ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                delegation,
            };
            Self::route(&mut state, agent, started);
        }
        self.child_line(agent, |label| wording::acp_child_tool(label, &call.name));
    }

    fn tool_call_finished(&self, agent: &AgentId, call: &ToolCall, result: &ToolResult) {
        let mut state = self.lock();
        let finished = || Event::ToolFinished {
            id: call.id.clone(),
            text: result.text.clone(),
            failed: result.is_error,
            cut: result.cut.clone(),
        };
        let Some(open) = state.open.get_mut(agent) else {
            Self::route(&mut state, agent, finished);
            return;
        };
        open.delegations.retain(|delegation| delegation.call != call.id);
        state
            .children
            .retain(|_, reporting| !(&reporting.root == agent && reporting.call == call.id));
        state
            .queued
            .retain(|_, waiting| !(&waiting.reporting.root == agent && waiting.reporting.call == call.id));
        Self::send(&state, agent, finished());
    }
}

/// The event an ACP child's report makes on its own session, when it is
/// of a kind a session shows.
fn remote_event(update: &ChildUpdate) -> Option<Event> {
    Some(match update {
        ChildUpdate::Text(text) => Event::Text(text.clone()),
        ChildUpdate::Thought(text) => Event::Thought(text.clone()),
        ChildUpdate::ToolCall { id, title, status } => Event::RemoteToolCall {
            id: id.clone(),
            title: title.clone(),
            status: *status,
        },
        ChildUpdate::ToolCallUpdate { id, title, status } => Event::RemoteToolUpdate {
            id: id.clone(),
            title: title.clone(),
            status: *status,
        },
        ChildUpdate::Plan(steps) => Event::Plan(steps.clone()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use dsh_subagent::SubagentEvent;

    use dsh_subagent::SubagentService;
    use dsh_subagent_api::{AgentRef, CancellationToken, ChildCount, StartRequest, SubagentRun};
    use dsh_subagent_testing::scripted::ScriptedProvider;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    use super::*;

    fn call(id: &str, name: &str, description: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: serde_json::json!({"description": description, "prompt": "p"}).to_string(),
        }
    }

    fn result(text: &str) -> ToolResult {
        ToolResult::from_outcome(Ok(dsh_tools::ToolOutput::text(text)))
    }

    /// Starts a child of `parent` on the provider named like its label.
    async fn start(service: &SubagentService, parent: &str, label: &str) -> SubagentRun {
        let mut request = StartRequest::text("task", AgentRef::new(parent), CancellationToken::new());
        request.label = Some(label.to_owned());
        service.start(label, request).await.unwrap()
    }

    async fn end(mut run: SubagentRun) {
        run.result().await.unwrap();
        run.dispose().await.unwrap();
    }

    /// What keeps a test's providers registered and its streams subscribed.
    type Watching = (Vec<dsh_subagent::ProviderRegistration>, dsh_subagent::Subscription);

    /// Streams for the `subagent` tool, hearing `service`'s run events, with
    /// a scripted provider of each of `providers`, and the session agent
    /// `root` open on a channel.
    fn watch(
        service: &SubagentService,
        providers: &[&str],
    ) -> (Arc<Streams>, AgentId, UnboundedReceiver<Event>, Watching) {
        let streams = Arc::new(Streams::new(vec!["subagent".to_owned()]));
        let registrations = providers
            .iter()
            .map(|name| {
                service
                    .register_provider(ScriptedProvider::builder(*name).build())
                    .unwrap()
            })
            .collect();
        let observer = streams.clone();
        let runs = service.subscribe(Arc::new(move |event: &SubagentEvent| {
            observer.child_event(event);
            Ok(())
        }));
        let root = AgentId::new("root");
        let (events, received) = unbounded_channel();
        streams.open(&root, events, false);
        (streams, root, received, (registrations, runs))
    }

    #[test]
    fn text_deltas_ready_together_become_one_chunk_and_nothing_else_merges() {
        let finished = |id: &str| Event::ToolFinished {
            id: id.to_owned(),
            text: "done".to_owned(),
            failed: false,
            cut: None,
        };
        let progress = |line: &str| Event::ChildProgress {
            call: "c".to_owned(),
            lines: vec![line.to_owned()],
        };
        let text = |delta: &str| Event::Text(delta.to_owned());
        let ready = [
            text("one "),
            text("two "),
            text("three"),
            progress("a: started"),
            progress("a: answering"),
            finished("c"),
            text("after"),
        ];
        assert_eq!(
            coalesce(ready),
            [
                text("one two three"),
                progress("a: started"),
                progress("a: answering"),
                finished("c"),
                text("after"),
            ]
        );
        assert_eq!(coalesce([]), []);
    }

    #[tokio::test]
    async fn children_report_under_the_call_with_their_description_and_stop_when_it_ends() {
        let service = SubagentService::new();
        let (streams, root, mut received, _watching) = watch(&service, &["alpha", "beta", "deeper"]);
        let (first, second) = (call("c0", "subagent", "alpha"), call("c1", "subagent", "beta"));
        streams.tool_call_started(&root, &first);
        streams.tool_call_started(&root, &second);
        // Started in the other order than the calls: matched by description.
        let kid_b = start(&service, "root", "beta").await;
        // An in-process child may finish a model call before its start is
        // announced: it counts at its end.
        let kid_a = AgentId::new("scripted-subagent:alpha:root");
        streams.step_finished(&kid_a, 1, None, Priced::Nothing);
        let run_a = start(&service, "root", "alpha").await;
        // A grandchild reports under its parent's call.
        let grandkid = start(&service, kid_a.as_str(), "deeper").await;
        end(grandkid).await;
        end(run_a).await;
        streams.tool_call_finished(&root, &second, &result("beta done"));
        // After its call ended, a (background) child no longer reports.
        end(kid_b).await;
        streams.text_delta(&kid_a, "not the session's text");
        streams.close(&root, false);
        streams.text_delta(&root, "after the prompt");

        let mut seen = Vec::new();
        while let Ok(event) = received.try_recv() {
            seen.push(event);
        }
        let progress = |call: &str, lines: &[&str]| Event::ChildProgress {
            call: call.to_owned(),
            lines: lines.iter().map(|line| (*line).to_owned()).collect(),
        };
        assert_eq!(
            seen[2..],
            [
                progress("c1", &["beta: started (beta)"]),
                progress("c0", &["alpha: started (alpha)"]),
                progress("c0", &["alpha: started (alpha)", "deeper: started (deeper)"]),
                // Only the agent loop knows an in-process child's model calls.
                progress("c0", &["alpha: started (alpha)", "deeper: completed"]),
                progress(
                    "c0",
                    &[
                        "alpha: completed · 1 model call · usage not reported",
                        "deeper: completed"
                    ]
                ),
                Event::ToolFinished {
                    id: "c1".to_owned(),
                    text: "beta done".to_owned(),
                    failed: false,
                    cut: None,
                },
            ]
        );
        assert!(matches!(&seen[0], Event::ToolStarted { id, delegation: true, .. } if id == "c0"));
    }

    #[tokio::test]
    async fn an_acp_childs_reports_replace_its_line_even_before_its_start_is_announced() {
        use dsh_subagent_acp::{ChildUpdate, Status};

        let service = SubagentService::new();
        let (streams, root, mut received, _watching) = watch(&service, &["remote"]);
        streams.tool_call_started(&root, &call("c0", "subagent", "remote"));
        let kid = "scripted-subagent:remote:root";
        // Reported before the start is announced: shown right after it.
        let tool = ChildUpdate::ToolCall {
            id: "t1".into(),
            title: "Read".into(),
            status: Status::Pending,
        };
        streams.acp_child_update(kid, &tool);
        let run = start(&service, "root", "remote").await;
        // The same report again changes nothing, so nothing is sent.
        streams.acp_child_update(kid, &ChildUpdate::Text("Hel".into()));
        streams.acp_child_update(kid, &ChildUpdate::Text("lo".into()));
        end(run).await;
        streams.close(&root, false);

        let mut seen = Vec::new();
        while let Ok(event) = received.try_recv() {
            seen.push(event);
        }
        let progress = |line: &str| Event::ChildProgress {
            call: "c0".to_owned(),
            lines: vec![line.to_owned()],
        };
        assert_eq!(
            seen[1..],
            [
                progress("remote: started (remote)"),
                progress("remote: calling Read"),
                progress("remote: answering"),
                progress("remote: completed · 1 tool call"),
            ]
        );
        assert!(streams.activity.get(kid).is_none());
    }

    /// A delegation whose child waits for a slot is pending, with a line
    /// saying how many wait before it; once admitted it is in progress
    /// again and its child reports in the place of its wait. A withdrawn
    /// wait says it left the queue.
    #[tokio::test]
    async fn a_queued_delegation_is_pending_until_its_child_gets_a_slot() {
        let service = SubagentService::with_limits(dsh_subagent::Limits::none().with_max_concurrent(ChildCount::MIN));
        let (streams, root, mut received, _watching) = watch(&service, &["alpha", "beta", "gamma"]);
        for (id, description) in [("c0", "alpha"), ("c1", "beta"), ("c2", "gamma")] {
            streams.tool_call_started(&root, &call(id, "subagent", description));
        }
        let mut next = async || {
            tokio::time::timeout(std::time::Duration::from_secs(10), received.recv())
                .await
                .unwrap()
                .unwrap()
        };
        for _ in 0..3 {
            assert!(matches!(next().await, Event::ToolStarted { .. }));
        }
        // Alpha holds the one slot until its result is taken.
        let alpha = start(&service, "root", "alpha").await;
        let beta = tokio::spawn({
            let service = service.clone();
            async move { end(start(&service, "root", "beta").await).await }
        });
        let cancel = CancellationToken::new();
        let gamma = tokio::spawn({
            let (service, cancel) = (service.clone(), cancel.clone());
            async move {
                let mut request = StartRequest::text("task", AgentRef::new("root"), cancel);
                request.label = Some("gamma".to_owned());
                service.start("gamma", request).await.map(drop)
            }
        });
        let progress = |call: &str, line: &str| Event::ChildProgress {
            call: call.to_owned(),
            lines: vec![line.to_owned()],
        };
        let waits = |call: &str| Event::CallWaits { call: call.to_owned() };
        let admitted = |call: &str| Event::CallAdmitted { call: call.to_owned() };
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(next().await);
        }
        cancel.cancel();
        assert!(gamma.await.unwrap().is_err(), "a withdrawn wait starts nothing");
        seen.push(next().await);
        end(alpha).await;
        beta.await.unwrap();
        for _ in 0..4 {
            seen.push(next().await);
        }
        assert_eq!(
            seen,
            [
                progress("c0", "alpha: started (alpha)"),
                waits("c1"),
                progress("c1", "beta: queued (0 ahead)"),
                waits("c2"),
                progress("c2", "gamma: queued (1 ahead)"),
                progress("c2", "gamma: left the queue unstarted"),
                progress("c0", "alpha: completed"),
                admitted("c1"),
                progress("c1", "beta: started (beta)"),
                progress("c1", "beta: completed"),
            ]
        );
        streams.close(&root, false);
        assert!(streams.lock().queued.is_empty());
    }
}
