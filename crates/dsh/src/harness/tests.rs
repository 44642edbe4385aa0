#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use dsh_agent::AgentObserver;

use super::Surface;
use crate::cli::AgentArgs;
use crate::observe::TreeObserver;
use crate::runtime::SharedRuntime;

/// An observer that shows nothing, for the runtimes these tests build.
struct Quiet;
impl AgentObserver for Quiet {}
impl TreeObserver for Quiet {}

/// A shared runtime on `surface` with `data_dir`, configured by `dsh_toml`
/// (none when empty), whose scripted model follows `script`.
fn shared_runtime(dsh_toml: &str, script: &str, data_dir: Option<&Path>, surface: Surface) -> SharedRuntime {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script).unwrap();
    let config =
        (!dsh_toml.is_empty()).then(|| crate::config::parse(Path::new("dsh.toml"), dsh_toml, dir.path()).unwrap());
    let args = AgentArgs {
        script: Some(script_path),
        ..AgentArgs::plain()
    };
    match SharedRuntime::new(&args, config.as_ref(), data_dir, Arc::new(Quiet), surface) {
        Ok(shared) => shared,
        Err(_) => panic!("no shared runtime"),
    }
}

const OK: &str = r#"{"rules": [{"when": {}, "reply": {"text": "ok"}}]}"#;

/// A parent that delegates once to `subagent`, whose child answers when
/// `child_when` holds, and that repeats what the child said.
fn delegating(child_when: &str) -> String {
    format!(
        r#"{{"rules": [
          {{"when": {child_when}, "reply": {{"text": "child ok"}}}},
          {{"when": {{"last_message": "user"}}, "reply": {{"tool_calls": [
            {{"name": "subagent", "arguments": {{"description": "d", "prompt": "p"}}}}]}}}},
          {{"when": {{"last_message": "tool"}}, "reply": {{"text": "{{{{last_tool_result}}}}"}}}}
        ]}}"#
    )
}

async fn delegate(shared: &SharedRuntime) -> String {
    let Ok(parent) = shared.parent("test") else {
        panic!("no parent")
    };
    parent.run("go", &dsh_tools::CancellationToken::new()).await.text
}

#[test]
fn with_a_data_directory_spawn_children_are_continuable() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared_runtime("", OK, Some(dir.path()), Surface::Agent);
    let tools = shared.tools();
    let subagent = tools.get("subagent").unwrap();
    assert!(
        subagent
            .description()
            .ends_with(dsh_tool_subagent::wording::CONTINUABLE_SUFFIX)
    );
    assert!(tools.get("send_message").is_some());
    let fork = tools.get("subagent_fork").unwrap();
    assert!(
        fork.description()
            .ends_with(dsh_tool_subagent::wording::CONTINUABLE_SUFFIX)
    );
}

#[test]
fn without_one_continuable_providers_stay_foreground() {
    let shared = shared_runtime("", OK, None, Surface::Agent);
    let tools = shared.tools();
    for name in ["subagent", "subagent_fork"] {
        let tool = tools.get(name).unwrap();
        assert!(
            tool.parameters()["properties"].get("run_in_background").is_none(),
            "{name}"
        );
    }
    assert!(tools.get("send_message").is_none());
}

/// Without a data directory `send_message` is not mounted; a filter that
/// names it still lets every child start.
#[tokio::test]
async fn a_filter_naming_send_message_works_without_a_data_directory() {
    let text = "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { allow = [\"task_list\", \"send_message\"] }\n";
    let script = delegating(r#"{"tool_not_offered": "subagent", "tool_offered": "task_list"}"#);
    let shared = shared_runtime(text, &script, None, Surface::Agent);
    assert!(shared.tools().get("send_message").is_none());
    assert_eq!(delegate(&shared).await, "child ok");
}

/// `dsh mcp` leaves a configured fork tool out; a filter naming it still
/// lets the other tool's children start.
#[tokio::test]
async fn an_mcp_server_serves_no_fork_tool_and_filters_naming_it_still_work() {
    let text = "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { deny = [\"subagent\", \"subagent_fork\"] }\n\n[[subagents]]\ntool_name = \"subagent_fork\"\nprovider = \"fork\"\n";
    let script = delegating(r#"{"tool_not_offered": "subagent"}"#);
    let data = tempfile::tempdir().unwrap();
    let shared = shared_runtime(text, &script, Some(data.path()), Surface::McpServer);
    assert!(shared.tools().get("subagent").is_some());
    assert!(shared.tools().get("subagent_fork").is_none());
    assert_eq!(shared.delegation_tools(), ["subagent"]);
    assert_eq!(delegate(&shared).await, "child ok");
}

/// Each parent is the root of a delegation tree of its own: `max_children`
/// counts one parent's children, and another parent starts afresh.
#[tokio::test]
async fn each_parent_has_a_delegation_tree_of_its_own() {
    let text = "[limits]\nmax_children = 1\n";
    let script = delegating(r#"{"tool_not_offered": "subagent"}"#);
    let shared = shared_runtime(text, &script, None, Surface::Agent);
    let cancel = dsh_tools::CancellationToken::new();
    let Ok(first) = shared.parent("first") else {
        panic!("no parent")
    };
    assert_eq!(first.run("go", &cancel).await.text, "child ok");
    let refused = first.run("again", &cancel).await.text;
    assert!(
        refused.contains("this delegation tree has started all the children it may (max_children = 1)"),
        "{refused}"
    );
    // Another parent's tree has started nothing yet.
    assert_eq!(delegate(&shared).await, "child ok");
}
