//! Bounded delegation (docs/design.md, "Bounded delegation"): one admission
//! gate per tree, its FIFO queue, the lending rule that keeps waiting
//! parents from deadlocking, refusals, time limits and token budgets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_subagent::{Limits, SubagentEvent, SubagentService, settle};
use dsh_subagent_api::{
    AgentRef, BoxFuture, BudgetScope, CancellationToken, Capabilities, ChildCount, ContentBlock, CostLimit, Lineage,
    QueueLimit, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentResult, SubagentRun, concat_text,
};
use futures::future::join_all;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// What the instrumented provider saw.
#[derive(Default)]
struct Stats {
    /// Agents doing their own work now (not waiting for their children).
    working: AtomicUsize,
    most_working: AtomicUsize,
    started: Mutex<Vec<String>>,
    disposes: Mutex<HashMap<String, usize>>,
    live: AtomicUsize,
    lineages: Mutex<Vec<Lineage>>,
}

/// One agent at work; dropped (the work ended, or its future was dropped
/// with it), it is counted out.
struct Working<'a>(&'a Stats);

impl Drop for Working<'_> {
    fn drop(&mut self) {
        self.0.working.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Stats {
    fn work(&self) -> Working<'_> {
        let now = self.working.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_working.fetch_max(now, Ordering::SeqCst);
        Working(self)
    }

    fn most_working(&self) -> usize {
        self.most_working.load(Ordering::SeqCst)
    }

    fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }

    /// Every started child was released exactly once, and none is live.
    fn assert_each_released_once(&self) {
        let started = self.started();
        let disposes = self.disposes.lock().unwrap();
        for id in &started {
            assert_eq!(disposes.get(id), Some(&1), "{id} released once");
        }
        assert_eq!(disposes.len(), started.len(), "nothing released that was not started");
        assert_eq!(self.live.load(Ordering::SeqCst), 0, "no child left behind");
    }
}

/// One agent of a test tree: it works, delegates its children in the
/// foreground (all at once), waits for them, works again and answers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Plan {
    children: Vec<Plan>,
    /// Virtual milliseconds of work before and after delegating.
    work_ms: u64,
    /// The run ends `error` instead of `completed`.
    fails: bool,
    /// The start itself fails.
    refuses: bool,
    /// The call that starts it is cancelled this many ms after it is made.
    cancel_after_ms: Option<u64>,
}

/// A provider whose children are [`Plan`]s: it delegates through the
/// service, each child's request carrying the lineage the service gave
/// its parent, as an in-process agent does.
struct TreeProvider {
    service: SubagentService,
    stats: Arc<Stats>,
    next: AtomicUsize,
}

impl SubagentProvider for TreeProvider {
    fn name(&self) -> &str {
        "tree"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        let plan: Plan = serde_json::from_str(&concat_text(&request.prompt)).unwrap();
        let id = match &request.label {
            Some(label) => label.clone(),
            None => format!("child-{}", self.next.fetch_add(1, Ordering::SeqCst)),
        };
        Box::pin(async move {
            if plan.refuses {
                return Err(SubagentError::failed("refused by plan"));
            }
            self.stats.started.lock().unwrap().push(id.clone());
            self.stats.live.fetch_add(1, Ordering::SeqCst);
            let me = AgentRef::new(id.as_str())
                .with_depth(request.parent.depth() + 1)
                .with_lineage(request.lineage.clone());
            let (service, stats, cancel) = (self.service.clone(), self.stats.clone(), request.cancel.clone());
            let result = async move { Ok(run_plan(&service, &stats, &me, &plan, &cancel).await) };
            let (stats, released) = (self.stats.clone(), id.clone());
            Ok(SubagentRun::new(id, result, move || async move {
                *stats.disposes.lock().unwrap().entry(released).or_default() += 1;
                stats.live.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }))
        })
    }
}

async fn run_plan(
    service: &SubagentService,
    stats: &Stats,
    me: &AgentRef,
    plan: &Plan,
    cancel: &CancellationToken,
) -> SubagentResult {
    let working = stats.work();
    tokio::time::sleep(Duration::from_millis(plan.work_ms)).await;
    drop(working);
    let children = plan.children.iter().enumerate().map(|(index, child)| {
        let label = format!("{}.{index}", me.id());
        delegate(service, me, child, label, cancel)
    });
    join_all(children).await;
    let working = stats.work();
    tokio::time::sleep(Duration::from_millis(plan.work_ms)).await;
    drop(working);
    if cancel.is_cancelled() {
        return SubagentResult::new(StopReason::Aborted, Vec::new());
    }
    let stop = if plan.fails {
        StopReason::Error
    } else {
        StopReason::Completed
    };
    SubagentResult::new(stop, vec![ContentBlock::text(me.id().as_str())])
}

/// One foreground delegation, settled and released as the tool does.
async fn delegate(
    service: &SubagentService,
    parent: &AgentRef,
    plan: &Plan,
    label: String,
    cancel: &CancellationToken,
) -> Result<SubagentResult, SubagentError> {
    let call = cancel.child_token();
    if let Some(after) = plan.cancel_after_ms {
        let call = call.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after)).await;
            call.cancel();
        });
    }
    let mut request = StartRequest::text(serde_json::to_string(plan).unwrap(), parent.clone(), call.clone());
    request.label = Some(label);
    let run = service.start("tree", request).await?;
    let settled = settle(run, &call).await;
    settled.disposed?;
    settled.result
}

fn tree_service(limits: Limits) -> (SubagentService, Arc<Stats>, dsh_subagent::ProviderRegistration) {
    let service = SubagentService::with_limits(limits);
    let stats = Arc::new(Stats::default());
    let provider = Arc::new(TreeProvider {
        service: service.clone(),
        stats: stats.clone(),
        next: AtomicUsize::new(0),
    });
    let registration = service.register_provider(provider).unwrap();
    (service, stats, registration)
}

/// Runs `plan` as the work of a top-level agent in a tree of its own.
async fn run_tree(service: &SubagentService, stats: &Stats, plan: &Plan) -> SubagentResult {
    let root = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    run_plan(service, stats, &root, plan, &CancellationToken::new()).await
}

fn chain(depth: usize) -> Plan {
    (0..depth).fold(Plan::default(), |child, _| Plan {
        children: vec![child],
        work_ms: 1,
        ..Plan::default()
    })
}

fn full_tree(levels: usize, fan_out: usize) -> Plan {
    let mut plan = Plan {
        work_ms: 1,
        ..Plan::default()
    };
    for _ in 0..levels {
        plan = Plan {
            children: vec![plan; fan_out],
            work_ms: 1,
            ..Plan::default()
        };
    }
    plan
}

#[tokio::test(start_paused = true)]
async fn a_chain_of_depth_four_completes_under_max_concurrent_one() {
    let (service, stats, _registration) = tree_service(Limits::none().with_max_concurrent(ChildCount::MIN));
    let plan = chain(4);
    let finished = tokio::time::timeout(Duration::from_secs(60), run_tree(&service, &stats, &plan)).await;
    assert_eq!(finished.expect("no deadlock").stop_reason, StopReason::Completed);
    assert_eq!(stats.started().len(), 4);
    assert_eq!(
        stats.most_working(),
        1,
        "the root works alone, then one agent at a time"
    );
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_tree_of_two_foreground_children_three_levels_deep_completes_under_max_concurrent_two() {
    let (service, stats, _registration) = tree_service(Limits::none().with_max_concurrent(ChildCount::new(2).unwrap()));
    let plan = full_tree(3, 2);
    let finished = tokio::time::timeout(Duration::from_secs(60), run_tree(&service, &stats, &plan)).await;
    assert_eq!(finished.expect("no deadlock").stop_reason, StopReason::Completed);
    assert_eq!(stats.started().len(), 2 + 4 + 8);
    assert_eq!(stats.most_working(), 2, "never more than two at work");
    stats.assert_each_released_once();
}

/// A provider that counts what runs at once: each child holds its slot
/// until its result settles, `hold` virtual ms after its start.
struct Counting {
    stats: Arc<Stats>,
    hold: Duration,
}

impl SubagentProvider for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        let id = request.label.clone().unwrap();
        self.stats.lineages.lock().unwrap().push(request.lineage.clone());
        self.stats.started.lock().unwrap().push(id.clone());
        self.stats.live.fetch_add(1, Ordering::SeqCst);
        let (stats, hold, cancel) = (self.stats.clone(), self.hold, request.cancel.clone());
        let result = async move {
            let working = stats.work();
            let stop = tokio::select! {
                () = tokio::time::sleep(hold) => StopReason::Completed,
                () = cancel.cancelled() => StopReason::Aborted,
            };
            drop(working);
            Ok(SubagentResult::new(stop, vec![ContentBlock::text("partial")]))
        };
        let (stats, released) = (self.stats.clone(), id.clone());
        Box::pin(async move {
            Ok(SubagentRun::new(id, result, move || async move {
                *stats.disposes.lock().unwrap().entry(released).or_default() += 1;
                stats.live.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }))
        })
    }
}

fn counting_service(
    limits: Limits,
    hold: Duration,
) -> (SubagentService, Arc<Stats>, dsh_subagent::ProviderRegistration) {
    let service = SubagentService::with_limits(limits);
    let stats = Arc::new(Stats::default());
    let registration = service
        .register_provider(Arc::new(Counting {
            stats: stats.clone(),
            hold,
        }))
        .unwrap();
    (service, stats, registration)
}

fn labelled(label: impl Into<String>, parent: &AgentRef, cancel: &CancellationToken) -> StartRequest {
    let mut request = StartRequest::text("go", parent.clone(), cancel.clone());
    request.label = Some(label.into());
    request
}

async fn call(service: &SubagentService, request: StartRequest) -> Result<SubagentResult, SubagentError> {
    let cancel = request.cancel.clone();
    let settled = settle(service.start("counting", request).await?, &cancel).await;
    settled.disposed?;
    settled.result
}

#[tokio::test(start_paused = true)]
async fn a_thousand_calls_through_four_slots_run_four_at_a_time_in_call_order() {
    let (service, stats, _registration) = counting_service(
        Limits::none().with_max_concurrent(ChildCount::new(4).unwrap()),
        Duration::from_millis(10),
    );
    let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    let queued = Arc::new(AtomicUsize::new(0));
    let counter = queued.clone();
    let _subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        if matches!(event, SubagentEvent::RunQueued(_)) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }));
    let calls = (0..1000).map(|n| {
        call(
            &service,
            labelled(format!("{n:04}"), &parent, &CancellationToken::new()),
        )
    });
    let results = join_all(calls).await;
    assert!(
        results
            .iter()
            .all(|result| result.as_ref().unwrap().stop_reason.is_completed())
    );
    assert_eq!(stats.most_working(), 4, "never more than four at once");
    let started = stats.started();
    let mut in_call_order = started.clone();
    in_call_order.sort();
    assert_eq!(started, in_call_order, "admitted first come, first served");
    assert_eq!(started.len(), 1000);
    assert_eq!(queued.load(Ordering::SeqCst), 996, "all but the first four waited");
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_and_the_child_limit_refuse_at_once_with_nothing_started() {
    let (service, stats, _registration) = counting_service(
        Limits::none()
            .with_max_concurrent(ChildCount::MIN)
            .with_max_queued(QueueLimit::new(1))
            .with_max_children(ChildCount::new(3).unwrap()),
        Duration::from_millis(10),
    );
    let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    let running = call(&service, labelled("a", &parent, &CancellationToken::new()));
    let waiting = call(&service, labelled("b", &parent, &CancellationToken::new()));
    let refused = async {
        tokio::task::yield_now().await;
        service
            .start("counting", labelled("c", &parent, &CancellationToken::new()))
            .await
            .unwrap_err()
    };
    let (a, b, refused) = tokio::join!(running, waiting, refused);
    assert!(a.unwrap().stop_reason.is_completed() && b.unwrap().stop_reason.is_completed());
    assert_eq!(refused.code(), "QUEUE_FULL");
    insta::assert_snapshot!("queue_full", refused.to_string());
    assert_eq!(stats.started(), ["a", "b"], "the refused call started nothing");

    call(&service, labelled("d", &parent, &CancellationToken::new()))
        .await
        .unwrap();
    let over = service
        .start("counting", labelled("e", &parent, &CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(over.code(), "CHILD_LIMIT");
    insta::assert_snapshot!("child_limit", over.to_string());
    assert_eq!(stats.started(), ["a", "b", "d"]);
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiting_call_leaves_the_queue_and_gives_its_child_back() {
    let (service, stats, _registration) = counting_service(
        Limits::none()
            .with_max_concurrent(ChildCount::MIN)
            .with_max_children(ChildCount::new(2).unwrap()),
        Duration::from_millis(50),
    );
    let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let _subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        sink.lock().unwrap().push(event.name());
        Ok(())
    }));
    let cancel = CancellationToken::new();
    let waiting = labelled("waits", &parent, &cancel);
    let (first, cancelled) = tokio::join!(
        call(&service, labelled("first", &parent, &CancellationToken::new())),
        async {
            let start = service.start("counting", waiting);
            let cancelling = async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                cancel.cancel();
            };
            tokio::join!(start, cancelling).0
        }
    );
    assert!(first.unwrap().stop_reason.is_completed());
    let cancelled = cancelled.unwrap_err();
    assert_eq!(cancelled.to_string(), "subagent run was cancelled");
    assert_eq!(cancelled.code(), "ABORTED");
    assert_eq!(stats.started(), ["first"], "the cancelled call never started a child");
    // Its reservation was given back: a second child may still start.
    call(&service, labelled("second", &parent, &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(
        *events.lock().unwrap(),
        [
            "subagent/start",
            "subagent/queued",
            "subagent/withdrawn",
            "subagent/end",
            "subagent/start",
            "subagent/end"
        ]
    );
    stats.assert_each_released_once();
}

/// A cancelled turn withdraws its queued calls, always. The turn's running
/// child settles on the same cancellation and frees its slot; that slot
/// must not go to a call of the cancelled turn. The round is played 1,000
/// times on two worker threads, so the child's release and the waiters'
/// wake-up on the cancellation meet in every order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_cancel_no_queued_call_of_the_turn_starts() {
    const QUEUED: usize = 3;
    for round in 0..1000 {
        let (service, stats, registration) = counting_service(
            Limits::none().with_max_concurrent(ChildCount::MIN),
            Duration::from_secs(3600),
        );
        let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
        let turn = CancellationToken::new();
        // Each call reserves its place when `start` is called: the running
        // call first, then the queued ones, in this order.
        let (reserved, mut reservations) = tokio::sync::mpsc::unbounded_channel();
        let mut calls = Vec::new();
        for label in std::iter::once("running".to_owned()).chain((0..QUEUED).map(|n| format!("queued-{n}"))) {
            let (service, request, reserved, cancel) = (
                service.clone(),
                labelled(label, &parent, &turn),
                reserved.clone(),
                turn.clone(),
            );
            calls.push(tokio::spawn(async move {
                let start = service.start("counting", request);
                reserved.send(()).unwrap();
                let run = start.await?;
                let settled = settle(run, &cancel).await;
                settled.disposed?;
                settled.result
            }));
            reservations.recv().await.unwrap();
        }
        while stats.started().is_empty() {
            tokio::task::yield_now().await;
        }
        turn.cancel();
        let mut outcomes = Vec::new();
        for call in calls {
            outcomes.push(call.await.unwrap());
        }
        assert_eq!(
            stats.started(),
            ["running"],
            "round {round}: a queued call of the cancelled turn started"
        );
        assert_eq!(outcomes[0].as_ref().unwrap().stop_reason, StopReason::Aborted);
        for outcome in &outcomes[1..] {
            assert_eq!(
                outcome.as_ref().unwrap_err().to_string(),
                "subagent run was cancelled",
                "round {round}"
            );
        }
        stats.assert_each_released_once();
        drop(registration);
    }
}

#[tokio::test(start_paused = true)]
async fn a_child_past_its_time_limit_is_cancelled_and_keeps_its_partial_output() {
    let (service, stats, _registration) = counting_service(Limits::none(), Duration::from_secs(3600));
    let mut request = labelled("slow", &AgentRef::new("root"), &CancellationToken::new());
    request.settings_mut().timeout = Some(Duration::from_secs(600));
    let started = tokio::time::Instant::now();
    let result = call(&service, request).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_secs(600));
    assert_eq!(
        result.stop_reason,
        StopReason::Other("time limit of 10 min reached".into())
    );
    insta::assert_snapshot!("time_limit_stop_reason", result.stop_reason.as_str());
    assert_eq!(result.text(), "partial");
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_child_inherits_the_earlier_deadline_of_its_parent() {
    let (service, stats, _registration) = counting_service(Limits::none(), Duration::from_millis(1));
    let inherited = tokio::time::Instant::now() + Duration::from_secs(5);
    let parent = AgentRef::new("root").with_lineage(Lineage::new().with_deadline(inherited));
    let mut expected = Vec::new();
    for (label, timeout) in [("long", 60), ("short", 1)] {
        let mut request = labelled(label, &parent, &CancellationToken::new());
        request.settings_mut().timeout = Some(Duration::from_secs(timeout));
        expected.push(Some(
            inherited.min(tokio::time::Instant::now() + Duration::from_secs(timeout)),
        ));
        call(&service, request).await.unwrap();
    }
    let deadlines: Vec<_> = stats.lineages.lock().unwrap().iter().map(Lineage::deadline).collect();
    assert_eq!(deadlines, expected);
    assert_eq!(expected[0], Some(inherited), "the parent's deadline was the earlier");
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_refuses_the_start_naming_whose_budget_it_was() {
    let (service, stats, _registration) = counting_service(
        Limits::none().with_token_limit(dsh_subagent_api::TokenLimit::new(100).unwrap()),
        Duration::from_millis(1),
    );
    let tree = service.open_tree();
    let lineage = tree.lineage();
    let parent = AgentRef::new("root").with_lineage(lineage.clone());
    call(&service, labelled("before", &parent, &CancellationToken::new()))
        .await
        .unwrap();
    lineage.spend(100);
    let refused = service
        .start("counting", labelled("after", &parent, &CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "TOKEN_BUDGET_SPENT");
    assert!(matches!(
        refused,
        SubagentError::TokenBudgetSpent {
            scope: BudgetScope::Tree,
            spent: 100,
            limit: 100
        }
    ));
    insta::assert_snapshot!("tree_budget_spent", refused.to_string());
    assert_eq!(stats.started(), ["before"]);
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn a_spent_cost_budget_refuses_the_start_and_every_child_spends_from_it() {
    // 0.5 units, in billionths.
    let (service, stats, _registration) = counting_service(
        Limits::none().with_cost_limit(CostLimit::from_nanos(500_000_000).unwrap()),
        Duration::from_millis(1),
    );
    let tree = service.open_tree();
    let lineage = tree.lineage();
    let parent = AgentRef::new("root").with_lineage(lineage.clone());
    call(&service, labelled("before", &parent, &CancellationToken::new()))
        .await
        .unwrap();
    let child = stats.lineages.lock().unwrap()[0].clone();
    let budget = child.cost_budget().unwrap();
    assert!(
        Arc::ptr_eq(budget, lineage.cost_budget().unwrap()),
        "a child spends from its tree's budget"
    );
    child.spend_cost(200_000_000, true);
    assert_eq!(
        budget.remaining(),
        300_000_000,
        "what a child may spend is what the tree has left"
    );
    lineage.spend_cost(300_000_000, false);
    let refused = service
        .start("counting", labelled("after", &parent, &CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "COST_BUDGET_SPENT");
    assert!(matches!(
        refused,
        SubagentError::CostBudgetSpent {
            spent: 500_000_000,
            limit: 500_000_000,
            estimated: true
        }
    ));
    insta::assert_snapshot!("tree_cost_budget_spent", refused.to_string());
    assert_eq!(stats.started(), ["before"]);
    stats.assert_each_released_once();
}

#[tokio::test(start_paused = true)]
async fn background_calls_are_queued_or_refused_when_they_are_made() {
    let (service, stats, _registration) = counting_service(
        Limits::none()
            .with_max_concurrent(ChildCount::MIN)
            .with_max_queued(QueueLimit::new(1)),
        Duration::from_millis(10),
    );
    let tasks = dsh_tasks::TaskRegistry::new();
    let parent = AgentRef::new("root").with_lineage(service.open_tree().lineage());
    let first = service
        .start_as_task(
            &tasks,
            "counting",
            "first".into(),
            labelled("first", &parent, &CancellationToken::new()),
        )
        .unwrap();
    let second = service
        .start_as_task(
            &tasks,
            "counting",
            "second".into(),
            labelled("second", &parent, &CancellationToken::new()),
        )
        .unwrap();
    let refused = service
        .start_as_task(
            &tasks,
            "counting",
            "third".into(),
            labelled("third", &parent, &CancellationToken::new()),
        )
        .unwrap_err();
    assert_eq!(refused.code(), "QUEUE_FULL");
    for id in [first, second] {
        let task = tasks.wait(&id, parent.id(), None).await.unwrap();
        assert_eq!(task.status, dsh_tasks::TaskStatus::Completed, "{id}");
    }
    assert_eq!(stats.started(), ["first", "second"]);
    assert_eq!(stats.most_working(), 1);
    stats.assert_each_released_once();
}

#[tokio::test]
async fn without_limits_nothing_waits() {
    let (service, stats, _registration) = counting_service(Limits::none(), Duration::from_millis(20));
    let parent = AgentRef::new("root");
    let calls = (0..50).map(|n| {
        call(
            &service,
            labelled(format!("{n:02}"), &parent, &CancellationToken::new()),
        )
    });
    join_all(calls).await;
    assert_eq!(stats.most_working(), 50, "a service without limits gates nothing");
    stats.assert_each_released_once();
}

/// Random trees (depth ≤ 4, fan-out ≤ 5), random caps, random
/// cancellations and failures: every case completes, no more children work
/// at once than the cap allows, and every started child is released once.
fn plan_strategy() -> impl Strategy<Value = Plan> {
    let leaf = (
        0..3_u64,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.05),
        prop::option::weighted(0.1, 0..20_u64),
    )
        .prop_map(|(work_ms, fails, refuses, cancel_after_ms)| Plan {
            children: Vec::new(),
            work_ms,
            fails,
            refuses,
            cancel_after_ms,
        });
    leaf.prop_recursive(4, 120, 5, |inner| {
        (
            prop::collection::vec(inner, 0..=5),
            0..3_u64,
            prop::bool::weighted(0.1),
            prop::option::weighted(0.05, 0..40_u64),
        )
            .prop_map(|(children, work_ms, fails, cancel_after_ms)| Plan {
                children,
                work_ms,
                fails,
                refuses: false,
                cancel_after_ms,
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_trees_never_deadlock_nor_exceed_the_cap(
        plan in plan_strategy(),
        max_concurrent in 1..4_usize,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let (service, stats, _registration) = tree_service(Limits::none().with_max_concurrent(ChildCount::new(max_concurrent).unwrap()));
            let finished = tokio::time::timeout(Duration::from_secs(3600), run_tree(&service, &stats, &plan)).await;
            prop_assert!(finished.is_ok(), "deadlock: {plan:?}");
            // The root works only while none of its children does.
            prop_assert!(stats.most_working() <= max_concurrent, "{} working under {max_concurrent}", stats.most_working());
            stats.assert_each_released_once();
            Ok(())
        })?;
    }
}
