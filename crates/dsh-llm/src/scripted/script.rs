//! The scripted-model file format (see the crate docs for a description).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::template;
use crate::message::Role;
use crate::model::FinishReason;
use crate::wording;

/// A whole script: rules tried in order, the first match answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The rules, in priority order.
    pub rules: Vec<Rule>,
}

/// One rule: if every condition in `when` holds, answer with `reply`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Optional label, for people reading the script (and log lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Conditions, all of which must hold (none: always matches).
    #[serde(default)]
    pub when: Conditions,
    /// What to answer.
    pub reply: Reply,
}

/// Conditions on the request; every one that is set must hold.
///
/// Text conditions are case-sensitive substring tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// Role of the request's last message (`system`, `user`, `assistant`, `tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message: Option<Role>,
    /// The last user message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// The first user message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_user_contains: Option<String>,
    /// The system prompt (all system messages, joined) contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// The most recent tool result answers a call of the tool with this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tool: Option<String>,
    /// The most recent tool result contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tool_result_contains: Option<String>,
    /// A tool with this name is offered in the request's `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_offered: Option<String>,
    /// No tool with this name is offered in the request's `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_not_offered: Option<String>,
    /// Exactly this many assistant messages are in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assistant_turns: Option<u64>,
}

/// The answer of a rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// Text to stream (templates allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls to make (templates allowed in argument strings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Finish reason to report; default `tool_calls` when there are tool
    /// calls, else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Fail the call with [`crate::LlmError::Scripted`] and this message
    /// instead of answering (to exercise error paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How the text is split into deltas.
    #[serde(default)]
    pub stream_by: StreamBy,
    /// Pause before each text delta, in milliseconds (default 0).
    #[serde(default)]
    pub delay_ms: u64,
}

/// How a reply's text is split into [`crate::ChatEvent::TextDelta`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamBy {
    /// One delta per word, each with its trailing whitespace (the default).
    #[default]
    Word,
    /// One delta per character.
    Char,
    /// The whole text in one delta.
    Whole,
}

/// A tool call in a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments as JSON (usually an object); string values may hold
    /// templates, which are substituted and then JSON-escaped.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

impl Script {
    /// Checks what serde cannot: known template names, non-empty replies.
    /// Returns the JSON path and a message for the first problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        if self.rules.is_empty() {
            return Err(("rules".into(), wording::NO_RULES.into()));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let at = |field: &str| format!("rules[{i}].{field}");
            let reply = &rule.reply;
            if reply.error.is_some() && (reply.text.is_some() || !reply.tool_calls.is_empty()) {
                return Err((at("reply"), wording::ERROR_REPLY_WITH_ANSWER.into()));
            }
            if reply.error.is_none() && reply.text.is_none() && reply.tool_calls.is_empty() {
                return Err((at("reply"), wording::EMPTY_REPLY.into()));
            }
            if let Some(text) = &reply.text {
                template::check(text).map_err(|message| (at("reply.text"), message))?;
            }
            for (j, call) in reply.tool_calls.iter().enumerate() {
                if call.name.trim().is_empty() {
                    return Err((
                        at(&format!("reply.tool_calls[{j}].name")),
                        wording::TOOL_CALL_WITHOUT_NAME.into(),
                    ));
                }
                check_value(&call.arguments)
                    .map_err(|message| (at(&format!("reply.tool_calls[{j}].arguments")), message))?;
            }
        }
        Ok(())
    }
}

fn check_value(value: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => template::check(text),
        Value::Array(items) => items.iter().try_for_each(check_value),
        Value::Object(map) => map.values().try_for_each(check_value),
        _ => Ok(()),
    }
}
