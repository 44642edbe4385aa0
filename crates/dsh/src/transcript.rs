//! `dsh transcript <agent-id>`: one agent's transcript, readably.

use std::fmt::Write as _;

use dsh_agent::transcript::{TranscriptEntry, read_transcript, transcript_path};
use dsh_llm::Message;
use dsh_tools::AgentId;

use crate::Failure;
use crate::cli::TranscriptArgs;

pub(crate) fn print(args: &TranscriptArgs) -> Result<(), Failure> {
    let valid = !args.agent_id.is_empty()
        && !args.agent_id.contains("..")
        && args
            .agent_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(Failure::usage(format!(
            "dsh: \"{}\" is not an agent id (ids use letters, digits, '-', '_' and '.')",
            args.agent_id
        )));
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
        let known = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        return Err(Failure::usage(format!(
            "dsh: no transcript for agent {id} in {} (known agents: {known})",
            dir.display()
        )));
    }
    let transcript = read_transcript(&path).map_err(|error| Failure::failed(format!("dsh: {error}")))?;
    print!("{}", render(&transcript.entries));
    if let Some(diagnostic) = transcript.diagnostic {
        eprintln!("dsh: {diagnostic}");
    }
    Ok(())
}

/// A transcript as text a person reads.
pub(crate) fn render(entries: &[TranscriptEntry]) -> String {
    let mut out = String::new();
    for entry in entries {
        // Writing to a String cannot fail.
        let _ = match entry {
            TranscriptEntry::Header {
                id,
                parent,
                depth,
                label,
                model,
                ..
            } => {
                let _ = write!(out, "agent {id}");
                if let Some(parent) = parent {
                    let _ = write!(out, " (child of {parent}, depth {depth})");
                }
                if let Some(label) = label {
                    let _ = write!(out, " — {label}");
                }
                writeln!(out, "\nmodel: {model}\n")
            }
            TranscriptEntry::Seed { messages } => writeln!(
                out,
                "[inherited {} message{} from the parent]\n",
                messages.len(),
                if messages.len() == 1 { "" } else { "s" }
            ),
            TranscriptEntry::Message { message } => write_message(&mut out, message),
            TranscriptEntry::Repair { diagnostic, .. } => writeln!(out, "── run interrupted: {diagnostic}\n"),
            TranscriptEntry::TurnEnd {
                stop,
                steps,
                usage,
                children_usage,
            } => {
                let _ = write!(
                    out,
                    "── run ended: {stop} ({steps} model call{}, {}",
                    if *steps == 1 { "" } else { "s" },
                    crate::wording::tokens(*usage)
                );
                if children_usage.is_some() {
                    let _ = write!(
                        out,
                        "; children {}; total {}",
                        crate::wording::tokens(*children_usage),
                        crate::wording::tokens(dsh_agent::add_reported(*usage, *children_usage))
                    );
                }
                writeln!(out, ")\n")
            }
            _ => Ok(()),
        };
    }
    out
}

fn write_message(out: &mut String, message: &Message) -> std::fmt::Result {
    match message {
        Message::System { content } => writeln!(out, "system: {content}\n"),
        Message::User { content } => writeln!(out, "user: {content}\n"),
        Message::Assistant { content, tool_calls } => {
            if !content.is_empty() {
                writeln!(out, "assistant: {content}\n")?;
            }
            for call in tool_calls {
                writeln!(out, "assistant → {}({}) [{}]\n", call.name, call.arguments, call.id)?;
            }
            Ok(())
        }
        Message::Tool { tool_call_id, content } => writeln!(out, "tool [{tool_call_id}]: {content}\n"),
    }
}
