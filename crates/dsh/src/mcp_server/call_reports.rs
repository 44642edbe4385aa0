//! What an MCP call that asked for progress hears of the children it
//! started: each child's start, each of its model calls and tool calls, and
//! its end, as reports to the call's [`CallProgress`] (which rate-limits
//! them into progress notifications).
//!
//! A child's start and end come from the service's run events; its work
//! from the agent loop (see "Observation" in `docs/design.md`). A child
//! belongs to the call whose task started it: the run-started event is
//! heard in that task, where [`CallProgress::current`] finds the call; a
//! grandchild belongs to its parent's call. An in-process child may finish
//! a model call before its start is announced, so what the agent loop
//! reports of an agent not yet announced is kept (a bounded few) until its
//! start says where it goes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use dsh_agent::{AgentObserver, Priced};
use dsh_llm::{ToolCall, Usage};
use dsh_mcp::CallProgress;
use dsh_subagent::{QueuedInfo, RunEndInfo, RunInfo, WaitInfo};
use dsh_tools::AgentId;

use crate::observe::{self, ModelCalls, TreeObserver};
use crate::wording;

/// How many early reports (of agents not yet announced) are kept at most.
const EARLY_LIMIT: usize = 256;

/// Something an agent did that the agent loop reported.
#[derive(Clone, Debug)]
enum Work {
    ModelCall {
        steps: u32,
        usage: Option<Usage>,
        cost: Priced,
    },
    ToolCall {
        tool: String,
    },
}

/// A child reporting to a call.
#[derive(Clone)]
struct Reporting {
    progress: CallProgress,
    label: String,
}

#[derive(Default)]
struct State {
    children: HashMap<AgentId, Reporting>,
    early: VecDeque<(AgentId, Work)>,
    /// The calls waiting for a slot of their tree, by announced run.
    queued: HashMap<u64, Reporting>,
}

/// Routes the children's lifecycle and work to the MCP calls that started
/// them ([`TreeObserver`]).
#[derive(Default)]
pub(crate) struct CallReports {
    calls: ModelCalls,
    state: Mutex<State>,
}

impl CallReports {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A wait ended, admitted (its start is reported next) or withdrawn:
    /// where it reported.
    fn left_queue(&self, wait: &WaitInfo) -> Option<Reporting> {
        self.lock().queued.remove(&wait.run_id)
    }

    fn worked(&self, agent: &AgentId, work: Work) {
        let mut state = self.lock();
        match state.children.get(agent) {
            Some(reporting) => report(reporting, &work),
            None => {
                if state.early.len() == EARLY_LIMIT {
                    state.early.pop_front();
                }
                state.early.push_back((agent.clone(), work));
            }
        }
    }
}

fn report(reporting: &Reporting, work: &Work) {
    let text = match work {
        Work::ModelCall { steps, usage, cost } => {
            wording::mcp_child_model_call(&reporting.label, *steps, *usage, *cost)
        }
        Work::ToolCall { tool } => wording::mcp_child_tool(&reporting.label, tool),
    };
    reporting.progress.report(text);
}

impl TreeObserver for CallReports {
    /// A start waits for a slot: heard in the task of the call that asked
    /// for it (or, for a grandchild, reported to its parent's call).
    fn run_queued(&self, queued: &QueuedInfo) {
        let mut state = self.lock();
        let progress = CallProgress::current()
            .filter(|progress| !progress.is_closed())
            .or_else(|| state.children.get(&queued.parent).map(|parent| parent.progress.clone()));
        let Some(progress) = progress else { return };
        let label = queued.label.clone().unwrap_or_else(|| queued.provider.clone());
        progress.report(wording::mcp_child_queued(&label, queued.ahead));
        state.queued.insert(queued.run_id, Reporting { progress, label });
    }

    fn run_admitted(&self, wait: &WaitInfo) {
        drop(self.left_queue(wait));
    }

    /// A wait was withdrawn (its call cancelled): nothing starts, its call hears so.
    fn run_withdrawn(&self, wait: &WaitInfo) {
        if let Some(reporting) = self.left_queue(wait) {
            reporting
                .progress
                .report(wording::mcp_child_withdrawn(&reporting.label));
        }
    }

    fn run_started(&self, run: &RunInfo) {
        let child = AgentId::new(run.id.as_str());
        let mut state = self.lock();
        let early: Vec<Work> = {
            let (mine, others) = std::mem::take(&mut state.early)
                .into_iter()
                .partition::<VecDeque<_>, _>(|(agent, _)| agent == &child);
            state.early = others;
            mine.into_iter().map(|(_, work)| work).collect()
        };
        let progress = CallProgress::current()
            .filter(|progress| !progress.is_closed())
            .or_else(|| state.children.get(&run.parent).map(|parent| parent.progress.clone()));
        let Some(progress) = progress else { return };
        let label = run.label.clone().unwrap_or_else(|| run.id.clone());
        progress.report(wording::mcp_child_started(&label, &run.provider, &run.id));
        let reporting = Reporting { progress, label };
        for work in &early {
            report(&reporting, work);
        }
        state.children.insert(child, reporting);
    }

    fn run_ended(&self, end: &RunEndInfo) {
        let child = AgentId::new(end.run.id.as_str());
        let calls = self.calls.take(&end.run.id);
        let mut state = self.lock();
        state.early.retain(|(agent, _)| agent != &child);
        if let Some(reporting) = state.children.remove(&child) {
            let summary = observe::child_summary(end, calls, None);
            reporting
                .progress
                .report(wording::mcp_child_settled(&reporting.label, &summary));
        }
    }
}

impl AgentObserver for CallReports {
    fn step_finished(&self, agent: &AgentId, steps: u32, usage: Option<Usage>, cost: Priced) {
        self.calls.record(agent, steps, usage, cost);
        self.worked(agent, Work::ModelCall { steps, usage, cost });
    }

    fn tool_call_started(&self, agent: &AgentId, call: &ToolCall) {
        self.worked(
            agent,
            Work::ToolCall {
                tool: call.name.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use dsh_subagent::SubagentEvent;

    use std::time::Duration;

    use dsh_subagent::SubagentService;
    use dsh_subagent_api::{AgentRef, CancellationToken, ChildCount, StartRequest, StopReason};
    use dsh_subagent_testing::scripted::ScriptedProvider;
    use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
    use futures::future::BoxFuture;
    use rmcp::ClientHandler;
    use rmcp::model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam, Request};
    use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, ServiceExt};
    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    use super::*;

    /// Delegates once to the scripted provider, while the agent loop
    /// "reports" the child's work as an in-process child's would: one model
    /// call before its start is announced, a tool call and a second model
    /// call after.
    struct Delegate {
        service: SubagentService,
        reports: Arc<CallReports>,
        parameters: Value,
        /// First start a child of the `holder` provider that holds the one
        /// slot of the tree for a moment, so the delegation queues.
        queue_behind: bool,
    }

    impl Tool for Delegate {
        fn name(&self) -> &str {
            "delegate"
        }
        fn description(&self) -> &str {
            "Delegates."
        }
        fn parameters(&self) -> &Value {
            &self.parameters
        }
        fn execute(&self, _args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
            Box::pin(async move {
                let parent = exec.agent().cloned().unwrap_or_else(|| AgentRef::new("caller"));
                if self.queue_behind {
                    let mut request = StartRequest::text("hold", parent.clone(), CancellationToken::new());
                    request.label = Some("hold the slot".to_owned());
                    let mut holder = self.service.start("holder", request).await.unwrap();
                    // Its slot is free once its result is taken.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        holder.result().await.unwrap();
                        holder.dispose().await.unwrap();
                    });
                }
                let child = AgentId::new(format!("scripted-subagent:child:{}", parent.id()));
                self.reports.step_finished(&child, 1, None, Priced::Nothing);
                let mut request = StartRequest::text("task", parent, CancellationToken::new());
                request.label = Some("look it up".to_owned());
                let mut run = self.service.start("child", request).await.unwrap();
                let call = ToolCall {
                    id: "c1".into(),
                    name: "mcp__docs__search".into(),
                    arguments: "{}".into(),
                };
                self.reports.tool_call_started(&child, &call);
                let usage = Usage {
                    total_tokens: 42,
                    ..Usage::default()
                };
                self.reports.step_finished(&child, 2, Some(usage), Priced::Nothing);
                let result = run.result().await.unwrap();
                run.dispose().await.unwrap();
                Ok(ToolOutput::text(format!("{:?}", result.stop_reason)))
            })
        }
    }

    struct Client(mpsc::UnboundedSender<ProgressNotificationParam>);

    impl ClientHandler for Client {
        async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
            let _ = self.0.send(params);
        }
    }

    /// A served call hears its child's start, each model call and tool
    /// call, and its end, in order, through the MCP server's notifications.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_served_call_hears_its_childs_lifecycle_and_work() {
        insta::assert_snapshot!(served_call_hears(SubagentService::new(), false).await);
    }

    /// A delegation that waits for a slot of its tree says so (and how
    /// many wait before it), then reports as any other.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_served_call_hears_that_its_child_waits_for_a_slot() {
        let service = SubagentService::with_limits(dsh_subagent::Limits::none().with_max_concurrent(ChildCount::MIN));
        insta::assert_snapshot!(served_call_hears(service, true).await);
    }

    /// What a served call of `Delegate` hears, one report a line.
    async fn served_call_hears(service: SubagentService, queue_behind: bool) -> String {
        let _providers: Vec<_> = ["child", "holder"]
            .into_iter()
            .map(|name| {
                service
                    .register_provider(
                        ScriptedProvider::builder(name)
                            .stop_reason(StopReason::Completed)
                            .build(),
                    )
                    .unwrap()
            })
            .collect();
        let reports = Arc::new(CallReports::default());
        let listener = reports.clone();
        let _subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
            listener.child_event(event);
            Ok(())
        }));
        let tools = ToolRegistry::new();
        let _delegate = tools
            .register(Arc::new(Delegate {
                service: service.clone(),
                reports: reports.clone(),
                parameters: json!({"type": "object", "properties": {}}),
                queue_behind,
            }))
            .unwrap();
        // No gap: every report is its own notification, so the order shows.
        let server = dsh_mcp::McpToolServer::new(tools)
            .progress_gap(Duration::ZERO)
            .progress_interval(Duration::from_secs(60));
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_io);
        let served = tokio::spawn(async move { server.serve(AgentRef::new("session"), read, write).await });
        let (tx, mut progress) = mpsc::unbounded_channel();
        let client = Client(tx).serve(client_io).await.unwrap();
        let handle = client
            .peer()
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("delegate"))),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        handle.await_response().await.unwrap();
        // The client may hear notifications after the answer, and not in
        // the order they were sent: collect them all, then order them.
        let mut heard: Vec<ProgressNotificationParam> = Vec::new();
        let complete = |heard: &[ProgressNotificationParam]| {
            (1..=heard.len()).all(|n| heard.iter().any(|params| params.progress == n as f64))
                && heard.iter().any(|params| {
                    params
                        .message
                        .as_deref()
                        .is_some_and(|m| m.contains("\"look it up\" completed"))
                })
        };
        while !complete(&heard) {
            let params = tokio::time::timeout(Duration::from_secs(30), progress.recv())
                .await
                .unwrap_or_else(|_| panic!("not all heard: {heard:?}"))
                .unwrap();
            heard.push(params);
        }
        heard.sort_by(|a, b| a.progress.total_cmp(&b.progress));
        let messages: Vec<String> = heard
            .into_iter()
            .flat_map(|params| {
                let message = params.message.unwrap_or_default();
                message.split("; ").map(str::to_owned).collect::<Vec<_>>()
            })
            .collect();
        client.cancel().await.unwrap();
        served.await.unwrap().unwrap();
        // Nothing of those children is kept once they ended.
        let state = reports.lock();
        assert!(state.children.is_empty() && state.early.is_empty() && state.queued.is_empty());
        messages.join("\n")
    }

    /// A child started outside any call that asked for progress reports
    /// nothing, and what was kept early of it is dropped.
    #[tokio::test]
    async fn a_child_without_a_listening_call_is_forgotten() {
        let service = SubagentService::new();
        let _child = service
            .register_provider(ScriptedProvider::builder("child").build())
            .unwrap();
        let reports = Arc::new(CallReports::default());
        let listener = reports.clone();
        let _subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
            listener.child_event(event);
            Ok(())
        }));
        reports.step_finished(&AgentId::new("scripted-subagent:child:p"), 1, None, Priced::Nothing);
        let mut run = service
            .start(
                "child",
                StartRequest::text("t", AgentRef::new("p"), CancellationToken::new()),
            )
            .await
            .unwrap();
        run.result().await.unwrap();
        run.dispose().await.unwrap();
        assert!(reports.lock().children.is_empty() && reports.lock().early.is_empty());
    }
}
