//! The tools of an MCP server answer within a result budget: a 200 KB
//! answer reads as its head and tail around a notice, its whole text kept
//! as a finished `mcp-<n>` task of the caller that `task_output` reads
//! page by page; without a shelf the notice says the rest is not kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_mcp::{ClientOptions, McpMount, McpServerSpec};
use dsh_subagent_testing::budget::{noticed_task_id, read_back};
use dsh_tasks::wording::{MCP_RESULT_KIND, TASK_OUTPUT};
use dsh_tasks::{TaskRegistry, TextStore};
use dsh_tool_tasks::{TaskShelf, TaskToolsPlugin};
use dsh_tools::ResultPolicy;
use dsh_tools::budget::{PagedRead, Shown};
use dsh_tools::{AgentRef, CancellationToken, ResultLimit, ToolExecution, ToolRegistry};
use serde_json::json;

/// The test MCP server, built by `dsh-test-programs`.
fn server() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        dsh_test_programs::Program::McpTestServer
            .path()
            .into_os_string()
            .into_string()
            .unwrap()
    })
}

/// What the test server's `big` tool answers for `bytes`.
fn big(bytes: u64) -> String {
    (0..bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect()
}

fn exec(agent: &str) -> ToolExecution {
    ToolExecution::new(CancellationToken::new()).with_agent(AgentRef::new(agent))
}

/// The test server mounted as `t` beside the task tools, its results
/// within `budget` and kept in a store of `kept` bytes.
struct World {
    tools: ToolRegistry,
    tasks: TaskRegistry,
    mount: McpMount,
    _task_tools: TaskToolsPlugin,
}

impl World {
    async fn new(budget: ResultLimit, kept: usize, shelf: bool) -> Self {
        let tools = ToolRegistry::new();
        let tasks = TaskRegistry::new().kept_in(TextStore::new(kept));
        let task_tools = TaskToolsPlugin::apply_within(&tasks, &tools, budget).unwrap();
        let mut results = ResultPolicy::new(budget);
        if shelf {
            results = results.kept_on(Arc::new(TaskShelf::new(tasks.clone(), tools.clone(), MCP_RESULT_KIND)));
        }
        let spec = McpServerSpec::new("t", server(), Vec::<String>::new()).unwrap();
        let mount = McpMount::start(&spec, &tools, &ClientOptions::default().results(results))
            .await
            .unwrap();
        Self {
            tools,
            tasks,
            mount,
            _task_tools: task_tools,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_kb_answer_reads_as_head_and_tail_and_pages_back_whole_with_task_output() {
    let world = World::new(ResultLimit::DEFAULT, 1_000_000, true).await;
    let full = big(200_000);
    let result = world
        .tools
        .call("mcp__t__big", json!({"bytes": 200_000}), exec("parent"))
        .await;
    assert!(!result.is_error);
    assert!(
        result.text.len() <= ResultLimit::DEFAULT.bytes(),
        "{}",
        result.text.len()
    );
    let cut = result.cut.as_deref().unwrap();
    let Shown::HeadTail { head, tail } = cut.shown else {
        panic!("a head and a tail: {cut:?}")
    };
    assert_eq!(cut.full.bytes, 200_000);
    assert!(result.text.starts_with(&full[..head.bytes as usize]));
    assert!(result.text.ends_with(&full[full.len() - tail.bytes as usize..]));
    let id = noticed_task_id(&result.text, TASK_OUTPUT);
    assert_eq!(id, "mcp-1");
    let call = format!(r#"call task_output {{"task_id": "mcp-1", "offset": {}}}]"#, head.chars);
    assert!(
        result.text.contains(&call),
        "{}",
        &result.text[head.bytes as usize..][..300]
    );
    // The whole answer, page by page; no second call of the server's tool.
    let read = PagedRead::new(TASK_OUTPUT, id.clone());
    let back = read_back(&world.tools, &read, &exec("parent"), ResultLimit::DEFAULT).await;
    assert_eq!(back, full);
    let listed = world.tools.call("task_list", json!({}), exec("parent")).await;
    assert_eq!(listed.text, "mcp-1 [status: completed] (mcp: mcp__t__big)");
    // Another agent cannot read it.
    let foreign = world
        .tools
        .call(TASK_OUTPUT, json!({"task_id": id}), exec("other"))
        .await;
    assert!(foreign.is_error);
    // An answer within the budget is unchanged and keeps nothing.
    let small = world
        .tools
        .call("mcp__t__big", json!({"bytes": 32_000}), exec("parent"))
        .await;
    assert_eq!((small.text, small.cut), (big(32_000), None));
    assert_eq!(world.tasks.texts().held(), 200_000);
    world.mount.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_error_result_stays_an_error_with_its_code_and_pages_back_whole() {
    let budget = ResultLimit::new(1_000).unwrap();
    let world = World::new(budget, 1_000_000, true).await;
    let result = world
        .tools
        .call("mcp__t__big", json!({"bytes": 50_000, "fail": true}), exec("parent"))
        .await;
    assert!(result.is_error);
    assert!(result.text.starts_with("Error: abc"));
    assert!(result.text.len() <= budget.bytes());
    assert_eq!(result.error.as_ref().unwrap().code(), Some("MCP_TOOL_ERROR"));
    let id = noticed_task_id(&result.text, TASK_OUTPUT);
    let read = PagedRead::new(TASK_OUTPUT, id.clone());
    assert_eq!(
        read_back(&world.tools, &read, &exec("parent"), budget).await,
        big(50_000)
    );
    let listed = world.tools.call("task_list", json!({}), exec("parent")).await;
    let detail = format!("{}…", &big(50_000)[..200]);
    assert_eq!(
        listed.text,
        format!("{id} [status: failed, {detail}] (mcp: mcp__t__big)")
    );
    world.mount.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_shelf_or_room_the_notice_says_the_rest_is_not_kept() {
    // No shelf: cut all the same, nothing kept.
    let world = World::new(ResultLimit::DEFAULT, 1_000_000, false).await;
    let result = world
        .tools
        .call("mcp__t__big", json!({"bytes": 200_000}), exec("parent"))
        .await;
    assert!(result.text.len() <= ResultLimit::DEFAULT.bytes());
    assert!(result.text.contains(" in between are not kept]"));
    assert_eq!(
        world.tools.call("task_list", json!({}), exec("parent")).await.text,
        "(no tasks)"
    );
    world.mount.release().await.unwrap();
    // A store smaller than the answer: not kept, and no task recorded.
    let world = World::new(ResultLimit::DEFAULT, 100_000, true).await;
    let result = world
        .tools
        .call("mcp__t__big", json!({"bytes": 200_000}), exec("parent"))
        .await;
    assert!(result.text.contains(" in between are not kept]"));
    assert_eq!(world.tasks.texts().held(), 0);
    // No calling agent: nobody to keep it for.
    let anonymous = world
        .tools
        .call(
            "mcp__t__big",
            json!({"bytes": 50_000}),
            ToolExecution::new(CancellationToken::new()),
        )
        .await;
    assert!(anonymous.text.contains(" in between are not kept]"));
    world.mount.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_results_are_kept_under_ids_in_call_order_whatever_order_they_finish() {
    let world = World::new(ResultLimit::DEFAULT, 1_000_000, true).await;
    let call = |bytes: u64| world.tools.call("mcp__t__big", json!({"bytes": bytes}), exec("parent"));
    // Started in call order, as the calls of one round are (each first
    // poll takes its id), then the second finished and kept first.
    let mut first = Box::pin(call(100_000));
    let mut second = Box::pin(call(120_000));
    assert!(futures::poll!(&mut first).is_pending());
    assert!(futures::poll!(&mut second).is_pending());
    let second = second.await;
    let first = first.await;
    assert_eq!(noticed_task_id(&second.text, TASK_OUTPUT), "mcp-2");
    assert_eq!(noticed_task_id(&first.text, TASK_OUTPUT), "mcp-1");
    let listed = world.tools.call("task_list", json!({}), exec("parent")).await;
    assert_eq!(
        listed.text,
        "mcp-1 [status: completed] (mcp: mcp__t__big)\nmcp-2 [status: completed] (mcp: mcp__t__big)"
    );
    // A call within the budget took an id too, never used: a gap.
    let small = call(1_000).await;
    assert_eq!(small.cut, None);
    let third = call(100_000).await;
    assert_eq!(noticed_task_id(&third.text, TASK_OUTPUT), "mcp-4");
    world.mount.release().await.unwrap();
}
