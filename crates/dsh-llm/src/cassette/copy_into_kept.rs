//! Copying what a recorded exchange keeps (a request's messages, the
//! events that are not text) into the buffers of an exchange recorded
//! before, so that once a recording has warmed up, recording a request
//! allocates nothing on the stream it records.

use crate::message::{Message as ChatMessage, ToolCall};
use crate::model::ChatEvent;

/// `from` copied into `into`, into the strings of the messages `into`
/// holds where they are of the same kind (and of those in `surplus`, where
/// `into` holds fewer; where it holds more, the rest go to `surplus`): once
/// a recording has warmed up, copying a request's messages allocates
/// nothing.
pub(crate) fn copy_messages(into: &mut Vec<ChatMessage>, surplus: &mut Vec<ChatMessage>, from: &[ChatMessage]) {
    if into.len() > from.len() {
        surplus.extend(into.drain(from.len()..));
    }
    for (kept, message) in into.iter_mut().zip(from) {
        copy_message(kept, message);
    }
    for message in &from[into.len()..] {
        let copied = match surplus.pop() {
            Some(mut kept) => {
                copy_message(&mut kept, message);
                kept
            }
            None => message.clone(),
        };
        into.push(copied);
    }
}

/// `message` copied into the strings of `kept`, where it is of the same kind.
fn copy_message(kept: &mut ChatMessage, message: &ChatMessage) {
    match (kept, message) {
        (ChatMessage::System { content: kept }, ChatMessage::System { content })
        | (ChatMessage::User { content: kept }, ChatMessage::User { content }) => kept.clone_from(content),
        (
            ChatMessage::Assistant {
                content: kept,
                tool_calls: kept_calls,
            },
            ChatMessage::Assistant { content, tool_calls },
        ) => {
            kept.clone_from(content);
            kept_calls.truncate(tool_calls.len());
            for (kept, call) in kept_calls.iter_mut().zip(tool_calls) {
                copy_call(kept, call);
            }
            let copied = kept_calls.len();
            kept_calls.extend(tool_calls.iter().skip(copied).cloned());
        }
        (
            ChatMessage::Tool {
                tool_call_id: kept_id,
                content: kept,
            },
            ChatMessage::Tool { tool_call_id, content },
        ) => {
            kept_id.clone_from(tool_call_id);
            kept.clone_from(content);
        }
        (kept, message) => *kept = message.clone(),
    }
}

/// `call` copied into the strings of `kept`.
fn copy_call(kept: &mut ToolCall, call: &ToolCall) {
    let ToolCall { id, name, arguments } = call;
    kept.id.clone_from(id);
    kept.name.clone_from(name);
    kept.arguments.clone_from(arguments);
}

/// `event` copied into `kept`, into its strings where both are tool calls.
pub(crate) fn copy_event(kept: &mut ChatEvent, event: &ChatEvent) {
    match (kept, event) {
        (ChatEvent::ToolCall(kept), ChatEvent::ToolCall(call)) => copy_call(kept, call),
        (kept, event) => *kept = event.clone(),
    }
}

/// The bytes an event's strings hold.
pub(crate) fn event_held(event: &ChatEvent) -> usize {
    match event {
        ChatEvent::TextDelta(text) => text.capacity(),
        ChatEvent::ToolCall(call) => call_held(call),
        ChatEvent::Usage(_) | ChatEvent::Finish(_) | ChatEvent::Queued(_) => 0,
    }
}

fn call_held(call: &ToolCall) -> usize {
    call.id.capacity() + call.name.capacity() + call.arguments.capacity()
}

/// The bytes a message's strings hold.
pub(crate) fn held(message: &ChatMessage) -> usize {
    match message {
        ChatMessage::System { content } | ChatMessage::User { content } => content.capacity(),
        ChatMessage::Assistant { content, tool_calls } => {
            content.capacity() + tool_calls.iter().map(call_held).sum::<usize>()
        }
        ChatMessage::Tool { tool_call_id, content } => tool_call_id.capacity() + content.capacity(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_copied_into_those_kept_whatever_their_kinds() {
        let call = |id: &str| ToolCall::new(id, "t", "{}");
        let first = vec![
            ChatMessage::system("a longer system prompt"),
            ChatMessage::user("u"),
            ChatMessage::assistant_with_tool_calls("", vec![call("c1"), call("c2")]),
            ChatMessage::tool("c1", "r"),
        ];
        let second = vec![
            ChatMessage::system("s"),
            ChatMessage::assistant_with_tool_calls("x", vec![call("c3")]),
            ChatMessage::assistant_with_tool_calls("y", vec![call("c4"), call("c5")]),
            ChatMessage::tool("c4", "r2"),
            ChatMessage::user("more"),
        ];
        let (mut kept, mut surplus) = (Vec::new(), Vec::new());
        for messages in [&first, &second, &first, &second[..2].to_vec(), &Vec::new(), &second] {
            copy_messages(&mut kept, &mut surplus, messages);
            assert_eq!(&kept, messages);
        }
        assert!(
            surplus.is_empty(),
            "the longest request took every surplus message back"
        );
    }
}
