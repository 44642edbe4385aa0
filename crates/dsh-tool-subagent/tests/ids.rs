//! The ids of kept results follow the order of the calls: parallel
//! foreground children whose results are cut are kept as `subagent-1`,
//! `subagent-2`, … in call order whatever order they finish in, and each
//! child's start request names the id its result is kept under.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::exec;
use dsh_subagent::SubagentService;
use dsh_subagent_testing::Gate;
use dsh_subagent_testing::budget::{marked_answer, noticed_task_id};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tasks::TaskRegistry;
use dsh_tasks::wording::TASK_OUTPUT;
use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::ToolRegistry;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_cut_results_are_kept_in_call_order_whatever_order_they_finish() {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let _task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    // The first call's child answers only once the second's has finished.
    let first_held = Gate::new();
    let provider = |name: &str, mark: char, gate: Option<Gate>| {
        let mut builder = ScriptedProvider::builder(name).reply(marked_answer(mark, 20_000));
        if let Some(gate) = gate {
            builder = builder.hold_result(gate);
        }
        builder.build()
    };
    let first_provider = provider("first", 'f', Some(first_held.clone()));
    let second_provider = provider("second", 's', None);
    let _registrations = [
        service.register_provider(first_provider.clone()).unwrap(),
        service.register_provider(second_provider.clone()).unwrap(),
    ];
    let _plugins = [("first", "subagent_first"), ("second", "subagent_second")].map(|(provider, tool)| {
        let config = SubagentToolConfig::new(provider).tool_name(tool);
        SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap()
    });
    let call = |tool: &str| {
        let args = json!({"description": format!("{tool} answer"), "prompt": "answer at length"});
        tools.call(tool, args, exec())
    };
    // Started in call order, as the agent loop starts one round's calls
    // (each call's first poll reserves its id).
    let mut first = Box::pin(call("subagent_first"));
    let second = call("subagent_second");
    assert!(futures::poll!(&mut first).is_pending());
    let second = second.await;
    first_held.open();
    let first = first.await;
    assert!(second.cut.is_some() && first.cut.is_some());
    assert_eq!(noticed_task_id(&first.text, TASK_OUTPUT), "subagent-1");
    assert_eq!(noticed_task_id(&second.text, TASK_OUTPUT), "subagent-2");
    let listed = tools.call("task_list", json!({}), exec()).await;
    insta::assert_snapshot!(listed.text, @r"
    subagent-1 [status: completed] (subagent: subagent_first answer)
    subagent-2 [status: completed] (subagent: subagent_second answer)
    ");
    // Each child's start named the id its result is kept under.
    let named = |provider: &ScriptedProvider| {
        let request = provider.stats().last_request().unwrap();
        request.provenance().task_id.clone()
    };
    assert_eq!(named(&first_provider).as_deref(), Some("subagent-1"));
    assert_eq!(named(&second_provider).as_deref(), Some("subagent-2"));
}

#[tokio::test]
async fn an_uncut_result_leaves_only_a_gap_and_without_task_output_nothing_is_reserved() {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let tasks = TaskRegistry::new();
    let _task_tools = TaskToolsPlugin::apply(&tasks, &tools).unwrap();
    let short = ScriptedProvider::builder("short").reply("brief").build();
    let long = ScriptedProvider::builder("long")
        .reply(marked_answer('l', 20_000))
        .build();
    let _registrations = [
        service.register_provider(short.clone()).unwrap(),
        service.register_provider(long.clone()).unwrap(),
    ];
    let _plugins = ["short", "long"].map(|name| {
        let config = SubagentToolConfig::new(name).tool_name(format!("subagent_{name}"));
        SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks).unwrap()
    });
    let args = json!({"description": "d", "prompt": "p"});
    let brief = tools.call("subagent_short", args.clone(), exec()).await;
    assert_eq!((brief.text.as_str(), brief.cut.is_none()), ("brief", true));
    let cut = tools.call("subagent_long", args.clone(), exec()).await;
    assert_eq!(noticed_task_id(&cut.text, TASK_OUTPUT), "subagent-2");
    let listed = tools.call("task_list", json!({}), exec()).await;
    assert_eq!(listed.text, "subagent-2 [status: completed] (subagent: d)");

    // Without `task_output`, nothing can keep a result: nothing is reserved
    // and the child names no task.
    let bare = ToolRegistry::new();
    let config = SubagentToolConfig::new("short").tool_name("subagent_short");
    let _plugin = SubagentToolPlugin::apply_with_tasks(config, &service, &bare, &tasks).unwrap();
    bare.call("subagent_short", args, exec()).await;
    assert_eq!(short.stats().last_request().unwrap().provenance().task_id, None);
}
