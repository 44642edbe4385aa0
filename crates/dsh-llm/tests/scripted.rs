//! The scripted model: matching, templates, determinism, errors, the built-in script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_llm::scripted::{Conditions, Reply, Rule, Script};
use dsh_llm::{
    CancellationToken, ChatEvent, ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Message, ScriptedModel,
    ToolCall, ToolDefinition, Usage, complete,
};
use futures::StreamExt;
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(10);

const SCRIPT: &str = r#"{"rules": [
  {"name": "geo", "when": {"last_user_contains": "capital of France"}, "reply": {"text": "Paris."}},
  {"when": {"last_message": "user", "system_contains": "You are a delegated subagent"},
   "reply": {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md", "why": "{{last_user}}"}}]}},
  {"when": {"last_message": "tool", "last_tool": "read_file"},
   "reply": {"text": "File says: {{last_tool_result}} (asked: {{first_user}})"}},
  {"when": {"tool_offered": "calc", "assistant_turns": 0}, "reply": {"text": "calc on offer", "finish_reason": "length"}},
  {"when": {"last_user_contains": "fail please"}, "reply": {"error": "boom for {{last_user}}"}},
  {"when": {"last_message": "user"}, "reply": {"text": "I have nothing scripted for: {{last_user}}"}}
]}"#;

fn model() -> ScriptedModel {
    ScriptedModel::from_json_str(SCRIPT).unwrap()
}

async fn ask(model: &dyn ChatModel, request: ChatRequest) -> Result<ChatResponse, LlmError> {
    tokio::time::timeout(SOON, complete(model, request, &CancellationToken::new()))
        .await
        .unwrap()
}

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition::new(name, format!("the {name} tool"), json!({"type": "object"}))
}

#[tokio::test]
async fn first_matching_rule_wins() {
    let model = model();
    let response = ask(
        &model,
        ChatRequest::new(vec![Message::user("capital of France? (also calc)")]).with_tools(vec![tool("calc")]),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "Paris.");
    assert_eq!(response.finish_reason, FinishReason::Stop);

    let response = ask(
        &model,
        ChatRequest::new(vec![Message::user("2+2")]).with_tools(vec![tool("calc")]),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "calc on offer");
    assert_eq!(response.finish_reason, FinishReason::Length);

    let response = ask(&model, ChatRequest::new(vec![Message::user("2+2")])).await.unwrap();
    assert_eq!(response.text, "I have nothing scripted for: 2+2");
}

#[tokio::test]
async fn tool_calls_with_templates_and_deterministic_ids() {
    let model = model();
    let mut messages = vec![
        Message::system("You are a delegated subagent. Be brief."),
        Message::user("summarise the \"readme\""),
    ];
    let response = ask(&model, ChatRequest::new(messages.clone())).await.unwrap();
    assert_eq!(response.text, "");
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls.len(), 1);
    let call = &response.tool_calls[0];
    assert_eq!(call.id, "call_1_0");
    assert_eq!(call.name, "read_file");
    // Templates land inside JSON strings, escaped.
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(
        arguments,
        json!({"path": "README.md", "why": "summarise the \"readme\""})
    );

    messages.push(response.to_message());
    messages.push(Message::tool(call.id.clone(), "hello docs"));
    let response = ask(&model, ChatRequest::new(messages)).await.unwrap();
    assert_eq!(response.text, "File says: hello docs (asked: summarise the \"readme\")");
}

#[tokio::test]
async fn answers_are_deterministic_and_streamed_word_by_word() {
    let model = model();
    let request = ChatRequest::new(vec![Message::user("tell me a story")]);
    let collect = |request: ChatRequest| {
        let model = model.clone();
        async move {
            model
                .stream_chat(request, CancellationToken::new())
                .map(Result::unwrap)
                .collect::<Vec<_>>()
                .await
        }
    };
    let first = collect(request.clone()).await;
    assert_eq!(first, collect(request).await);
    // "I have nothing scripted for: tell me a story" = 44 chars -> 11 tokens; prompt 15 chars -> 4.
    assert_eq!(
        first,
        vec![
            ChatEvent::TextDelta("I ".into()),
            ChatEvent::TextDelta("have ".into()),
            ChatEvent::TextDelta("nothing ".into()),
            ChatEvent::TextDelta("scripted ".into()),
            ChatEvent::TextDelta("for: ".into()),
            ChatEvent::TextDelta("tell ".into()),
            ChatEvent::TextDelta("me ".into()),
            ChatEvent::TextDelta("a ".into()),
            ChatEvent::TextDelta("story".into()),
            ChatEvent::Usage(Usage::reported(4, 11)),
            ChatEvent::Finish(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn no_match_error_shows_the_last_message() {
    let model = model();
    let request = ChatRequest::new(vec![
        Message::user("x"),
        Message::assistant("an unexpected assistant turn"),
    ]);
    let err = ask(&model, request).await.unwrap_err();
    assert!(matches!(err, LlmError::NoRuleMatched { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("no scripted rule matched"), "{text}");
    assert!(text.contains("assistant: \"an unexpected assistant turn\""), "{text}");
    let err = ask(&model, ChatRequest::new(vec![])).await.unwrap_err();
    assert!(err.to_string().contains("no messages"), "{err}");
}

#[tokio::test]
async fn error_replies_fail_the_call() {
    let err = ask(&model(), ChatRequest::new(vec![Message::user("fail please")]))
        .await
        .unwrap_err();
    assert_eq!(err, LlmError::Scripted("boom for fail please".into()));
}

#[test]
fn unknown_condition_key_names_the_json_path() {
    let err = ScriptedModel::from_json_str(
        r#"{"rules": [{"when": {}, "reply": {"text": "a"}}, {"when": {"last_usr_contains": "x"}, "reply": {"text": "b"}}]}"#,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LlmError::Script { .. }), "{err:?}");
    assert!(text.contains("<inline>"), "{text}");
    assert!(text.contains("rules[1].when"), "{text}");
    assert!(text.contains("unknown field `last_usr_contains`"), "{text}");
}

#[test]
fn bad_values_and_json_are_reported_clearly() {
    let err = ScriptedModel::from_json_str(r#"{"rules": [{"when": {"last_message": "bot"}, "reply": {"text": "a"}}]}"#)
        .unwrap_err();
    assert!(err.to_string().contains("rules[0].when.last_message"), "{err}");
    assert!(err.to_string().contains("unknown variant `bot`"), "{err}");

    let err = ScriptedModel::from_json_str(r#"{"rules": [{"when": {}, "reply": {"text": "a"}},]}"#).unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");

    let err = ScriptedModel::from_json_str(r#"{"rules": [{"when": {}, "reply": {}}]}"#).unwrap_err();
    assert!(err.to_string().contains("rules[0].reply"), "{err}");
    assert!(
        err.to_string().contains("needs `text`, `tool_calls` or `error`"),
        "{err}"
    );

    let err = ScriptedModel::from_json_str(r#"{"rules": [{"reply": {"text": "{{last_usr}}"}}]}"#).unwrap_err();
    assert!(err.to_string().contains("rules[0].reply.text"), "{err}");
    assert!(err.to_string().contains("unknown template {{last_usr}}"), "{err}");

    let err = ScriptedModel::from_json_str(
        r#"{"rules": [{"reply": {"tool_calls": [{"name": "t", "arguments": {"a": ["{{nope}}"]}}]}}]}"#,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("rules[0].reply.tool_calls[0].arguments"),
        "{err}"
    );

    let err = ScriptedModel::from_json_str(r#"{"rules": []}"#).unwrap_err();
    assert!(err.to_string().contains("at least one rule"), "{err}");

    let err = ScriptedModel::from_json_str(r#"{"rules": [{"reply": {"text": "a"}}]} trailing"#).unwrap_err();
    assert!(err.to_string().contains("trailing"), "{err}");
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("dsh-llm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad-script.json");
    std::fs::write(
        &path,
        r#"{"rules": [{"when": {"color": "red"}, "reply": {"text": "a"}}]}"#,
    )
    .unwrap();
    let err = ScriptedModel::from_path(&path).unwrap_err();
    assert!(err.to_string().contains("bad-script.json"), "{err}");
    assert!(err.to_string().contains("rules[0].when"), "{err}");

    let good = dir.join("good-script.json");
    std::fs::write(&good, SCRIPT).unwrap();
    assert_eq!(ScriptedModel::from_path(&good).unwrap().script().rules.len(), 6);

    let missing = dir.join("missing.json");
    let err = ScriptedModel::from_path(&missing).unwrap_err();
    assert!(err.to_string().contains("missing.json"), "{err}");
    assert!(err.to_string().contains("could not read"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn scripts_can_be_built_in_code() {
    let script = Script {
        rules: vec![Rule {
            when: Conditions {
                assistant_turns: Some(2),
                ..Conditions::default()
            },
            reply: Reply {
                text: Some("third turn".into()),
                ..Reply::default()
            },
            ..Rule::default()
        }],
    };
    assert!(ScriptedModel::new(script).is_ok());
    assert!(ScriptedModel::new(Script::default()).is_err());
}

#[tokio::test]
async fn builtin_script_runs_parent_child_parent() {
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::builtin());
    assert_eq!(model.model_name(), "scripted");
    let task = "Count the TODO comments in src/";
    let parent_tools = vec![tool("subagent"), tool("read_file")];

    // 1. The parent delegates.
    let mut parent = vec![Message::system("You are the main agent."), Message::user(task)];
    let step1 = ask(
        model.as_ref(),
        ChatRequest::new(parent.clone()).with_tools(parent_tools.clone()),
    )
    .await
    .unwrap();
    assert_eq!(step1.finish_reason, FinishReason::ToolCalls);
    assert_eq!(step1.tool_calls.len(), 1);
    let call = step1.tool_calls[0].clone();
    assert_eq!(call.name, "subagent");
    assert_eq!(call.id, "call_1_0");
    let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(arguments["prompt"], task);
    assert_eq!(arguments["description"], "Count the TODO comments in src/");

    // 2. The child (no `subagent` tool) answers, quoting its task.
    let child = vec![Message::system("You are a delegated subagent."), Message::user(task)];
    let step2 = ask(
        model.as_ref(),
        ChatRequest::new(child).with_tools(vec![tool("read_file")]),
    )
    .await
    .unwrap();
    assert!(step2.tool_calls.is_empty());
    assert!(
        step2.text.contains("\"Count the TODO comments in src/\""),
        "{}",
        step2.text
    );
    assert_eq!(step2.finish_reason, FinishReason::Stop);

    // 3. The parent reports the tool result.
    parent.push(step1.to_message());
    parent.push(Message::tool(call.id, step2.text.clone()));
    let step3 = ask(model.as_ref(), ChatRequest::new(parent).with_tools(parent_tools))
        .await
        .unwrap();
    assert!(step3.tool_calls.is_empty());
    assert_eq!(
        step3.text,
        format!("The subagent finished the task. Its report:\n\n{}", step2.text)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_get_their_own_answers() {
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::builtin());
    let parent = ChatRequest::new(vec![Message::user("task A")]).with_tools(vec![tool("subagent")]);
    let child = ChatRequest::new(vec![Message::user("task B")]);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let model = Arc::clone(&model);
            let request = if i % 2 == 0 { parent.clone() } else { child.clone() };
            tokio::spawn(async move { complete(model.as_ref(), request, &CancellationToken::new()).await })
        })
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        let response = tokio::time::timeout(SOON, handle).await.unwrap().unwrap().unwrap();
        if i % 2 == 0 {
            assert_eq!(response.tool_calls[0].name, "subagent", "request {i}");
            assert!(response.tool_calls[0].arguments.contains("task A"));
        } else {
            assert!(response.text.contains("\"task B\""), "request {i}: {}", response.text);
        }
    }
}

#[tokio::test]
async fn cancellation_is_honoured_between_deltas() {
    let model =
        ScriptedModel::from_json_str(r#"{"rules": [{"reply": {"text": "one two three four", "delay_ms": 60000}}]}"#)
            .unwrap();
    let cancel = CancellationToken::new();
    let mut stream = model.stream_chat(ChatRequest::new(vec![Message::user("go")]), cancel.clone());
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        trigger.cancel();
    });
    // The first delta waits 60 s unless cancellation interrupts it.
    let first = tokio::time::timeout(SOON, stream.next()).await.unwrap();
    assert_eq!(first, Some(Err(LlmError::Cancelled)));
    assert_eq!(stream.next().await, None);

    // Without delays, a token cancelled up front stops the stream at once.
    let model = ScriptedModel::builtin();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let events: Vec<_> = model
        .stream_chat(ChatRequest::new(vec![Message::user("go")]), cancel)
        .collect()
        .await;
    assert_eq!(events, vec![Err(LlmError::Cancelled)]);
}

#[tokio::test]
async fn stream_by_whole_and_explicit_finish_reason() {
    let model = ScriptedModel::from_json_str(
        r#"{"rules": [{"when": {"first_user_contains": "long"}, "reply": {"text": "cut off here", "stream_by": "whole", "finish_reason": "length"}}]}"#,
    )
    .unwrap();
    let events: Vec<_> = model
        .stream_chat(
            ChatRequest::new(vec![Message::user("a long one")]),
            CancellationToken::new(),
        )
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(events[0], ChatEvent::TextDelta("cut off here".into()));
    assert_eq!(events.last(), Some(&ChatEvent::Finish(FinishReason::Length)));
}

#[tokio::test]
async fn last_tool_is_resolved_from_the_assistant_tool_call_ids() {
    let model = ScriptedModel::from_json_str(
        r#"{"rules": [
            {"when": {"last_tool": "grep"}, "reply": {"text": "grep said {{last_tool_result}}; tool {{last_tool}}; turns {{assistant_turns}}"}},
            {"reply": {"text": "other"}}
        ]}"#,
    )
    .unwrap();
    let messages = vec![
        Message::user("u"),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new("a", "read_file", "{}"), ToolCall::new("b", "grep", "{}")],
        ),
        Message::tool("a", "file"),
        Message::tool("b", "3 hits"),
    ];
    let response = ask(&model, ChatRequest::new(messages.clone())).await.unwrap();
    assert_eq!(response.text, "grep said 3 hits; tool grep; turns 1");
    let response = ask(&model, ChatRequest::new(messages[..3].to_vec())).await.unwrap();
    assert_eq!(response.text, "other");
}
