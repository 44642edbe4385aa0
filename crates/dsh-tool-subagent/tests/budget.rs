//! The result budget of `subagent`: four parallel children answering 2 MB
//! each read as head and tail with the notice, every answer pages back
//! whole through `task_output`, failures keep their code, and a kept result
//! evicted from its tree's store reads as no longer kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::exec;
use dsh_subagent::{Limits, ProviderRegistration, SubagentEvent, SubagentService};
use dsh_subagent_api::StopReason;
use dsh_subagent_testing::budget::{marked_answer, noticed_task_id, read_back};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tasks::TaskRegistry;
use dsh_tasks::wording::TASK_OUTPUT;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::budget::{PagedRead, Shown};
use dsh_tools::{ResultLimit, ToolRegistry, ToolResult};
use serde_json::json;

/// Subagent tools named `subagent_<mark>` over scripted providers that
/// answer `reply(mark)` (and stop as `stop`), the task tools, one registry.
struct World {
    service: SubagentService,
    tools: ToolRegistry,
    tasks: TaskRegistry,
    _held: Vec<(ProviderRegistration, SubagentToolPlugin)>,
    _task_tools: Option<TaskToolsPlugin>,
}

impl World {
    fn new(limits: Limits, marks: &[char], stop: StopReason, reply: impl Fn(char) -> String, tasks: bool) -> Self {
        let service = SubagentService::with_limits(limits);
        let tools = ToolRegistry::new();
        let registry = TaskRegistry::new();
        let task_tools = tasks.then(|| TaskToolsPlugin::apply(&registry, &tools).unwrap());
        let held = marks
            .iter()
            .map(|&mark| {
                let name = format!("child-{mark}");
                let provider = ScriptedProvider::builder(name.clone())
                    .reply(reply(mark))
                    .stop_reason(stop.clone())
                    .record_requests(false)
                    .build();
                let registration = service.register_provider(provider).unwrap();
                let config = SubagentToolConfig::new(name).tool_name(format!("subagent_{mark}"));
                let plugin = if tasks {
                    SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &registry).unwrap()
                } else {
                    SubagentToolPlugin::apply(config, &service, &tools).unwrap()
                };
                (registration, plugin)
            })
            .collect();
        Self {
            service,
            tools,
            tasks: registry,
            _held: held,
            _task_tools: task_tools,
        }
    }

    async fn delegate(&self, mark: char) -> ToolResult {
        let args = json!({"description": format!("answer {mark}"), "prompt": "answer at length"});
        self.tools.call(&format!("subagent_{mark}"), args, exec()).await
    }

    async fn read(&self, task_id: &str, offset: u64) -> ToolResult {
        let args = json!({"task_id": task_id, "offset": offset});
        self.tools.call(TASK_OUTPUT, args, exec()).await
    }

    /// Reads the kept text of `task_id` back whole, page by page from the
    /// start, each page within the budget.
    async fn read_back(&self, task_id: &str) -> String {
        let read = PagedRead::new(TASK_OUTPUT, task_id.to_owned());
        read_back(&self.tools, &read, &exec(), ResultLimit::DEFAULT).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_parallel_children_of_two_megabytes_each_read_as_head_and_tail_and_page_back_whole() {
    let marks = ['w', 'x', 'y', 'z'];
    let world = World::new(
        // A store of its own, so that its bytes held count this test alone.
        Limits::none().with_kept_output(dsh_tasks::DEFAULT_KEPT_BYTES),
        &marks,
        StopReason::Completed,
        |m| marked_answer(m, 1_000_000),
        true,
    );
    let results = futures::future::join_all(marks.iter().map(|&mark| world.delegate(mark))).await;
    let mut ids = Vec::new();
    for (&mark, result) in marks.iter().zip(&results) {
        let full = marked_answer(mark, 1_000_000);
        assert!(full.len() > 2_000_000, "{}", full.len());
        assert!(!result.is_error, "{}", &result.text[..200]);
        assert!(result.text.len() <= 32_000, "{}", result.text.len());
        let cut = result.cut.as_deref().unwrap();
        let Shown::HeadTail { head, tail } = cut.shown else {
            panic!("a head and a tail")
        };
        assert_eq!(cut.full.bytes as usize, full.len());
        assert!(head.chars > 3_000 && tail.chars > 3_000, "{head:?} {tail:?}");
        assert!(result.text.starts_with(&full[..head.bytes as usize]));
        assert!(result.text.ends_with(&full[full.len() - tail.bytes as usize..]));
        assert!(result.text.ends_with(&format!("<{mark} end>")));
        let id = noticed_task_id(&result.text, TASK_OUTPUT);
        let call = format!(r#"call task_output {{"task_id": "{id}", "offset": {}}}]"#, head.chars);
        assert!(
            result.text.contains(&call),
            "{}",
            &result.text[head.bytes as usize..][..400]
        );
        ids.push((mark, id, full));
    }
    // Four tasks, one per child, each paging back to exactly its answer.
    let mut distinct: Vec<&String> = ids.iter().map(|(_, id, _)| id).collect();
    distinct.dedup();
    assert_eq!(distinct.len(), 4);
    for (mark, id, full) in &ids {
        let read = world.read_back(id).await;
        assert!(
            read == *full,
            "child {mark}: {} of {} bytes read back",
            read.len(),
            full.len()
        );
    }
    // Each kept answer is in the caller's store once: the answer, not a copy per layer.
    let held = world.service.texts(&dsh_tools::AgentRef::new("parent-1")).held();
    assert_eq!(held, ids.iter().map(|(_, _, full)| full.len()).sum::<usize>());
    // No completion notice: the caller already read the result.
    assert!(world.tasks.take_notices(&"parent-1".into()).is_empty());
}

#[tokio::test]
async fn a_failure_with_a_long_partial_output_keeps_its_code_and_pages_back_its_whole_message() {
    let world = World::new(
        Limits::none(),
        &['p'],
        StopReason::MaxTokens,
        |m| marked_answer(m, 100_000),
        true,
    );
    let result = world.delegate('p').await;
    assert!(result.is_error);
    assert!(result.text.len() <= 32_000);
    assert_eq!(
        result.error.as_ref().unwrap().code(),
        Some(dsh_tool_subagent::ErrorCode::RunMaxTokens.as_str())
    );
    assert!(
        result
            .text
            .starts_with("Error: subagent run hit its token limit before finishing")
    );
    assert!(result.text.ends_with("<p end>"));
    let message = dsh_tool_subagent::wording::stopped_run(&StopReason::MaxTokens, None, &marked_answer('p', 100_000));
    let id = noticed_task_id(&result.text, TASK_OUTPUT);
    assert_eq!(world.read_back(&id).await, message);
    let first = world.read(&id, 0).await;
    assert!(
        first
            .text
            .ends_with("\n[status: failed, subagent run hit its token limit before finishing]")
    );
}

#[tokio::test]
async fn without_task_output_a_cut_says_the_rest_is_not_kept() {
    let world = World::new(
        Limits::none(),
        &['n'],
        StopReason::Completed,
        |m| marked_answer(m, 100_000),
        false,
    );
    let result = world.delegate('n').await;
    assert!(!result.is_error);
    assert!(result.text.len() <= 32_000);
    assert_eq!(result.cut.as_deref().unwrap().read, None);
    let notice = result.text.split("\n\n").nth(1).unwrap();
    insta::assert_snapshot!("cut_not_kept", notice);
}

#[tokio::test]
async fn an_answer_within_the_budget_is_unchanged_and_a_tool_may_set_its_own_budget() {
    let world = World::new(
        Limits::none(),
        &['s'],
        StopReason::Completed,
        |_| "s".repeat(32_000),
        true,
    );
    let result = world.delegate('s').await;
    assert_eq!(result.text, "s".repeat(32_000));
    assert_eq!(result.cut, None);
    assert!(world.tasks.list(&"parent-1".into()).is_empty(), "nothing kept");

    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let _task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    let _registration = service
        .register_provider(ScriptedProvider::builder("small").reply("m".repeat(5_000)).build())
        .unwrap();
    let config = SubagentToolConfig::from_json(&json!({"provider": "small", "resultLimit": 256})).unwrap();
    let _plugin = SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap();
    let result = tools
        .call("subagent", json!({"description": "small", "prompt": "p"}), exec())
        .await;
    assert!(result.text.len() <= 1_024, "{}", result.text.len());
    assert!(
        result
            .text
            .contains(r#"task_output {"task_id": "subagent-1", "offset": "#)
    );
}

#[tokio::test]
async fn a_kept_answer_evicted_from_its_services_store_reads_as_no_longer_kept() {
    // The service keeps 3 MB: the second answer of 2 MB evicts the first.
    let world = World::new(
        Limits::none().with_kept_output(3_000_000),
        &['e', 'f'],
        StopReason::Completed,
        |m| marked_answer(m, 1_000_000),
        true,
    );
    let tree = world.service.open_tree();
    let parent = dsh_tools::AgentRef::new("parent-1").with_lineage(tree.lineage());
    let call = |mark: char| {
        let args = json!({"description": format!("answer {mark}"), "prompt": "p"});
        let exec = dsh_tools::ToolExecution::new(dsh_tools::CancellationToken::new()).with_agent(parent.clone());
        let tools = world.tools.clone();
        async move { tools.call(&format!("subagent_{mark}"), args, exec).await }
    };
    let first = call('e').await;
    let second = call('f').await;
    let (first, second) = (
        noticed_task_id(&first.text, TASK_OUTPUT),
        noticed_task_id(&second.text, TASK_OUTPUT),
    );
    assert_eq!(world.service.texts(&parent).held(), marked_answer('f', 1_000_000).len());
    // Every tree of the service shares its store, and so its bound.
    assert_eq!(
        world.service.texts(&dsh_tools::AgentRef::new("other")),
        world.service.texts(&parent)
    );
    let gone = world.read(&first, 16_000).await;
    assert!(!gone.is_error, "not a failure of the child");
    insta::assert_snapshot!("evicted", gone.text);
    let kept = world.read_back(&second).await;
    assert_eq!(kept, marked_answer('f', 1_000_000));
}

#[tokio::test]
async fn a_cut_is_announced_to_run_listeners() {
    let world = World::new(
        Limits::none(),
        &['c'],
        StopReason::Completed,
        |m| marked_answer(m, 100_000),
        true,
    );
    let cuts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = cuts.clone();
    let _subscription = world
        .service
        .subscribe(std::sync::Arc::new(move |event: &SubagentEvent| {
            if let SubagentEvent::ResultCut(cut) = event {
                seen.lock().unwrap().push(cut.clone());
            }
            Ok(())
        }));
    let result = world.delegate('c').await;
    let cuts = cuts.lock().unwrap();
    let [cut] = &cuts[..] else { panic!("one cut: {cuts:?}") };
    assert_eq!(cut.label.as_deref(), Some("answer c"));
    assert_eq!(cut.depth, 1);
    assert_eq!(cut.full.bytes as usize, marked_answer('c', 100_000).len());
    assert_eq!(cut.shown, result.cut.as_deref().unwrap().shown.size());
    assert_eq!(
        cut.task_id.as_deref(),
        Some(noticed_task_id(&result.text, TASK_OUTPUT).as_str())
    );
}

#[tokio::test]
async fn an_answer_larger_than_the_whole_store_is_not_kept_and_its_notice_says_so() {
    let world = World::new(
        Limits::none().with_kept_output(100_000),
        &['k', 'b'],
        StopReason::Completed,
        |m| match m {
            'k' => marked_answer(m, 20_000),
            _ => marked_answer(m, 100_000),
        },
        true,
    );
    let small = world.delegate('k').await;
    let small_id = noticed_task_id(&small.text, TASK_OUTPUT);
    let held = world.service.texts(&dsh_tools::AgentRef::new("parent-1")).held();
    assert_eq!(held, marked_answer('k', 20_000).len());
    let big = world.delegate('b').await;
    assert!(!big.is_error);
    assert!(big.text.len() <= ResultLimit::DEFAULT.bytes());
    assert!(
        big.text.contains(" in between are not kept]"),
        "{}",
        &big.text[..big.text.len().min(400)]
    );
    assert!(!big.text.contains("call task_output"));
    assert_eq!(big.cut.as_deref().unwrap().read, None);
    // Nothing was evicted for it, and no task was recorded.
    assert_eq!(world.service.texts(&dsh_tools::AgentRef::new("parent-1")).held(), held);
    assert_eq!(world.read_back(&small_id).await, marked_answer('k', 20_000));
    let listed = world.tools.call("task_list", json!({}), exec()).await;
    assert_eq!(listed.text.lines().count(), 1, "{}", listed.text);
}
