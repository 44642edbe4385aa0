//! End to end: a fork child sees the parent's completed turns, never the one in flight.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::transcript::TranscriptEntry;
use dsh_e2e::Harness;
use dsh_llm::Message;
use dsh_tools::CancellationToken;
use serde_json::{Value, json};

fn script(child: Value) -> Value {
    json!({"rules": [
        child,
        {"when": {"system_contains": "You are the parent.", "last_user_contains": "Remember"}, "reply": {"text": "Noted."}},
        {"when": {"system_contains": "You are the parent.", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent_fork", "arguments": {"description": "recall", "prompt": "What is the secret?"}}]}},
        {"when": {"system_contains": "You are the parent.", "last_message": "tool"}, "reply": {"text": "Parent: {{last_tool_result}}"}}
    ]})
}

#[tokio::test]
async fn the_fork_sees_completed_turns_but_not_the_turn_in_flight() {
    let child = json!({"when": {"system_contains": "You are a delegated subagent"}, "reply": {"text": "You told me: {{first_user}}"}});
    let harness = Harness::new(script(child));
    let parent = harness.parent();
    let cancel = CancellationToken::new();
    assert_eq!(parent.run("Remember: the secret is 42.", &cancel).await.text, "Noted.");
    let outcome = parent.run("Ask a fork about the secret.", &cancel).await;
    assert_eq!(outcome.text, "Parent: You told me: Remember: the secret is 42.");

    let request = &harness.model.requests_for("What is the secret?")[0];
    let contents: Vec<&str> = request.messages.iter().map(Message::content).collect();
    assert!(contents.contains(&"Remember: the secret is 42."));
    assert!(contents.contains(&"Noted."));
    assert!(
        !contents.contains(&"Ask a fork about the secret."),
        "the turn in flight is not inherited"
    );
    // Every inherited tool call has its result: the seed ends on a plain answer.
    assert!(
        request
            .messages
            .iter()
            .all(|m| !matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()))
    );

    let children = harness.child_transcripts("parent");
    assert!(
        children[0]
            .entries
            .iter()
            .any(|e| matches!(e, TranscriptEntry::Seed { messages } if messages.len() == 2))
    );
}

#[tokio::test]
async fn an_inherited_message_never_becomes_the_answer() {
    let failing =
        json!({"when": {"system_contains": "You are a delegated subagent"}, "reply": {"error": "model offline"}});
    let harness = Harness::new(script(failing));
    let parent = harness.parent();
    let cancel = CancellationToken::new();
    parent.run("Remember: the secret is 42.", &cancel).await;
    let outcome = parent.run("Ask a fork about the secret.", &cancel).await;
    assert!(
        outcome
            .text
            .starts_with("Parent: Error: subagent run failed\nDiagnostic: the child's model call failed:"),
        "{}",
        outcome.text
    );
    assert!(!outcome.text.contains("Noted."));
    assert!(!outcome.text.contains("Partial output"));
}

#[tokio::test]
async fn the_fork_tool_uses_the_inherited_wording() {
    let harness = Harness::new(script(json!({"when": {}, "reply": {"text": "x"}})));
    let spec = harness
        .tools
        .specs()
        .into_iter()
        .find(|s| s.name == "subagent_fork")
        .unwrap();
    assert!(spec.description.contains("INHERITS this conversation"));
    let standalone = harness
        .tools
        .specs()
        .into_iter()
        .find(|s| s.name == "subagent")
        .unwrap();
    assert!(standalone.description.contains("does not see this conversation"));
}

#[test]
fn mounted_over_spawn_and_fork_the_tool_takes_their_wording() {
    use std::sync::Arc;

    use dsh_subagent::SubagentService;
    use dsh_subagent_fork::ForkProvider;
    use dsh_subagent_spawn::SpawnProvider;
    use dsh_tool_subagent::{SubagentToolConfig, SubagentToolPlugin, Wording};
    use dsh_tools::ToolRegistry;

    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let _spawn = service.register_provider(Arc::new(SpawnProvider::new())).unwrap();
    let _fork = service.register_provider(Arc::new(ForkProvider::new())).unwrap();
    let spawn_tool = SubagentToolPlugin::apply(SubagentToolConfig::new("spawn"), &service, &tools).unwrap();
    let fork_tool = SubagentToolPlugin::apply(
        SubagentToolConfig::new("fork").tool_name("subagent_fork"),
        &service,
        &tools,
    )
    .unwrap();
    assert_eq!(tools.names(), ["subagent", "subagent_fork"]);
    assert_eq!(spawn_tool.wording(), Some(Wording::Standalone));
    assert_eq!(fork_tool.wording(), Some(Wording::Inherited));
}
