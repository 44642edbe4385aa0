//! End to end: a real parent agent delegates to fresh in-process children.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dsh_agent::transcript::TranscriptEntry;
use dsh_agent::{AgentStop, wording};
use dsh_e2e::Harness;
use dsh_llm::Message;
use dsh_subagent_api::{AgentOptions, ToolFilter};
use dsh_tool_subagent::MaxDepth;
use dsh_tools::CancellationToken;
use serde_json::{Value, json};

/// The parent delegates its task; the parent answers with the tool result.
fn parent_rules() -> Vec<Value> {
    vec![
        json!({"when": {"system_contains": "You are the parent.", "last_message": "user"},
               "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "find the code", "prompt": "Find the code word with lookup."}}]}}),
        json!({"when": {"system_contains": "You are the parent.", "last_message": "tool"},
               "reply": {"text": "Parent: {{last_tool_result}}"}}),
    ]
}

/// The child looks the code up, then answers.
fn child_rules() -> Vec<Value> {
    vec![
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "user"},
               "reply": {"tool_calls": [{"name": "lookup", "arguments": {"key": "code"}}]}}),
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "tool"},
               "reply": {"text": "The code word: {{last_tool_result}}."}}),
    ]
}

fn script(rules: Vec<Value>) -> Value {
    json!({ "rules": rules })
}

#[tokio::test]
async fn the_child_uses_a_tool_and_the_parent_receives_only_its_final_text() {
    let harness = Harness::new(script([child_rules(), parent_rules()].concat()));
    let parent = harness.parent();
    let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    assert_eq!(outcome.text, "Parent: The code word: code is swordfish.");

    // The parent's conversation holds the delegation and the child's final text, nothing else.
    let history = parent.history();
    assert!(matches!(&history[2], Message::Tool { content, .. } if content == "The code word: code is swordfish."));
    let leaked = history.iter().any(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().any(|c| c.name == "lookup"),
        other => other.content().contains(" is swordfish") && !other.content().contains("The code word"),
    });
    assert!(
        !leaked,
        "the child's intermediate steps never reach the parent: {history:#?}"
    );

    // The child's own transcript shows its work.
    let children = harness.child_transcripts("parent");
    assert_eq!(children.len(), 1);
    let child = &children[0];
    let TranscriptEntry::Header {
        depth,
        label,
        system_prompt,
        ..
    } = &child.entries[0]
    else {
        panic!()
    };
    assert_eq!((*depth, label.as_deref()), (1, Some("find the code")));
    let system_prompt = system_prompt.as_deref().unwrap();
    assert!(system_prompt.starts_with("You are the parent."));
    assert!(system_prompt.ends_with(wording::DELEGATION_CONTEXT));
    assert!(
        child
            .messages()
            .iter()
            .any(|m| matches!(m, Message::Tool { content, .. } if content == "code is swordfish"))
    );

    // Usage rolls up from the child.
    let usage = parent.usage();
    assert!(usage.own.is_some_and(|own| own.total_tokens > 0));
    assert!(usage.children.is_some_and(|children| children.total_tokens > 0));
}

#[tokio::test]
async fn sibling_delegations_in_one_message_both_complete() {
    // A child's system prompt starts with the parent's, so child rules come first.
    let parent = vec![
        json!({"when": {"system_contains": "You are a delegated subagent"}, "reply": {"text": "did {{last_user}}"}}),
        json!({"when": {"system_contains": "You are the parent.", "last_message": "user"},
               "reply": {"tool_calls": [
                   {"name": "subagent", "arguments": {"description": "one", "prompt": "first task"}},
                   {"name": "subagent", "arguments": {"description": "two", "prompt": "second task"}}]}}),
        json!({"when": {"system_contains": "You are the parent.", "last_message": "tool"}, "reply": {"text": "both done"}}),
    ];
    let harness = Harness::new(script(parent));
    let parent_agent = harness.parent();
    let outcome = parent_agent.run("go", &CancellationToken::new()).await;
    assert_eq!(outcome.text, "both done");
    let results: Vec<_> = parent_agent
        .history()
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["did first task", "did second task"]);
    assert_eq!(harness.child_transcripts("parent").len(), 2);
}

#[tokio::test]
async fn configured_agent_options_and_persona_shape_the_child() {
    let harness = Harness::with(script([child_rules(), parent_rules()].concat()), |config| {
        config
            .agent_options(AgentOptions::new().with_model("child-model"))
            .persona("You are the child.")
            .tool_filter(ToolFilter::denying(vec!["subagent", "subagent_fork"]))
    });
    harness.parent().run("go", &CancellationToken::new()).await;
    let child_requests = harness.model.requests_for("Find the code word");
    let request = &child_requests[0];
    assert_eq!(request.model.as_deref(), Some("child-model"));
    let Message::System { content } = &request.messages[0] else {
        panic!()
    };
    assert_eq!(
        content,
        &format!("You are the child.\n\n{}", wording::DELEGATION_CONTEXT)
    );
}

#[tokio::test]
async fn the_tool_filter_is_enforced_in_the_schema_and_at_execution() {
    let harness = Harness::with(script([child_rules(), parent_rules()].concat()), |config| {
        config.tool_filter(ToolFilter::denying(vec!["subagent", "subagent_fork", "lookup"]))
    });
    let outcome = harness.parent().run("go", &CancellationToken::new()).await;
    assert_eq!(
        outcome.text,
        "Parent: The code word: Error: tool \"lookup\" is not available to this agent."
    );
    let child_request = &harness.model.requests_for("Find the code word")[0];
    assert!(child_request.tools.is_empty(), "the filtered tools are not offered");
}

#[tokio::test]
async fn a_filter_naming_an_unknown_tool_fails_the_start_clearly() {
    let harness = Harness::with(script(parent_rules()), |config| {
        config.tool_filter(ToolFilter::denying(vec!["lokup"]))
    });
    let outcome = harness.parent().run("go", &CancellationToken::new()).await;
    assert_eq!(
        outcome.text,
        "Parent: Error: subagent toolFilter names unknown tool \"lokup\" (available: lookup, subagent, subagent_fork)"
    );
    assert!(harness.child_transcripts("parent").is_empty(), "no child was created");
}

#[tokio::test]
async fn the_depth_cap_stops_a_grandchild_with_the_contract_text() {
    let rules = vec![
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "user"},
               "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "deeper", "prompt": "go deeper"}}]}}),
        json!({"when": {"system_contains": "You are a delegated subagent", "last_message": "tool"},
               "reply": {"text": "child saw: {{last_tool_result}}"}}),
    ];
    let harness = Harness::with(script([rules, parent_rules()].concat()), |config| {
        config.max_depth(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(1)))
    });
    let outcome = harness.parent().run("go", &CancellationToken::new()).await;
    assert_eq!(
        outcome.text,
        "Parent: child saw: Error: subagent depth 2 exceeds maxDepth 1"
    );
}

#[tokio::test]
async fn a_child_that_exhausts_its_model_calls_is_an_error_not_a_success() {
    let looping = vec![json!({"when": {"system_contains": "You are a delegated subagent"},
                              "reply": {"tool_calls": [{"name": "lookup", "arguments": {"key": "again"}}]}})];
    let harness = Harness::new(script([looping, parent_rules()].concat()));
    let parent = dsh_agent::Agent::builder(harness.runtime.clone())
        .id("parent")
        .system_prompt("You are the parent.")
        .max_turns(4)
        .build()
        .unwrap();
    let outcome = parent.run("go", &CancellationToken::new()).await;
    assert_eq!(
        outcome.text,
        "Parent: Error: subagent run failed\nDiagnostic: the child made its limit of 4 model calls without giving a final answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_parent_stops_the_child_and_its_transcript_is_complete_up_to_the_cancel() {
    let slow_child = vec![json!({"when": {"system_contains": "You are a delegated subagent"},
        "reply": {"text": "this answer streams so slowly that it will be cancelled long before it ends", "delay_ms": 100}})];
    let harness = Harness::new(script([slow_child, parent_rules()].concat()));
    let parent = harness.parent();
    let cancel = CancellationToken::new();
    let run = parent.run("go", &cancel);
    let canceller = async {
        // Cancel once the child has started streaming.
        loop {
            let started = harness
                .child_transcripts("parent")
                .first()
                .is_some_and(|t| !t.messages().is_empty());
            if started {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
    };
    let (outcome, ()) = tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(run, canceller) })
        .await
        .expect("the parent returns after cancellation");
    assert_eq!(outcome.stop, AgentStop::Cancelled);

    // The tool waited for the child: its transcript already ends with its cancelled turn.
    let child = &harness.child_transcripts("parent")[0];
    assert!(matches!(
        child.entries.last().unwrap(),
        TranscriptEntry::TurnEnd { stop, .. } if stop == "cancelled"
    ));
    // And the parent's conversation stays balanced: the delegation was answered.
    let history = parent.history();
    assert!(
        matches!(history.last().unwrap(), Message::Tool { content, .. } if content.starts_with("Error: subagent run was cancelled"))
    );
}
