//! End to end: an output schema gives the child a `structured_output` tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_e2e::Harness;
use dsh_subagent_api::{StartRequest, StopReason};
use dsh_tools::CancellationToken;
use serde_json::{Value, json};

fn schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})
}

async fn start(harness: &Harness) -> dsh_subagent_api::SubagentResult {
    let parent = harness.parent();
    let mut request = StartRequest::text("What is six times seven?", parent.agent_ref(), CancellationToken::new());
    request.settings_mut().output_schema = Some(schema());
    let mut run = harness.service.start("spawn", request).await.unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await.unwrap();
    result
}

#[tokio::test]
async fn a_matching_call_is_captured_as_the_structured_result() {
    let harness = Harness::new(json!({"rules": [
        {"when": {"system_contains": "structured_output tool exactly once", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "structured_output", "arguments": {"answer": 42}}]}},
        {"when": {"last_tool": "structured_output"}, "reply": {"text": "{{last_tool_result}}"}}
    ]}));
    let result = start(&harness).await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.structured, Some(json!({"answer": 42})));
    assert_eq!(result.text(), "Structured output recorded.");
    let request = &harness.model.requests_for("six times seven")[0];
    let tool = request.tools.iter().find(|t| t.name == "structured_output").unwrap();
    assert_eq!(tool.parameters, schema());
    assert_eq!(
        tool.description,
        "Report your final structured result. Call this exactly once, when your answer is complete; the arguments must match this tool's parameter schema exactly."
    );
}

#[tokio::test]
async fn a_mismatched_call_is_refused_and_a_run_without_capture_is_an_error() {
    let harness = Harness::new(json!({"rules": [
        {"when": {"system_contains": "structured_output tool exactly once", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "structured_output", "arguments": {"answer": "forty-two"}}]}},
        {"when": {"last_tool": "structured_output"}, "reply": {"text": "{{last_tool_result}}"}}
    ]}));
    let result = start(&harness).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    assert_eq!(result.structured, None);
    assert_eq!(
        result.diagnostic.as_deref(),
        Some("the child finished without calling structured_output")
    );
    assert!(
        result
            .text()
            .starts_with("Error: the arguments do not match the structured_output schema"),
        "{}",
        result.text()
    );
}

#[tokio::test]
async fn a_schema_that_does_not_compile_fails_the_start() {
    let harness = Harness::new(json!({"rules": [{"when": {}, "reply": {"text": "x"}}]}));
    let parent = harness.parent();
    let mut request = StartRequest::text("x", parent.agent_ref(), CancellationToken::new());
    request.settings_mut().output_schema = Some(json!({"type": "object", "properties": {"a": {"type": "frobnicate"}}}));
    let error = harness.service.start("spawn", request).await.unwrap_err();
    assert_eq!(error.code(), "INVALID_OUTPUT_SCHEMA");
    assert!(
        error
            .to_string()
            .starts_with("subagent outputSchema is not a valid JSON Schema"),
        "{error}"
    );
}
