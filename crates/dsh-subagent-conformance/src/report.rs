//! The report: one finding per requirement, its tier and its status, read
//! as a table or as versioned JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::finding::Finding;
use crate::wording;

/// The version of the JSON shape [`Report`] serializes to. A field is
/// only ever added; a change that breaks a reader raises it.
pub const REPORT_VERSION: u32 = 1;

/// The verdict over a whole report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    /// No MANDATORY or CAPABILITY requirement failed.
    Pass,
    /// At least one MANDATORY or CAPABILITY requirement failed.
    Fail,
}

/// What a check found: every requirement with its tier and status.
///
/// `Display` prints the table and the verdict; `serde` gives the versioned
/// JSON shape (`version` is [`REPORT_VERSION`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub version: u32,
    /// What was checked: a provider's name, or an agent's command line.
    pub subject: String,
    /// The verdict over the findings.
    pub verdict: Verdict,
    /// One finding per requirement, in the order they were checked.
    pub findings: Vec<Finding>,
    /// How long the whole check took, in milliseconds.
    pub elapsed_ms: u64,
}

impl Report {
    /// A report over these findings; the verdict follows from them.
    pub fn new(subject: impl Into<String>, findings: Vec<Finding>, elapsed: std::time::Duration) -> Self {
        let verdict = if findings.iter().any(Finding::fails_verdict) {
            Verdict::Fail
        } else {
            Verdict::Pass
        };
        Self {
            version: REPORT_VERSION,
            subject: subject.into(),
            verdict,
            findings,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Whether no MANDATORY or CAPABILITY requirement failed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// The finding of requirement `id`.
    pub fn finding(&self, id: &str) -> Option<&Finding> {
        self.findings.iter().find(|finding| finding.id == id)
    }

    /// The findings that fail the verdict.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| finding.fails_verdict())
    }

    /// The report as pretty JSON (the versioned shape).
    pub fn to_json(&self) -> String {
        // A tree of strings, numbers and enums always serializes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Panics, printing the whole report, when a MANDATORY or CAPABILITY
    /// requirement failed: what a provider author's `#[test]` calls.
    ///
    /// # Panics
    ///
    /// When the verdict is [`Verdict::Fail`].
    pub fn assert_conforms(&self) {
        assert!(
            self.passed(),
            "{}",
            wording::did_not_conform(&self.subject, &self.to_string())
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&wording::table(&self.subject, &self.findings))
    }
}
