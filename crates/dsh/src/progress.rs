//! Live progress of the agent tree on stderr.
//!
//! A child's start and end come from the service's run events, so every
//! provider's children show, an ACP child's too; an in-process child's model
//! calls come from the agent loop, an ACP child's tool calls and plan from
//! the ACP provider (see [`crate::observe`]).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use dsh_agent::{AgentObserver, Priced};
use dsh_llm::Usage;
use dsh_subagent::{CutInfo, QueuedInfo, RunEndInfo, RunInfo, WaitInfo};
use dsh_tools::AgentId;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::delegations::Delegations;
use crate::live::LiveView;
use crate::observe::{self, ChildActivity, ModelCalls, TreeObserver};
use crate::wording;

/// Shows each child as it works (label, elapsed time, model calls, tokens):
/// progress bars on a terminal (`dsh run`'s redrawn tree, [`crate::live`]),
/// one line per start and end otherwise, or nothing when quiet. Remembers which children ran, for `dsh run`'s
/// summary, only when asked ([`Progress::listing_children`]): a long
/// `dsh mcp` or `dsh acp` session would otherwise keep an id per child.
pub(crate) struct Progress {
    display: Display,
    calls: ModelCalls,
    activity: ChildActivity,
    lists_children: bool,
    state: Mutex<State>,
    delegations: Delegations,
}

enum Display {
    Quiet,
    /// One line per start and end, handed to this sink (stderr in `dsh`).
    Lines(Box<dyn Fn(String) + Send + Sync>),
    Bars(MultiProgress),
    /// `dsh run` on a terminal: the whole tree, redrawn in place.
    Tree(LiveView),
}

#[derive(Default)]
struct State {
    /// The children running now, by announced run.
    running: HashMap<u64, Child>,
    /// The ids of the children that ran, in start order, each once (only
    /// when listing children).
    order: Vec<String>,
    /// The calls waiting for a slot now, by announced run.
    queued: HashMap<u64, Waiting>,
    /// The calls that waited for a slot, and their wait in all.
    waits: Waits,
}

/// How many delegation calls waited for a slot of their tree, and how long
/// in all (those that left the queue unstarted included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Waits {
    /// The calls that waited.
    pub(crate) calls: usize,
    /// Their waits, summed.
    pub(crate) total: Duration,
}

/// A call waiting for a slot.
struct Waiting {
    label: String,
    indent: String,
    bar: Option<ProgressBar>,
}

struct Child {
    id: String,
    label: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(crate) fn new(quiet: bool) -> Self {
        let display = if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            Display::Bars(MultiProgress::new())
        } else {
            Display::Lines(Box::new(|line| eprintln!("{line}")))
        };
        Self::with_display(display)
    }

    /// `dsh run`'s progress: on a terminal, the tree redrawn in place
    /// ([`start_tree`](Self::start_tree) names its root), unless `plain`
    /// asks for the lines a pipe gets; nothing when `quiet`.
    pub(crate) fn for_run(quiet: bool, plain: bool) -> Self {
        if quiet || plain || !std::io::stderr().is_terminal() {
            let display = if quiet {
                Display::Quiet
            } else {
                Display::Lines(Box::new(|line| eprintln!("{line}")))
            };
            return Self::with_display(display);
        }
        Self::with_display(Display::Tree(LiveView::default()))
    }

    /// Starts the redrawn tree of top-level agent `root` (its label and
    /// model); nothing unless this is `dsh run` on a terminal.
    pub(crate) fn start_tree(&self, root: &str, label: &str, model: &str) {
        if let Display::Tree(view) = &self.display {
            view.start(root, label, model);
        }
    }

    /// The top-level agent's run ended with `stop`: the redrawn tree, if
    /// any, draws its last frame (the whole tree) and stays on the screen.
    pub(crate) fn finish_tree(&self, stop: &str) {
        if let Display::Tree(view) = &self.display {
            view.finish(stop);
        }
    }

    fn with_display(display: Display) -> Self {
        Self {
            display,
            calls: ModelCalls::default(),
            activity: ChildActivity::default(),
            lists_children: false,
            state: Mutex::default(),
            delegations: Delegations::default(),
        }
    }

    /// Remembers the id of every child that runs, for [`children`](Self::children).
    pub(crate) fn listing_children(mut self) -> Self {
        self.lists_children = true;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ids of the children that ran, in start order, each once; empty
    /// unless [`listing_children`](Self::listing_children).
    pub(crate) fn children(&self) -> Vec<String> {
        self.lock().order.clone()
    }

    /// What became of the top-level agent's delegations so far.
    pub(crate) fn delegations(&self) -> &Delegations {
        &self.delegations
    }

    /// How many calls waited for a slot so far, and how long in all.
    pub(crate) fn waits(&self) -> Waits {
        self.lock().waits
    }

    /// A wait ended, admitted (its start line follows) or withdrawn: it
    /// counts among the waits, and its bar goes.
    fn left_queue(&self, wait: &WaitInfo) -> Option<Waiting> {
        let waiting = {
            let mut state = self.lock();
            state.waits.calls += 1;
            state.waits.total += wait.waited;
            state.queued.remove(&wait.run_id)
        }?;
        if let Some(bar) = &waiting.bar {
            bar.finish_and_clear();
        }
        Some(waiting)
    }
}

impl TreeObserver for Progress {
    /// One line per child of a resumed agent: delivered, resumed or
    /// disconnected (a foreground one goes on with its call, and its start
    /// shows then).
    fn recovered(&self, agent: &dsh_tools::AgentId, report: &dsh_subagent::RecoveryReport) {
        let lines = report
            .children
            .iter()
            .filter_map(|child| wording::child_recovered(agent.as_str(), child));
        for line in lines {
            match &self.display {
                Display::Quiet => {}
                Display::Lines(sink) => sink(line),
                Display::Bars(bars) => {
                    let _ = bars.println(line);
                }
                Display::Tree(_) => eprintln!("{line}"),
            }
        }
    }

    fn child_event(&self, event: &dsh_subagent::SubagentEvent) {
        if let Display::Tree(view) = &self.display
            && let Some(tree) = view.tree()
        {
            tree.event(event);
        }
        observe::dispatch(self, event);
    }

    fn run_queued(&self, queued: &QueuedInfo) {
        let label = queued.label.clone().unwrap_or_else(|| queued.provider.clone());
        let indent = "  ".repeat(queued.depth.saturating_sub(1) as usize);
        let bar = match &self.display {
            Display::Quiet | Display::Tree(_) => None,
            Display::Lines(sink) => {
                sink(wording::child_queued(&indent, &label, queued.ahead));
                None
            }
            Display::Bars(bars) => {
                let bar = child_spinner(bars, &indent, &label);
                bar.set_message(wording::queued(queued.ahead));
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(bar)
            }
        };
        self.lock().queued.insert(queued.run_id, Waiting { label, indent, bar });
    }

    fn run_admitted(&self, wait: &WaitInfo) {
        drop(self.left_queue(wait));
    }

    /// A wait was withdrawn (its call cancelled): nothing starts, a line says so.
    fn run_withdrawn(&self, wait: &WaitInfo) {
        if let Some(waiting) = self.left_queue(wait)
            && let Display::Lines(sink) = &self.display
        {
            sink(wording::child_withdrawn(
                &waiting.indent,
                &waiting.label,
                wait.waited.as_secs_f64(),
            ));
        }
    }

    fn run_started(&self, run: &RunInfo) {
        self.delegations.started(run);
        let label = run.label.clone().unwrap_or_else(|| run.id.clone());
        let indent = "  ".repeat(run.depth.saturating_sub(1) as usize);
        let bar = match &self.display {
            Display::Quiet | Display::Tree(_) => None,
            Display::Lines(sink) => {
                sink(wording::child_started(&indent, &label, &run.id, &run.provider));
                None
            }
            Display::Bars(bars) => {
                let bar = child_spinner(bars, &indent, &label);
                // An ACP child may have reported before its start was announced.
                let now = self.activity.get(&run.id).and_then(|activity| activity.now);
                bar.set_message(now.unwrap_or_else(|| wording::WORKING.to_owned()));
                bar.enable_steady_tick(Duration::from_millis(120));
                Some(bar)
            }
        };
        let mut state = self.lock();
        if self.lists_children && !state.order.contains(&run.id) {
            state.order.push(run.id.clone());
        }
        state.running.insert(
            run.run_id,
            Child {
                id: run.id.clone(),
                label,
                started: Instant::now(),
                bar,
            },
        );
    }

    fn run_ended(&self, end: &RunEndInfo) {
        self.delegations.ended(end);
        let activity = self.activity.take(&end.run.id);
        let Some(child) = self.lock().running.remove(&end.run.run_id) else {
            return;
        };
        let summary = observe::child_summary(end, self.calls.take(&child.id), activity);
        match (&self.display, &child.bar) {
            (Display::Bars(_), Some(bar)) => bar.finish_with_message(summary),
            (Display::Lines(sink), _) => sink(wording::child_ended(
                &child.label,
                &summary,
                child.started.elapsed().as_secs_f64(),
            )),
            _ => {}
        }
    }

    /// A child's result was cut to its budget: a line after its end line.
    fn result_cut(&self, cut: &CutInfo) {
        let label = cut.label.as_deref().unwrap_or_default();
        let line = wording::child_cut(
            label,
            cut.outcome,
            cut.full.bytes,
            cut.shown.bytes,
            cut.task_id.as_deref(),
        );
        match &self.display {
            // The tree shows the cut on the child's line.
            Display::Quiet | Display::Tree(_) => {}
            Display::Lines(sink) => sink(line),
            Display::Bars(bars) => {
                let _ = bars.println(line);
            }
        }
    }

    fn acp_child_update(&self, run: &str, update: &dsh_subagent_acp::ChildUpdate) {
        use dsh_subagent_acp::ChildUpdate;
        // The subagent sessions an ACP child announces join the tree under it.
        if let Display::Tree(view) = &self.display
            && let Some(tree) = view.tree()
        {
            match update {
                ChildUpdate::Subagent {
                    session,
                    parent,
                    title,
                    task,
                } => tree.announced(run, session, parent.as_deref(), title.clone(), task.clone()),
                ChildUpdate::SubagentEnded { session, stop } => tree.announced_ended(run, session, stop),
                _ => {}
            }
        }
        let Some(now) = self.activity.record(run, update).now else {
            return;
        };
        let state = self.lock();
        let bar = state
            .running
            .values()
            .find(|child| child.id == run)
            .and_then(|child| child.bar.as_ref());
        if let Some(bar) = bar {
            bar.set_message(now);
        }
    }
}

impl AgentObserver for Progress {
    fn step_finished(&self, agent: &AgentId, steps: u32, usage: Option<Usage>, cost: Priced) {
        self.calls.record(agent, steps, usage, cost);
        if let Display::Tree(view) = &self.display
            && let Some(tree) = view.tree()
        {
            let tokens = usage.as_ref().map(dsh_tree::Tokens::from_usage);
            tree.model_call(agent.as_str(), steps, tokens, cost.known());
        }
        let state = self.lock();
        let bar = state
            .running
            .values()
            .find(|child| child.id == agent.as_str())
            .and_then(|child| child.bar.as_ref());
        if let Some(bar) = bar {
            bar.set_message(wording::model_calls(steps, usage, cost));
        }
    }
}

/// A child's spinner line: `↳ <label>`, indented by its depth, with its
/// elapsed time and a message.
fn child_spinner(bars: &MultiProgress, indent: &str, label: &str) -> ProgressBar {
    let bar = bars.add(ProgressBar::new_spinner());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {prefix} {elapsed:>4} {msg}") {
        bar.set_style(style);
    }
    bar.set_prefix(format!("{indent}↳ {label}"));
    bar
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use dsh_subagent::SubagentService;
    use dsh_subagent_api::{AgentRef, CancellationToken, ChildCount, StartRequest, StopReason};
    use dsh_subagent_testing::scripted::ScriptedProvider;

    use dsh_subagent::SubagentEvent;

    use super::*;

    /// A `Lines` progress following `service`, and the lines it printed.
    fn lines(service: &SubagentService) -> (Arc<Progress>, Arc<Mutex<Vec<String>>>, dsh_subagent::Subscription) {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let sink = printed.clone();
        let progress = Arc::new(
            Progress::with_display(Display::Lines(Box::new(move |line| {
                sink.lock().unwrap().push(line);
            })))
            .listing_children(),
        );
        let observer = progress.clone();
        let subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
            observer.child_event(event);
            Ok(())
        }));
        (progress, printed, subscription)
    }

    async fn delegate(service: &SubagentService, provider: &str, parent: AgentRef, label: &str) {
        let mut request = StartRequest::text("task", parent, CancellationToken::new());
        request.label = Some(label.to_owned());
        let mut run = service.start(provider, request).await.unwrap();
        run.result().await.unwrap();
        run.dispose().await.unwrap();
    }

    /// Drops the elapsed time, the one part of a line that varies.
    fn timeless(lines: &Mutex<Vec<String>>) -> Vec<String> {
        lines
            .lock()
            .unwrap()
            .iter()
            .map(|line| {
                line.rsplit_once(" · ")
                    .map_or(line.as_str(), |(head, _)| head)
                    .to_owned()
            })
            .collect()
    }

    #[tokio::test]
    async fn any_providers_child_shows_its_start_and_end_from_the_run_events() {
        let service = SubagentService::new();
        let _remote = service
            .register_provider(
                ScriptedProvider::builder("remote")
                    .stop_reason(StopReason::Refusal)
                    .build(),
            )
            .unwrap();
        let (progress, printed, _subscription) = lines(&service);
        delegate(&service, "remote", AgentRef::new("parent"), "ask the remote").await;
        assert_eq!(
            timeless(&printed),
            [
                "↳ subagent \"ask the remote\" started (scripted-subagent:remote:parent, remote)",
                // The agent loop never reported this child: no model calls claimed.
                "↳ subagent \"ask the remote\" refusal",
            ]
        );
        assert!(printed.lock().unwrap()[1].ends_with('s'), "the elapsed time");
        assert_eq!(progress.children(), ["scripted-subagent:remote:parent"]);
    }

    #[tokio::test]
    async fn a_context_stop_shows_its_own_line_and_other_stops_their_reason_only() {
        let line = dsh_agent::ContextStop::new(Some(24_000), 4_096, 31_250, dsh_agent::FoundBy::Estimate).line();
        let service = SubagentService::new();
        let _context = service
            .register_provider(
                ScriptedProvider::builder("context")
                    .stop_reason(StopReason::Other("context-window".into()))
                    .diagnostic(line.clone())
                    .build(),
            )
            .unwrap();
        let _failed = service
            .register_provider(
                ScriptedProvider::builder("failed")
                    .stop_reason(StopReason::Error)
                    .diagnostic("the child's model call failed: boom")
                    .build(),
            )
            .unwrap();
        let (_progress, printed, _subscription) = lines(&service);
        delegate(&service, "context", AgentRef::new("parent"), "write part 1").await;
        delegate(&service, "failed", AgentRef::new("parent"), "write part 2").await;
        let printed = timeless(&printed);
        assert_eq!(
            printed[1],
            format!("↳ subagent \"write part 1\" context-window: {line}")
        );
        assert_eq!(printed[3], "↳ subagent \"write part 2\" error");
        insta::assert_snapshot!("context_stop_progress_line", printed[1]);
    }

    #[tokio::test]
    async fn an_in_process_childs_model_calls_and_their_cost_join_its_end_and_each_child_is_listed_once() {
        let service = SubagentService::new();
        let _local = service
            .register_provider(ScriptedProvider::builder("local").build())
            .unwrap();
        let (progress, printed, _subscription) = lines(&service);
        let child = AgentId::new("scripted-subagent:local:parent");
        // Reported before the start is announced, as an in-process child may.
        progress.step_finished(&child, 1, None, Priced::Nothing);
        let usage = Usage {
            total_tokens: 12,
            ..Usage::default()
        };
        let cost = Priced::Known(dsh_llm::Cost::from_nanos(1_200_000));
        progress.step_finished(&child, 2, Some(usage), cost);
        delegate(&service, "local", AgentRef::new("parent").with_depth(1), "nested").await;
        // The same child again (a continued child keeps its id).
        delegate(&service, "local", AgentRef::new("parent").with_depth(1), "nested").await;
        assert_eq!(
            timeless(&printed),
            [
                "  ↳ subagent \"nested\" started (scripted-subagent:local:parent, local)",
                "↳ subagent \"nested\" completed · 2 model calls · 12 tokens, cost 0.0012",
                "  ↳ subagent \"nested\" started (scripted-subagent:local:parent, local)",
                "↳ subagent \"nested\" completed",
            ]
        );
        assert_eq!(progress.children(), ["scripted-subagent:local:parent"]);
    }

    #[tokio::test]
    async fn a_cut_result_shows_its_size_and_what_was_shown_after_the_end_line() {
        let service = SubagentService::new();
        let _long = service
            .register_provider(ScriptedProvider::builder("long").reply("é".repeat(1_100_000)).build())
            .unwrap();
        let (_progress, printed, _subscription) = lines(&service);
        let tools = dsh_tools::ToolRegistry::new();
        let tasks = dsh_tasks::TaskRegistry::new();
        let _task_tools = dsh_tool_tasks::TaskToolsPlugin::apply(&tasks, &tools).unwrap();
        let config = dsh_tool_subagent::SubagentToolConfig::new("long");
        let _tool = dsh_tool_subagent::SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap();
        let exec = dsh_tools::ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new("parent"));
        let args = serde_json::json!({"description": "write it all", "prompt": "p"});
        let result = tools.call("subagent", args, exec).await;
        assert!(result.cut.is_some());
        let lines = timeless(&printed);
        insta::assert_snapshot!(lines.join("\n"), @r#"
        ↳ subagent "write it all" started (scripted-subagent:long:parent, long)
        ↳ subagent "write it all" completed
        ↳ subagent "write it all" completed (2.2 MB answer, 32 KB shown; task_output reads the rest from task subagent-1)
        "#);
        let failed = wording::child_cut("x", dsh_subagent::CutOutcome::Failed, 999, 512, None);
        insta::assert_snapshot!(failed, @r#"↳ subagent "x" failed (999 B error, 512 B shown; the rest is not kept)"#);
    }

    /// Waits until `printed` has `count` lines.
    async fn printed_lines(printed: &Mutex<Vec<String>>, count: usize) {
        let wait = async {
            while printed.lock().unwrap().len() < count {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait).await.unwrap();
    }

    #[tokio::test]
    async fn a_queued_call_says_how_many_wait_before_it_and_a_withdrawn_one_that_it_left() {
        let service = SubagentService::with_limits(dsh_subagent::Limits::none().with_max_concurrent(ChildCount::MIN));
        let _local = service
            .register_provider(ScriptedProvider::builder("local").build())
            .unwrap();
        let (progress, printed, _subscription) = lines(&service);
        let tree = service.open_tree();
        let parent = AgentRef::new("parent").with_lineage(tree.lineage());
        let request = |label: &str, cancel: &CancellationToken| {
            let mut request = StartRequest::text("task", parent.clone(), cancel.clone());
            request.label = Some(label.to_owned());
            request
        };
        // The one slot is held until the first child's result is taken.
        let mut first = service
            .start("local", request("first", &CancellationToken::new()))
            .await
            .unwrap();
        let cancel = CancellationToken::new();
        let second = tokio::spawn({
            let (service, request) = (service.clone(), request("second", &cancel));
            async move { service.start("local", request).await.map(drop) }
        });
        printed_lines(&printed, 2).await;
        let third = tokio::spawn({
            let (service, request) = (service.clone(), request("third", &CancellationToken::new()));
            async move {
                let mut run = service.start("local", request).await.unwrap();
                run.result().await.unwrap();
                run.dispose().await.unwrap();
            }
        });
        printed_lines(&printed, 3).await;
        cancel.cancel();
        assert!(second.await.unwrap().is_err(), "a withdrawn call starts nothing");
        first.result().await.unwrap();
        first.dispose().await.unwrap();
        third.await.unwrap();
        assert_eq!(
            timeless(&printed),
            [
                "↳ subagent \"first\" started (scripted-subagent:local:parent, local)",
                "↳ subagent \"second\" queued (0 ahead)",
                "↳ subagent \"third\" queued (1 ahead)",
                "↳ subagent \"second\" left the queue unstarted",
                "↳ subagent \"first\" completed",
                "↳ subagent \"third\" started (scripted-subagent:local:parent, local)",
                "↳ subagent \"third\" completed",
            ]
        );
        // Both waited: the withdrawn call and the admitted one.
        assert_eq!(progress.waits().calls, 2);
    }
}
