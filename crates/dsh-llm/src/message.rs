//! Conversation messages, tool definitions and tool calls.
//!
//! These types are the crate's own transcript format (serde, one message per
//! JSON line works well); the OpenAI wire format is produced separately in
//! [`crate::openai`], so transcripts do not change when a provider does.

use serde::{Deserialize, Serialize};

/// One message of a conversation.
///
/// Serialized with a `role` tag, e.g.
/// `{"role":"tool","tool_call_id":"call_1_0","content":"42"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model (usually first).
    System {
        /// The system prompt.
        content: String,
    },
    /// What the user (or a parent agent) said.
    User {
        /// The user's text.
        content: String,
    },
    /// A model turn: text plus zero or more tool calls.
    Assistant {
        /// The text the model produced (may be empty when it only calls tools).
        #[serde(default)]
        content: String,
        /// Tool calls the model asked for, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answered back to the model.
    Tool {
        /// The [`ToolCall::id`] this answers.
        tool_call_id: String,
        /// The tool's output (or error text).
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    /// An assistant message with text and tool calls.
    pub fn assistant_with_tool_calls(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            content: content.into(),
            tool_calls,
        }
    }

    /// A tool-result message answering `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// The message's role.
    pub fn role(&self) -> Role {
        match self {
            Message::System { .. } => Role::System,
            Message::User { .. } => Role::User,
            Message::Assistant { .. } => Role::Assistant,
            Message::Tool { .. } => Role::Tool,
        }
    }

    /// The message's text content (for an assistant message, its text part).
    pub fn content(&self) -> &str {
        match self {
            Message::System { content }
            | Message::User { content }
            | Message::Assistant { content, .. }
            | Message::Tool { content, .. } => content,
        }
    }
}

/// The role of a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// [`Message::System`].
    System,
    /// [`Message::User`].
    User,
    /// [`Message::Assistant`].
    Assistant,
    /// [`Message::Tool`].
    Tool,
}

impl Role {
    /// The lowercase wire name (`system`, `user`, `assistant`, `tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A complete tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id; the matching [`Message::Tool`] must echo it.
    pub id: String,
    /// Name of the tool to run.
    pub name: String,
    /// Arguments as a JSON string, exactly as the model produced them
    /// (it may be invalid JSON: the tool runner decides what to do).
    pub arguments: String,
}

impl ToolCall {
    /// Builds a tool call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool the model may call, described by a JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name (what the model puts in [`ToolCall::name`]).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

impl ToolDefinition {
    /// Builds a tool definition.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: serde_json::Value) -> Self {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_json_lines() {
        let messages = vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::assistant_with_tool_calls("", vec![ToolCall::new("c1", "read_file", r#"{"path":"a"}"#)]),
            Message::tool("c1", "contents"),
            Message::assistant("done"),
        ];
        let lines: Vec<String> = messages.iter().map(|m| serde_json::to_string(m).unwrap()).collect();
        assert_eq!(lines[0], r#"{"role":"system","content":"be brief"}"#);
        assert_eq!(lines[3], r#"{"role":"tool","tool_call_id":"c1","content":"contents"}"#);
        assert_eq!(lines[4], r#"{"role":"assistant","content":"done"}"#);
        let back: Vec<Message> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(back, messages);
    }
}
