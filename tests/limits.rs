//! End to end: token budgets flow from a tool's configuration and from the
//! tree into real in-process agents, checked before each model call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::{Agent, AgentStop};
use dsh_e2e::Harness;
use dsh_llm::Message;
use dsh_subagent::Limits;
use dsh_tools::CancellationToken;
use serde_json::{Value, json};

/// The parent delegates once, then answers with what it read back.
fn parent_rules() -> Vec<Value> {
    vec![
        json!({"when": {"system_contains": "You are the parent.", "last_message": "user"},
               "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "look it up", "prompt": "Find the code word with lookup."}}]}}),
        json!({"when": {"system_contains": "You are the parent.", "last_message": "tool"},
               "reply": {"text": "Parent read: {{last_tool_result}}"}}),
    ]
}

/// The child says what it is doing, looks the code up, then answers.
fn child_rules() -> Vec<Value> {
    vec![
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "user"},
               "reply": {"text": "Looking it up.", "tool_calls": [{"name": "lookup", "arguments": {"key": "code"}}]}}),
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "tool"},
               "reply": {"text": "The code word: {{last_tool_result}}."}}),
    ]
}

fn script() -> Value {
    let rules = [child_rules(), parent_rules()].concat();
    json!({ "rules": rules })
}

fn tool_result(parent: &Agent) -> String {
    parent
        .history()
        .iter()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn a_child_past_its_token_budget_stops_as_max_tokens_with_its_partial_output() {
    let harness = Harness::with(script(), |config| {
        config
            .token_limit(dsh_subagent_api::TokenLimit::new(1).unwrap())
            .tool_filter(dsh_subagent_api::ToolFilter::denying(vec!["subagent", "subagent_fork"]))
    });
    let parent = harness.parent();
    let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
    assert_eq!(
        outcome.stop,
        AgentStop::Completed,
        "the parent's own calls are not the child's budget"
    );
    // One model call spends more than one token: the second never happens.
    assert_eq!(
        tool_result(&parent),
        "Error: subagent run hit its token limit before finishing\nPartial output before the run ended:\nLooking it up."
    );
    assert!(harness.model.requests_for("code is swordfish").is_empty());
}

#[tokio::test]
async fn a_spent_tree_budget_refuses_the_next_child_and_stops_the_top_level_agent() {
    let harness = Harness::limited(
        script(),
        Limits::none().with_token_limit(dsh_subagent_api::TokenLimit::new(1).unwrap()),
        |config| config.tool_filter(dsh_subagent_api::ToolFilter::denying(vec!["subagent", "subagent_fork"])),
    );
    let tree = harness.service.open_tree();
    let parent = Agent::builder(harness.runtime.clone())
        .id("parent")
        .system_prompt("You are the parent.")
        .lineage(tree.lineage())
        .build()
        .unwrap();
    let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
    // The parent's first call spent the tree's budget: its delegation is
    // refused, and its next model call never happens.
    assert_eq!(outcome.stop, AgentStop::TokenBudget(1));
    assert_eq!(outcome.stop.to_string(), "token budget of 1 tokens spent");
    let refused = tool_result(&parent);
    assert!(
        refused.starts_with("Error: subagent not started: this delegation tree's token budget is spent ("),
        "{refused}"
    );
    assert!(harness.child_transcripts("parent").is_empty(), "no child started");
}

#[tokio::test]
async fn spending_counts_up_the_tree() {
    let harness = Harness::limited(
        script(),
        Limits::none().with_token_limit(dsh_subagent_api::TokenLimit::new(1_000_000).unwrap()),
        |config| config.tool_filter(dsh_subagent_api::ToolFilter::denying(vec!["subagent", "subagent_fork"])),
    );
    let tree = harness.service.open_tree();
    let lineage = tree.lineage();
    let parent = Agent::builder(harness.runtime.clone())
        .id("parent")
        .system_prompt("You are the parent.")
        .lineage(lineage.clone())
        .build()
        .unwrap();
    let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    let spent = lineage.token_budget().unwrap().spent();
    let usage = parent.usage().total().unwrap();
    assert_eq!(
        spent,
        usage.prompt_tokens + usage.completion_tokens,
        "the tree's budget saw the parent's calls and its child's"
    );
    assert!(parent.usage().children.is_some());
}
