//! What the model sees: names, descriptions, parameter schemas; mounting and unmounting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Fixture;
use dsh_tasks::{TaskRegistry, wording};
use dsh_tool_tasks::{DEFAULT_WAIT_MS, MAX_WAIT_MS, TOOL_NAMES, TaskToolsPlugin};
use dsh_tools::{RegistryError, ToolRegistry};

/// The parameter schema of the mounted tool `name`.
fn parameters(name: &str) -> serde_json::Value {
    Fixture::new().tools.get(name).unwrap().parameters().clone()
}

fn task_output_parameters() -> serde_json::Value {
    parameters("task_output")
}

fn task_kill_parameters() -> serde_json::Value {
    parameters("task_kill")
}

fn task_list_parameters() -> serde_json::Value {
    parameters("task_list")
}

#[test]
fn descriptions_are_pinned() {
    insta::assert_snapshot!("description_task_output", wording::TASK_OUTPUT_DESCRIPTION);
    insta::assert_snapshot!("description_task_kill", wording::TASK_KILL_DESCRIPTION);
    insta::assert_snapshot!("description_task_list", wording::TASK_LIST_DESCRIPTION);
}

#[test]
fn schemas_are_pinned() {
    insta::assert_json_snapshot!("schema_task_output", task_output_parameters());
    insta::assert_json_snapshot!("schema_task_kill", task_kill_parameters());
    insta::assert_json_snapshot!("schema_task_list", task_list_parameters());
}

#[test]
fn the_wait_limits_in_the_schema_and_its_description_are_the_enforced_ones() {
    let schema = task_output_parameters();
    let timeout = &schema["properties"]["timeout_ms"];
    assert_eq!(timeout["default"], DEFAULT_WAIT_MS);
    assert_eq!(timeout["maximum"], MAX_WAIT_MS);
    let description = timeout["description"].as_str().unwrap();
    assert!(description.contains(&format!("default {DEFAULT_WAIT_MS}")));
    assert!(description.contains(&format!("at most {MAX_WAIT_MS}")));
    assert_eq!(schema["required"], serde_json::json!(["task_id"]));
    assert_eq!(task_kill_parameters()["required"], serde_json::json!(["task_id"]));
}

#[tokio::test]
async fn the_plugin_registers_three_tools_with_their_wording() {
    let fixture = Fixture::new();
    let specs = fixture.tools.specs();
    let names: Vec<_> = specs.iter().map(|spec| spec.name.as_str()).collect();
    assert_eq!(names, ["task_kill", "task_list", "task_output"]);
    let output = specs.iter().find(|spec| spec.name == "task_output").unwrap();
    assert_eq!(output.description, wording::TASK_OUTPUT_DESCRIPTION);
    assert_eq!(output.parameters, task_output_parameters());
    assert_eq!(fixture.plugin.as_ref().unwrap().tool_names(), TOOL_NAMES);
}

#[tokio::test]
async fn dropping_the_plugin_unregisters_the_tools_and_leaves_the_tasks() {
    let mut fixture = Fixture::new();
    let id = fixture.completed("parent", "answer", "background answer");
    fixture.plugin.take().unwrap().dispose();
    assert!(fixture.tools.names().is_empty());
    let result = fixture.call("task_list", serde_json::json!({})).await;
    assert_eq!(result.text, "Error: unknown tool \"task_list\"");
    fixture.settled(&id, "parent").await;
    // Mounting again over the same registry sees the same task.
    let _again = TaskToolsPlugin::apply(&fixture.tasks, &fixture.tools).unwrap();
    let result = fixture.call("task_list", serde_json::json!({})).await;
    assert_eq!(result.text, "subagent-1 [status: completed] (subagent: answer)");
}

#[test]
fn a_taken_name_refuses_the_whole_plugin_and_registers_nothing() {
    let tools = ToolRegistry::new();
    let _held = tools.reserve("task_list").unwrap();
    let error = TaskToolsPlugin::apply(&TaskRegistry::new(), &tools).unwrap_err();
    assert_eq!(
        error,
        RegistryError::DuplicateName {
            name: "task_list".into()
        }
    );
    assert!(tools.names().is_empty());
    assert!(tools.reserve("task_output").is_ok(), "no name is left reserved");
}
