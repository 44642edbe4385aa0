//! `dsh transcript <agent-id>`: one agent's transcript, readably.

use dsh_agent::transcript::{TranscriptEntry, read_transcript, transcript_path};
use dsh_llm::Message;
use dsh_tools::AgentId;

use crate::cli::TranscriptArgs;
use crate::failure::Failure;
use crate::wording;

pub(crate) fn print(args: &TranscriptArgs) -> Result<(), Failure> {
    let valid = !args.agent_id.is_empty()
        && !args.agent_id.contains("..")
        && args
            .agent_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(Failure::usage(wording::not_an_agent_id(&args.agent_id)));
    }
    let id = AgentId::from(args.agent_id.as_str());
    let path = transcript_path(&args.data_dir, &id);
    if !path.is_file() {
        let dir = args.data_dir.join("agents");
        let mut known: Vec<String> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|entry| entry.file_name().to_str()?.strip_suffix(".jsonl").map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        known.sort();
        return Err(Failure::usage(wording::no_transcript(&id, &dir, &known)));
    }
    let transcript = read_transcript(&path).map_err(|error| Failure::failed(wording::failed(&error)))?;
    print!("{}", render(&transcript.entries));
    if let Some(diagnostic) = transcript.diagnostic {
        eprintln!("{}", wording::failed(&diagnostic));
    }
    Ok(())
}

/// A transcript as text a person reads.
pub(crate) fn render(entries: &[TranscriptEntry]) -> String {
    let mut out = String::new();
    for entry in entries {
        match entry {
            TranscriptEntry::Header {
                id,
                parent,
                depth,
                label,
                model,
                ..
            } => {
                let parent = parent.as_ref().map(|parent| (parent as &dyn std::fmt::Display, *depth));
                out.push_str(&wording::transcript_header(id, parent, label.as_deref(), model));
            }
            TranscriptEntry::Seed { messages } => out.push_str(&wording::transcript_seed(messages.len())),
            TranscriptEntry::Message { message, .. } => write_message(&mut out, message),
            TranscriptEntry::Repair { diagnostic, .. } => out.push_str(&wording::transcript_repair(diagnostic)),
            TranscriptEntry::TurnEnd {
                stop,
                steps,
                usage,
                children_usage,
                ..
            } => out.push_str(&wording::transcript_turn_end(stop, *steps, *usage, *children_usage)),
            _ => {}
        }
    }
    out
}

fn write_message(out: &mut String, message: &Message) {
    match message {
        Message::System { content } => out.push_str(&wording::transcript_system(content)),
        Message::User { content } => out.push_str(&wording::transcript_user(content)),
        Message::Assistant { content, tool_calls } => {
            if !content.is_empty() {
                out.push_str(&wording::transcript_assistant(content));
            }
            for call in tool_calls {
                out.push_str(&wording::transcript_tool_call(&call.name, &call.arguments, &call.id));
            }
        }
        Message::Tool { tool_call_id, content } => {
            out.push_str(&wording::transcript_tool_result(tool_call_id, content))
        }
    }
}
