//! `dsh transcript`: the errors, and a transcript rendered for a person.

use std::fmt::Display;
use std::path::Path;

/// An argument that cannot be an agent id.
pub(crate) fn not_an_agent_id(id: &str) -> String {
    format!("dsh: \"{id}\" is not an agent id (ids use letters, digits, '-', '_' and '.')")
}

/// No transcript for `id`, with the agents that have one.
pub(crate) fn no_transcript(id: &dyn Display, dir: &Path, known: &[String]) -> String {
    let known = if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    };
    format!(
        "dsh: no transcript for agent {id} in {} (known agents: {known})",
        dir.display()
    )
}

/// An agent's header: its id, its parent and depth for a child, its label,
/// and its model.
pub(crate) fn transcript_header(
    id: &dyn Display,
    parent: Option<(&dyn Display, u64)>,
    label: Option<&str>,
    model: &str,
) -> String {
    let mut text = format!("agent {id}");
    if let Some((parent, depth)) = parent {
        text.push_str(&format!(" (child of {parent}, depth {depth})"));
    }
    if let Some(label) = label {
        text.push_str(&format!(" — {label}"));
    }
    text.push_str(&format!("\nmodel: {model}\n\n"));
    text
}

/// A fork child's inherited messages, counted.
pub(crate) fn transcript_seed(count: usize) -> String {
    format!(
        "[inherited {count} message{} from the parent]\n\n",
        if count == 1 { "" } else { "s" }
    )
}

/// A run that was interrupted and repaired on resume.
pub(crate) fn transcript_repair(diagnostic: &str) -> String {
    format!("── run interrupted: {diagnostic}\n\n")
}

/// The end of a run: its stop, its model calls and tokens, and its
/// children's tokens and the total when a child reported any.
pub(crate) fn transcript_turn_end(
    stop: &str,
    steps: u32,
    usage: Option<dsh_llm::Usage>,
    children_usage: Option<dsh_llm::Usage>,
) -> String {
    let mut text = format!(
        "── run ended: {stop} ({steps} model call{}, {}",
        if steps == 1 { "" } else { "s" },
        super::tokens(usage)
    );
    if children_usage.is_some() {
        text.push_str(&format!(
            "; children {}; total {}",
            super::tokens(children_usage),
            super::tokens(dsh_agent::add_reported(usage, children_usage))
        ));
    }
    text.push_str(")\n\n");
    text
}

/// A system message.
pub(crate) fn transcript_system(content: &str) -> String {
    format!("system: {content}\n\n")
}

/// A user message.
pub(crate) fn transcript_user(content: &str) -> String {
    format!("user: {content}\n\n")
}

/// An assistant message's text.
pub(crate) fn transcript_assistant(content: &str) -> String {
    format!("assistant: {content}\n\n")
}

/// A tool call the assistant made.
pub(crate) fn transcript_tool_call(name: &str, arguments: &str, id: &str) -> String {
    format!("assistant → {name}({arguments}) [{id}]\n\n")
}

/// A tool's result.
pub(crate) fn transcript_tool_result(call_id: &str, content: &str) -> String {
    format!("tool [{call_id}]: {content}\n\n")
}
