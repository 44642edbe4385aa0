//! A deterministic, offline [`ChatModel`] driven by rules ([`ScriptedModel`]).
//!
//! Rules are matched against each request on its own (no hidden turn
//! counter), so many conversations can share one instance, concurrently,
//! and still get reproducible answers. The file format is described in the
//! crate docs and the README.

mod script;
mod template;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use script::{Conditions, Reply, Rule, Script, ScriptedToolCall, StreamBy};

use crate::error::{LlmError, truncate};
use crate::message::{Message, Role, ToolCall};
use crate::model::{ChatEvent, ChatModel, ChatRequest, ChatStream, FinishReason, JsonSize, Usage};
use crate::wording;
use template::Vars;

/// The built-in demo script (see the crate docs), as JSON.
pub const BUILTIN_SCRIPT: &str = include_str!("builtin.json");

/// Default [`ChatModel::model_name`] of a scripted model.
pub const SCRIPTED_MODEL_NAME: &str = "scripted";

/// A [`ChatModel`] that answers from a [`Script`]: deterministic, offline,
/// safe to share between concurrent conversations.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    script: Arc<Script>,
    name: String,
}

impl ScriptedModel {
    /// A model for an already-built script (validated like a loaded one).
    pub fn new(script: Script) -> Result<Self, LlmError> {
        script.validate().map_err(|(path, message)| LlmError::Script {
            source_name: wording::SCRIPT_SOURCE.into(),
            path,
            message,
        })?;
        Ok(ScriptedModel {
            script: Arc::new(script),
            name: SCRIPTED_MODEL_NAME.into(),
        })
    }

    /// Loads a script from JSON text.
    pub fn from_json_str(json: &str) -> Result<Self, LlmError> {
        Self::parse(json, wording::INLINE_SOURCE)
    }

    /// Loads a script from a JSON file; errors name the file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        let path = path.as_ref();
        let source_name = path.display().to_string();
        let json = std::fs::read_to_string(path).map_err(|err| LlmError::Script {
            source_name: source_name.clone(),
            path: wording::SCRIPT_ROOT.into(),
            message: wording::script_unreadable(&err),
        })?;
        Self::parse(&json, &source_name)
    }

    /// The built-in demo script ([`BUILTIN_SCRIPT`]): a parent offered a
    /// `subagent` tool delegates, the child answers, the parent reports.
    pub fn builtin() -> Self {
        match Self::from_json_str(BUILTIN_SCRIPT) {
            Ok(model) => model,
            // Unreachable in practice (a unit test loads the script); never panic.
            Err(err) => {
                tracing::error!(error = %err, "{}", wording::LOG_BUILTIN_INVALID);
                let reply = Reply {
                    error: Some(err.to_string()),
                    ..Reply::default()
                };
                ScriptedModel {
                    script: Arc::new(Script {
                        rules: vec![Rule {
                            reply,
                            ..Rule::default()
                        }],
                    }),
                    name: SCRIPTED_MODEL_NAME.into(),
                }
            }
        }
    }

    /// Sets the name [`ChatModel::model_name`] reports.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The script in use.
    pub fn script(&self) -> &Script {
        &self.script
    }

    fn parse(json: &str, source_name: &str) -> Result<Self, LlmError> {
        let script_error = |path: String, message: String| LlmError::Script {
            source_name: source_name.to_owned(),
            path,
            message,
        };
        let mut deserializer = serde_json::Deserializer::from_str(json);
        let script: Script = serde_path_to_error::deserialize(&mut deserializer)
            .map_err(|err| script_error(err.path().to_string(), err.inner().to_string()))?;
        deserializer
            .end()
            .map_err(|err| script_error(wording::SCRIPT_ROOT.into(), err.to_string()))?;
        script
            .validate()
            .map_err(|(path, message)| script_error(path, message))?;
        Ok(ScriptedModel {
            script: Arc::new(script),
            name: SCRIPTED_MODEL_NAME.into(),
        })
    }

    /// Computes the answer to `request`: its events, or the error to yield.
    fn answer(&self, request: &ChatRequest) -> Result<(Vec<ChatEvent>, Duration), LlmError> {
        let facts = Facts::of(request);
        let Some((index, rule)) = self
            .script
            .rules
            .iter()
            .enumerate()
            .find(|(_, rule)| facts.matches(&rule.when))
        else {
            return Err(LlmError::NoRuleMatched {
                last_message: describe_last(request),
            });
        };
        tracing::debug!(
            rule = index,
            name = rule.name.as_deref().unwrap_or(""),
            "{}",
            wording::LOG_RULE_MATCHED
        );
        let reply = &rule.reply;
        if let Some(error) = &reply.error {
            return Err(LlmError::Scripted(template::render(error, &facts.vars)));
        }
        let mut events = Vec::new();
        let text = reply
            .text
            .as_deref()
            .map(|t| template::render(t, &facts.vars))
            .unwrap_or_default();
        events.extend(split(&text, reply.stream_by).into_iter().map(ChatEvent::TextDelta));
        let turn = facts.vars.assistant_turns + 1;
        let calls: Vec<ToolCall> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: format!("call_{turn}_{i}"),
                name: call.name.clone(),
                arguments: render_value(&call.arguments, &facts.vars).to_string(),
            })
            .collect();
        let completion_chars = text.chars().count()
            + calls
                .iter()
                .map(|c| c.name.chars().count() + c.arguments.chars().count())
                .sum::<usize>();
        let finish = reply.finish_reason.clone().unwrap_or(if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        events.extend(calls.into_iter().map(ChatEvent::ToolCall));
        let prompt_tokens = estimate_tokens(prompt_chars(request));
        let completion_tokens = estimate_tokens(completion_chars);
        events.push(ChatEvent::Usage(Usage::reported(prompt_tokens, completion_tokens)));
        events.push(ChatEvent::Finish(finish));
        Ok((events, Duration::from_millis(reply.delay_ms)))
    }
}

impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    fn provider_name(&self) -> &str {
        "dsh.scripted"
    }

    fn stream_chat(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let (items, delay) = match self.answer(&request) {
            Ok((events, delay)) => (events.into_iter().map(Ok).collect(), delay),
            Err(err) => (VecDeque::from([Err(err)]), Duration::ZERO),
        };
        let state = Playback {
            items,
            delay,
            cancel,
            done: false,
        };
        Box::pin(futures::stream::unfold(state, Playback::next))
    }
}

struct Playback {
    items: VecDeque<Result<ChatEvent, LlmError>>,
    delay: Duration,
    cancel: CancellationToken,
    done: bool,
}

impl Playback {
    async fn next(mut self) -> Option<(Result<ChatEvent, LlmError>, Playback)> {
        if self.done {
            return None;
        }
        let item = self.items.pop_front()?;
        if matches!(item, Ok(ChatEvent::TextDelta(_))) && !self.delay.is_zero() {
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => {}
                () = tokio::time::sleep(self.delay) => {}
            }
        }
        if self.cancel.is_cancelled() {
            self.done = true;
            return Some((Err(LlmError::Cancelled), self));
        }
        if item.is_err() {
            self.done = true;
        }
        Some((item, self))
    }
}

/// What the rules can test, computed once per request.
struct Facts<'a> {
    last_role: Option<Role>,
    offered: Vec<&'a str>,
    vars: Vars,
}

impl<'a> Facts<'a> {
    fn of(request: &'a ChatRequest) -> Self {
        let mut vars = Vars::default();
        let mut tool_names: HashMap<&str, &str> = HashMap::new();
        let mut last_tool_call_id = None;
        let mut systems = Vec::new();
        let mut first_user = None;
        for message in &request.messages {
            match message {
                Message::System { content } => systems.push(content.as_str()),
                Message::User { content } => {
                    first_user.get_or_insert(content.as_str());
                    vars.last_user.clone_from(content);
                }
                Message::Assistant { tool_calls, .. } => {
                    vars.assistant_turns += 1;
                    for call in tool_calls {
                        tool_names.insert(call.id.as_str(), call.name.as_str());
                    }
                }
                Message::Tool { tool_call_id, content } => {
                    vars.last_tool_result.clone_from(content);
                    last_tool_call_id = Some(tool_call_id.as_str());
                }
            }
        }
        vars.first_user = first_user.unwrap_or_default().to_owned();
        vars.system = systems.join("\n");
        vars.last_tool = last_tool_call_id
            .and_then(|id| tool_names.get(id))
            .copied()
            .unwrap_or_default()
            .to_owned();
        Facts {
            last_role: request.messages.last().map(Message::role),
            offered: request.tools.iter().map(|tool| tool.name.as_str()).collect(),
            vars,
        }
    }

    fn matches(&self, when: &Conditions) -> bool {
        let contains = |haystack: &str, needle: &Option<String>| needle.as_ref().is_none_or(|n| haystack.contains(n));
        when.last_message.is_none_or(|role| self.last_role == Some(role))
            && contains(&self.vars.last_user, &when.last_user_contains)
            && contains(&self.vars.first_user, &when.first_user_contains)
            && contains(&self.vars.system, &when.system_contains)
            && contains(&self.vars.last_tool_result, &when.last_tool_result_contains)
            && when.last_tool.as_ref().is_none_or(|name| self.vars.last_tool == *name)
            && when
                .tool_offered
                .as_ref()
                .is_none_or(|name| self.offered.contains(&name.as_str()))
            && when
                .tool_not_offered
                .as_ref()
                .is_none_or(|name| !self.offered.contains(&name.as_str()))
            && when
                .assistant_turns
                .is_none_or(|n| u64::try_from(self.vars.assistant_turns).is_ok_and(|t| t == n))
    }
}

fn render_value(value: &serde_json::Value, vars: &Vars) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(template::render(text, vars)),
        Value::Array(items) => Value::Array(items.iter().map(|v| render_value(v, vars)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), render_value(v, vars))).collect()),
        other => other.clone(),
    }
}

/// Splits text into deltas whose concatenation is the text.
fn split(text: &str, by: StreamBy) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    match by {
        StreamBy::Whole => vec![text.to_owned()],
        StreamBy::Char => text.chars().map(String::from).collect(),
        StreamBy::Word => {
            let mut out = Vec::new();
            let mut current = String::new();
            let mut in_space = false;
            for c in text.chars() {
                if !c.is_whitespace() && in_space {
                    out.push(std::mem::take(&mut current));
                }
                in_space = c.is_whitespace();
                current.push(c);
            }
            out.push(current);
            out.retain(|d| !d.is_empty());
            out
        }
    }
}

/// Deterministic token estimate: characters / 4, rounded up.
fn estimate_tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4)).unwrap_or(u64::MAX)
}

fn prompt_chars(request: &ChatRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|message| {
            let calls = match message {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .map(|c| c.name.chars().count() + c.arguments.chars().count())
                    .sum(),
                _ => 0,
            };
            message.content().chars().count() + calls
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.name.chars().count() + t.description.chars().count() + JsonSize::of(&t.parameters).chars as usize)
        .sum();
    messages + tools
}

/// `role: "content"` of the last message, bounded, for no-match errors.
fn describe_last(request: &ChatRequest) -> String {
    let Some(last) = request.messages.last() else {
        return wording::NO_MESSAGES.into();
    };
    let names: Vec<&str> = match last {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|c| c.name.as_str()).collect(),
        _ => Vec::new(),
    };
    let answering = match last {
        Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
        _ => None,
    };
    wording::last_message(&last.role(), &truncate(last.content(), 200), &names, answering)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_script_loads() {
        let model = ScriptedModel::from_json_str(BUILTIN_SCRIPT).unwrap();
        assert_eq!(model.script().rules.len(), 4);
        assert!(ScriptedModel::builtin().script().rules[0].reply.error.is_none());
    }

    #[test]
    fn word_split_concatenates_back() {
        for text in ["Hello world.", "  lead and trail  ", "one", "a\n\nb c"] {
            let parts = split(text, StreamBy::Word);
            assert_eq!(parts.concat(), text);
        }
        assert_eq!(
            split("Hello big world", StreamBy::Word),
            vec!["Hello ", "big ", "world"]
        );
        assert_eq!(split("ab", StreamBy::Char), vec!["a", "b"]);
        assert!(split("", StreamBy::Word).is_empty());
    }

    #[test]
    fn token_estimate_rounds_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(estimate_tokens(9), 3);
    }
}
