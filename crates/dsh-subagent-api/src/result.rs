//! How a child run ended: its stop reason, its output and an optional diagnostic.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::wording::TRUNCATION_MARK;
use crate::{ContentBlock, concat_text};

/// Why a child run stopped. Only [`StopReason::Completed`] is success.
///
/// The set is open: a provider may report a reason of its own
/// ([`StopReason::Other`]), which every consumer must treat as a failure.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// `completed`: the child finished its task.
    Completed,
    /// `aborted`: the run was cancelled.
    Aborted,
    /// `error`: the run failed.
    Error,
    /// `max-tokens`: a token or turn budget ran out before the child finished.
    MaxTokens,
    /// `refusal`: the child declined the task.
    Refusal,
    /// `interrupted`: the run was stopped resumably, because its process
    /// is stopping (an interrupt, a run that ends leaving work to resume);
    /// its records let it go on. Never a result a model reads: the call
    /// that waited for it is run again when its caller resumes.
    Interrupted,
    /// `disconnected`: the child was interrupted (its process ended, or was
    /// stopped resumably) and cannot be continued: its agent cannot load
    /// its session, or its records are torn past repair. What is known of
    /// it is its partial output and the diagnostic.
    Disconnected,
    /// A provider-specific reason, never one of the names above.
    Other(String),
}

impl StopReason {
    /// The wire name: `completed`, `aborted`, `error`, `max-tokens`, `refusal`, or the custom text.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Error => "error",
            Self::MaxTokens => "max-tokens",
            Self::Refusal => "refusal",
            Self::Interrupted => "interrupted",
            Self::Disconnected => "disconnected",
            Self::Other(reason) => reason,
        }
    }

    /// Parses a wire name; a known name always maps to its own variant.
    pub fn parse(reason: &str) -> Self {
        match reason {
            "completed" => Self::Completed,
            "aborted" => Self::Aborted,
            "error" => Self::Error,
            "max-tokens" => Self::MaxTokens,
            "refusal" => Self::Refusal,
            "interrupted" => Self::Interrupted,
            "disconnected" => Self::Disconnected,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether this is success.
    pub fn is_completed(&self) -> bool {
        matches!(self, Self::Completed)
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let reason = String::deserialize(deserializer)?;
        Ok(Self::parse(&reason))
    }
}

/// The largest diagnostic, in UTF-8 bytes, a result carries.
pub const MAX_DIAGNOSTIC_BYTES: usize = 4096;

/// Bounds a diagnostic to [`MAX_DIAGNOSTIC_BYTES`], cutting on a character
/// boundary and marking the cut with `\n[diagnostic truncated]`.
pub fn bound_diagnostic(diagnostic: impl Into<String>) -> String {
    let mut text = diagnostic.into();
    if text.len() <= MAX_DIAGNOSTIC_BYTES {
        return text;
    }
    let mut cut = MAX_DIAGNOSTIC_BYTES - TRUNCATION_MARK.len();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(TRUNCATION_MARK);
    text
}

/// Where a run's answer can be read again once the run is over, so that a
/// harness that keeps the answer for later reads (the paged reads of a cut
/// result) need not hold it in memory: the child's transcript, for one.
///
/// Reading may block (a file, say): call [`TextSource::read`] off the async
/// threads. A reader checks the size of what it reads against the answer it
/// got, so a source that reads something else is taken as gone.
pub trait TextSource: Send + Sync + fmt::Debug {
    /// The answer again, or `None` when it can no longer be read (its file
    /// was removed, say).
    fn read(&self) -> Option<String>;
}

/// The outcome of one child run.
///
/// Equality compares the outcome (stop reason, output, diagnostic,
/// structured answer), not where its text can be read again.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SubagentResult {
    /// Why the run stopped.
    pub stop_reason: StopReason,
    /// The child's last non-empty assistant message (partial when the run did not complete).
    pub output: Vec<ContentBlock>,
    /// A provider-authored, safe explanation of a failure; never assistant output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<String>,
    /// The structured answer, when an output schema was requested and met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Where the output's text can be read again later, when the provider
    /// keeps it somewhere ([`SubagentResult::with_text_source`]).
    #[serde(skip)]
    text_source: Option<Arc<dyn TextSource>>,
}

impl PartialEq for SubagentResult {
    fn eq(&self, other: &Self) -> bool {
        self.stop_reason == other.stop_reason
            && self.output == other.output
            && self.diagnostic == other.diagnostic
            && self.structured == other.structured
    }
}

impl SubagentResult {
    /// A result with this stop reason and output.
    pub fn new(stop_reason: StopReason, output: Vec<ContentBlock>) -> Self {
        Self {
            stop_reason,
            output,
            diagnostic: None,
            structured: None,
            text_source: None,
        }
    }

    /// A completed run whose answer is one text block.
    pub fn completed(text: impl Into<String>) -> Self {
        Self::new(StopReason::Completed, vec![ContentBlock::text(text)])
    }

    /// Attaches a diagnostic, bounded by [`bound_diagnostic`].
    #[must_use]
    pub fn with_diagnostic(mut self, diagnostic: impl Into<String>) -> Self {
        self.diagnostic = Some(bound_diagnostic(diagnostic));
        self
    }

    /// Attaches a structured answer.
    #[must_use]
    pub fn with_structured(mut self, structured: Value) -> Self {
        self.structured = Some(structured);
        self
    }

    /// Says where the output's text can be read again after the run (its
    /// transcript, say), so a harness that keeps it for later need not
    /// hold it in memory. The source must read exactly [`SubagentResult::text`].
    #[must_use]
    pub fn with_text_source(mut self, source: Arc<dyn TextSource>) -> Self {
        self.text_source = Some(source);
        self
    }

    /// Where the output's text can be read again, when the provider said.
    pub fn text_source(&self) -> Option<&Arc<dyn TextSource>> {
        self.text_source.as_ref()
    }

    /// The concatenated text of the output's text blocks.
    pub fn text(&self) -> String {
        concat_text(&self.output)
    }

    /// The same text as [`SubagentResult::text`], moved out of the result
    /// rather than copied when the output is one text block (the usual
    /// answer): a long answer is not held twice.
    pub fn into_text(self) -> String {
        let mut output = self.output;
        match output.as_mut_slice() {
            [ContentBlock::Text { text }] => std::mem::take(text),
            blocks => concat_text(blocks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_round_trip_and_unknown_names_stay_open() {
        for name in ["completed", "aborted", "error", "max-tokens", "refusal", "frobnicated"] {
            assert_eq!(StopReason::parse(name).as_str(), name);
        }
        assert_eq!(StopReason::parse("max-tokens"), StopReason::MaxTokens);
        assert!(matches!(StopReason::parse("paused"), StopReason::Other(_)));
    }

    #[test]
    fn into_text_reads_what_text_reads() {
        let one = SubagentResult::completed("answer");
        assert_eq!(one.clone().into_text(), one.text());
        let many = SubagentResult::new(
            StopReason::Completed,
            vec![ContentBlock::text("a"), ContentBlock::text("b")],
        );
        assert_eq!(many.clone().into_text(), "ab");
        assert_eq!(SubagentResult::new(StopReason::Error, Vec::new()).into_text(), "");
    }

    #[derive(Debug)]
    struct Fixed;

    impl TextSource for Fixed {
        fn read(&self) -> Option<String> {
            Some("answer".into())
        }
    }

    #[test]
    fn a_text_source_is_no_part_of_the_outcome() {
        let plain = SubagentResult::completed("answer");
        let sourced = plain.clone().with_text_source(Arc::new(Fixed));
        assert_eq!(plain, sourced);
        assert!(plain.text_source().is_none());
        assert_eq!(
            sourced.text_source().and_then(|source| source.read()).as_deref(),
            Some("answer")
        );
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            serde_json::to_value(&sourced).unwrap()
        );
    }

    #[test]
    fn a_diagnostic_at_the_bound_passes_unchanged() {
        let exact = "x".repeat(MAX_DIAGNOSTIC_BYTES);
        assert_eq!(bound_diagnostic(exact.clone()), exact);
    }

    #[test]
    fn an_oversize_multibyte_diagnostic_is_cut_on_a_char_boundary() {
        let big = "é".repeat(MAX_DIAGNOSTIC_BYTES);
        let bounded = bound_diagnostic(big);
        assert!(bounded.len() <= MAX_DIAGNOSTIC_BYTES);
        assert!(bounded.ends_with("[diagnostic truncated]"));
        assert!(!bounded.contains('\u{FFFD}'));
    }
}
