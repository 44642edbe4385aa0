//! Embedding `subagent` in a harness that has a tool system of its own.
//!
//! The harness speaks the OpenAI chat-completions dialect: it offers tools as
//! `{"type":"function","function":{"name","description","parameters"}}` and
//! gets back `tool_calls` whose arguments are a JSON string. This example
//! builds the delegation tools with the harness builder, turns the
//! registry's definitions into that `tools` array, dispatches one call the
//! "model" made, and renders the result as the harness's `tool` message. The
//! provider is a few lines of the harness's own.
//!
//! ```text
//! cargo run --example embed -p dsh-harness
//! ```

use std::sync::Arc;

use dsh_harness::provider::{
    BoxFuture, Capabilities, StartRequest, SubagentError, SubagentProvider, SubagentResult, SubagentRun, concat_text,
};
use dsh_harness::{
    AgentRef, CancellationToken, HarnessBuilder, SubagentToolConfig, ToolExecution, ToolRegistry, ToolResult,
};
use serde_json::{Value, json};

/// The harness's child: it answers in upper case.
struct Shout;

impl SubagentProvider for Shout {
    fn name(&self) -> &str {
        "shout"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        let answer = concat_text(&request.prompt).to_uppercase();
        Box::pin(async move {
            Ok(SubagentRun::new(
                "shout-1",
                async move { Ok(SubagentResult::completed(answer)) },
                || async { Ok(()) },
            ))
        })
    }
}

/// The registry's tools as the OpenAI `tools` array.
fn openai_tools(tools: &ToolRegistry) -> Value {
    tools
        .specs()
        .into_iter()
        .map(|spec| {
            json!({
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                }
            })
        })
        .collect()
}

/// Dispatches one OpenAI tool call: decodes its JSON-string arguments and
/// runs the tool as `agent`. Undecodable arguments are the model's mistake
/// and go back to it as an error result, like any tool failure.
async fn dispatch(tools: &ToolRegistry, call: &Value, agent: &AgentRef) -> ToolResult {
    let name = call["function"]["name"].as_str().unwrap_or_default();
    let raw = call["function"]["arguments"].as_str().unwrap_or("{}");
    let args = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    let exec = ToolExecution::new(CancellationToken::new()).with_agent(agent.clone());
    tools.call(name, args, exec).await
}

/// The result as the harness's `tool` message.
fn tool_message(call: &Value, result: &ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": call["id"], "content": result.text})
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let harness = HarnessBuilder::new()
        .subagent(SubagentToolConfig::new("shout"), Arc::new(Shout))
        .build()?;
    let tools = harness.tools();

    let offered = openai_tools(tools);
    println!("tools = {}", serde_json::to_string_pretty(&offered)?);
    assert_eq!(offered[0]["type"], "function");
    assert_eq!(offered[0]["function"]["name"], "subagent");
    assert_eq!(
        offered[0]["function"]["parameters"]["required"],
        json!(["description", "prompt"])
    );

    // What the model sent back.
    let call = json!({
        "id": "call_1",
        "type": "function",
        "function": {"name": "subagent", "arguments": "{\"description\":\"shout\",\"prompt\":\"hello there\"}"}
    });
    let parent = AgentRef::new("parent-1");
    let result = dispatch(tools, &call, &parent).await;
    let message = tool_message(&call, &result);
    println!("message = {message}");
    assert_eq!(
        message,
        json!({"role": "tool", "tool_call_id": "call_1", "content": "HELLO THERE"})
    );

    // A malformed call reaches the model as an error it can act on.
    let bad = json!({"id": "call_2", "function": {"name": "subagent", "arguments": "{\"prompt\": 3}"}});
    let refused = dispatch(tools, &bad, &parent).await;
    assert!(refused.is_error);
    assert!(refused.text.starts_with("Error: "), "{}", refused.text);
    println!("refused = {}", tool_message(&bad, &refused));
    Ok(())
}
