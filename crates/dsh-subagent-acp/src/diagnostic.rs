//! What went wrong, in safe words: the protocol stage, the fault, the exit
//! status and the tail of stderr. Never the child's answer text.

use std::fmt;

use crate::wording;
use dsh_process::ExitInfo;

/// The protocol stage a run was in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The process started; nothing was sent yet.
    #[default]
    Spawn,
    /// `initialize` was sent.
    Initialize,
    /// `authenticate` was sent.
    Authenticate,
    /// `session/new` was sent.
    NewSession,
    /// `session/prompt` was sent.
    Prompt,
    /// `session/cancel` was sent.
    Cancel,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Spawn => "spawn",
            Self::Initialize => "initialize",
            Self::Authenticate => "authenticate",
            Self::NewSession => "session/new",
            Self::Prompt => "session/prompt",
            Self::Cancel => "session/cancel",
        })
    }
}

/// A protocol fault the guards or handlers caught.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A stdout line that is not JSON.
    NotJson {
        /// Where it happened.
        stage: Stage,
    },
    /// A method we do not serve.
    UnknownMethod {
        /// The method name as sent (sanitized when shown).
        method: String,
    },
    /// A stdout line longer than the bound.
    LineTooLong {
        /// The bound.
        limit: usize,
    },
    /// More answer text than the bound.
    OutputTooLong {
        /// The bound.
        limit: usize,
    },
    /// Reading stdout failed.
    ReadFailed(String),
}

/// Keeps a child-chosen name short and printable.
fn sanitize(name: &str) -> String {
    let mut clean: String = name.chars().filter(|c| c.is_ascii_graphic()).take(64).collect();
    if name.chars().count() > 64 {
        clean.push('…');
    }
    clean
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson { .. } => f.write_str(wording::NOT_JSON),
            Self::UnknownMethod { method } => f.write_str(&wording::unknown_method(&sanitize(method))),
            Self::LineTooLong { limit } => f.write_str(&wording::line_too_long(*limit)),
            Self::OutputTooLong { limit } => f.write_str(&wording::output_too_long(*limit)),
            Self::ReadFailed(error) => f.write_str(&wording::read_failed(error)),
        }
    }
}

/// A failure of one run or start, ready to show.
#[derive(Clone, Debug)]
pub(crate) struct Diagnostic {
    pub(crate) stage: Stage,
    pub(crate) what: String,
    pub(crate) exit: Option<ExitInfo>,
    pub(crate) stderr: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let exit = self.exit.as_ref().map(|exit| exit as &dyn fmt::Display);
        f.write_str(&wording::diagnostic(
            &self.stage,
            &self.what,
            exit,
            self.stderr.as_deref(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_chosen_names_are_cut_and_cleaned() {
        let fault = Fault::UnknownMethod {
            method: format!("evil\n\u{1b}[2J{}", "m".repeat(100)),
        };
        let text = fault.to_string();
        assert!(!text.contains('\n') && !text.contains('\u{1b}'));
        assert!(text.len() < 120, "{text}");
    }

    #[test]
    fn a_diagnostic_names_stage_fault_exit_and_stderr() {
        use std::os::unix::process::ExitStatusExt;
        let diagnostic = Diagnostic {
            stage: Stage::Prompt,
            what: "the child closed the connection without answering".into(),
            exit: Some(ExitInfo::from(std::process::ExitStatus::from_raw(3 << 8))),
            stderr: Some("boom".into()),
        };
        assert_eq!(
            diagnostic.to_string(),
            "ACP stage session/prompt: the child closed the connection without answering (child process: exit code 3)\nchild stderr (tail):\nboom"
        );
    }
}
