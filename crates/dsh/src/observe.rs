//! How dsh observes an agent tree: one source per kind of fact.
//!
//! - **A child started, a child ended** (its label, provider, depth, stop
//!   reason), for every provider, in-process or ACP: the subagent service's
//!   run events ([`SubagentEvent`]), the same events a harness subscribes to.
//! - **What happens inside an in-process agent's run** (streamed text, model
//!   calls with their usage, tool calls): the agent loop's [`AgentObserver`].
//! - **What an ACP child reports while it works** (its tool calls, its plan,
//!   that it is answering): the ACP provider's progress sink
//!   ([`TreeObserver::acp_child_update`]); the child's own model calls stay
//!   in its process.
//!
//! See "Observation" in `docs/design.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use dsh_agent::{AgentObserver, Priced};
use dsh_llm::{ToolCall, Usage};
use dsh_subagent::{CutInfo, QueuedInfo, RunEndInfo, RunInfo, SubagentEvent, WaitInfo};
use dsh_subagent_acp::{ChildUpdate, Status};
use dsh_tools::{AgentId, ToolResult};

use crate::wording;

/// What `dsh run`, `dsh acp` and `dsh mcp` show of their agent tree: the
/// agent loop's reports ([`AgentObserver`]), the service's run events, and
/// ACP children's reports.
///
/// The service's events reach an observer through [`child_event`], which
/// maps each kind to one method of its own (a call waits for a slot, gets
/// it or leaves the queue; a child starts or ends; a result is cut): an
/// observer implements only those it shows.
///
/// [`child_event`]: TreeObserver::child_event
pub(crate) trait TreeObserver: AgentObserver {
    /// A service event, handed to the method for its kind; other events
    /// are not shown.
    fn child_event(&self, event: &SubagentEvent) {
        dispatch(self, event);
    }

    /// A delegation waits for a slot of its tree.
    fn run_queued(&self, _queued: &QueuedInfo) {}

    /// A wait ended with a slot: the child's start follows.
    fn run_admitted(&self, _wait: &WaitInfo) {}

    /// A wait was withdrawn (its call cancelled): nothing starts.
    fn run_withdrawn(&self, _wait: &WaitInfo) {}

    /// A child started.
    fn run_started(&self, _run: &RunInfo) {}

    /// A child ended.
    fn run_ended(&self, _end: &RunEndInfo) {}

    /// A child's result was cut to its budget.
    fn result_cut(&self, _cut: &CutInfo) {}

    /// An ACP child's report while it works; `run` is its run id (as in the
    /// run events). It may come before the run's start is announced.
    fn acp_child_update(&self, _run: &str, _update: &ChildUpdate) {}

    /// A resumed agent got back what it ran in the background: what became
    /// of each of its children.
    fn recovered(&self, _agent: &dsh_tools::AgentId, _report: &dsh_subagent::RecoveryReport) {}
}

/// Hands a service event to `observer`'s method for its kind (what
/// [`TreeObserver::child_event`] does unless an observer takes the event
/// whole first); other events are not shown.
pub(crate) fn dispatch<O: TreeObserver + ?Sized>(observer: &O, event: &SubagentEvent) {
    match event {
        SubagentEvent::RunQueued(queued) => observer.run_queued(queued),
        SubagentEvent::RunAdmitted(wait) => observer.run_admitted(wait),
        SubagentEvent::RunWithdrawn(wait) => observer.run_withdrawn(wait),
        SubagentEvent::RunStarted(run) => observer.run_started(run),
        SubagentEvent::RunEnded(end) => observer.run_ended(end),
        SubagentEvent::ResultCut(cut) => observer.result_cut(cut),
        _ => {}
    }
}

/// Two observers, in order: each hears every report (the stderr progress,
/// then what a surface streams to its client).
pub(crate) struct Tee(pub(crate) Arc<dyn TreeObserver>, pub(crate) Arc<dyn TreeObserver>);

impl TreeObserver for Tee {
    fn child_event(&self, event: &SubagentEvent) {
        self.0.child_event(event);
        self.1.child_event(event);
    }

    fn acp_child_update(&self, run: &str, update: &ChildUpdate) {
        self.0.acp_child_update(run, update);
        self.1.acp_child_update(run, update);
    }
}

impl AgentObserver for Tee {
    fn text_delta(&self, agent: &AgentId, delta: &str) {
        self.0.text_delta(agent, delta);
        self.1.text_delta(agent, delta);
    }

    fn step_finished(&self, agent: &AgentId, steps: u32, usage: Option<Usage>, cost: Priced) {
        self.0.step_finished(agent, steps, usage, cost);
        self.1.step_finished(agent, steps, usage, cost);
    }

    fn tool_call_started(&self, agent: &AgentId, call: &ToolCall) {
        self.0.tool_call_started(agent, call);
        self.1.tool_call_started(agent, call);
    }

    fn tool_call_finished(&self, agent: &AgentId, call: &ToolCall, result: &ToolResult) {
        self.0.tool_call_finished(agent, call, result);
        self.1.tool_call_finished(agent, call, result);
    }
}

/// The model calls of an in-process agent's current run, as the agent loop
/// last reported them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Calls {
    /// Model calls finished in this run.
    pub(crate) steps: u32,
    /// Their usage, when the model reported it.
    pub(crate) usage: Option<Usage>,
    /// What they cost, where their model's price is known.
    pub(crate) cost: Priced,
}

/// The model calls of in-process agents' current runs, by agent id: recorded
/// as each call finishes, taken when the run's end is reported. A model call
/// may finish before the run's start is announced (the child works while its
/// provider returns), so nothing here waits for the start.
#[derive(Default)]
pub(crate) struct ModelCalls(Mutex<HashMap<AgentId, Calls>>);

impl ModelCalls {
    /// Records an agent's model calls so far in its current run.
    pub(crate) fn record(&self, agent: &AgentId, steps: u32, usage: Option<Usage>, cost: Priced) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent.clone(), Calls { steps, usage, cost });
    }

    /// Takes what was recorded for the run of the agent with this id; `None`
    /// for a child the agent loop never reported (an ACP child, or one that
    /// ended before its first model call).
    pub(crate) fn take(&self, agent: &str) -> Option<Calls> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&AgentId::new(agent))
    }
}

/// How a child ended, in words: its stop reason, then what it did, its
/// model calls (an in-process child's, `calls`) or the tool calls it
/// reported (an ACP child's, `activity`).
pub(crate) fn child_summary(end: &RunEndInfo, calls: Option<Calls>, activity: Option<Activity>) -> String {
    wording::child_summary(
        &wording::child_stop(end),
        calls.map(|calls| (calls.steps, calls.usage, calls.cost)),
        activity.map_or(0, |activity| activity.tool_calls),
    )
}

/// What an ACP child has reported of its current run: what it is doing
/// now, in words, and how many tool calls it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Activity {
    /// What it is doing now, when it said (the tail of a progress line).
    pub(crate) now: Option<String>,
    /// The tool calls it started.
    pub(crate) tool_calls: u32,
    /// Its latest tool call: id and title, for an update without a title.
    last_call: Option<(String, String)>,
}

impl Activity {
    /// Takes in one report.
    fn record(&mut self, update: &ChildUpdate) {
        match update {
            ChildUpdate::Text(_) => self.now = Some(wording::ACP_CHILD_ANSWERING.to_owned()),
            ChildUpdate::ToolCall { id, title, status } => {
                self.tool_calls += 1;
                self.now = Some(wording::acp_child_tool_status(title, *status));
                self.last_call = Some((id.clone(), title.clone()));
            }
            ChildUpdate::ToolCallUpdate { id, title, status } => {
                let Some((last, last_title)) = &mut self.last_call else {
                    return;
                };
                // Only the latest call's progress shows; an older one's
                // end changes nothing the line says.
                if last != id {
                    return;
                }
                if let Some(title) = title {
                    last_title.clone_from(title);
                }
                if let Some(status) = status {
                    self.now = Some(wording::acp_child_tool_status(last_title, *status));
                }
            }
            ChildUpdate::Plan(steps) => {
                let done = steps.iter().filter(|(_, status)| *status == Status::Completed).count();
                let current = steps
                    .iter()
                    .find(|(_, status)| *status == Status::InProgress)
                    .map(|(step, _)| step.as_str());
                self.now = Some(wording::acp_child_plan(done, steps.len(), current));
            }
            _ => {}
        }
    }
}

/// The [`Activity`] of ACP children's current runs, by run id: recorded as
/// each report arrives (before the run's start is announced, too), taken
/// when its end is reported. One entry per running ACP child.
#[derive(Default)]
pub(crate) struct ChildActivity(Mutex<HashMap<AgentId, Activity>>);

impl ChildActivity {
    /// Takes in one report of run `run`; returns its activity now.
    pub(crate) fn record(&self, run: &str, update: &ChildUpdate) -> Activity {
        let mut runs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let activity = runs.entry(AgentId::new(run)).or_default();
        activity.record(update);
        activity.clone()
    }

    /// What run `run` has reported so far.
    pub(crate) fn get(&self, run: &str) -> Option<Activity> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&AgentId::new(run))
            .cloned()
    }

    /// Takes what run `run` reported; `None` for one that reported nothing
    /// (an in-process child, or an ACP child that sent no report).
    pub(crate) fn take(&self, run: &str) -> Option<Activity> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&AgentId::new(run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_report_of_a_run_is_taken_once() {
        let calls = ModelCalls::default();
        let agent = AgentId::new("kid");
        calls.record(&agent, 1, None, Priced::Nothing);
        calls.record(&agent, 2, None, Priced::Nothing);
        assert_eq!(
            calls.take("kid"),
            Some(Calls {
                steps: 2,
                usage: None,
                cost: Priced::Nothing
            })
        );
        assert_eq!(calls.take("kid"), None);
        assert_eq!(calls.take("acp-1"), None, "never reported");
    }
}

#[cfg(test)]
mod activity_tests {
    use dsh_subagent_acp::{ChildUpdate, Status};

    use super::*;

    fn call(id: &str, title: &str, status: Status) -> ChildUpdate {
        ChildUpdate::ToolCall {
            id: id.into(),
            title: title.into(),
            status,
        }
    }

    fn update(id: &str, status: Status) -> ChildUpdate {
        ChildUpdate::ToolCallUpdate {
            id: id.into(),
            title: None,
            status: Some(status),
        }
    }

    #[test]
    fn an_acp_childs_reports_say_what_it_is_doing_now() {
        let runs = ChildActivity::default();
        let now = |update: ChildUpdate| runs.record("acp-1", &update).now.unwrap();
        assert_eq!(now(ChildUpdate::Text("Hel".into())), "answering");
        assert_eq!(
            now(call("c1", "Read README.md", Status::Pending)),
            "calling Read README.md"
        );
        assert_eq!(now(update("c1", Status::InProgress)), "calling Read README.md");
        assert_eq!(now(call("c2", "Search", Status::InProgress)), "calling Search");
        // An older call's end does not replace the latest one.
        assert_eq!(now(update("c1", Status::Completed)), "calling Search");
        assert_eq!(now(update("c2", Status::Failed)), "Search failed");
        let plan = ChildUpdate::Plan(vec![
            ("look".into(), Status::Completed),
            ("write".into(), Status::InProgress),
            ("check".into(), Status::Pending),
        ]);
        assert_eq!(now(plan), "plan 1/3 · write");
        assert_eq!(runs.get("acp-1").unwrap().tool_calls, 2);
        assert_eq!(runs.take("acp-1").unwrap().tool_calls, 2);
        assert_eq!(runs.take("acp-1"), None);
    }
}
