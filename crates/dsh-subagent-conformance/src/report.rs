//! The report: one finding per requirement, its tier and its status, read
//! as a table or as versioned JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::wording;

/// The version of the JSON shape [`Report`] serializes to. A field is
/// only ever added; a change that breaks a reader raises it.
pub const REPORT_VERSION: u32 = 1;

/// How much a requirement weighs, in the sense of protocol test kits
/// (acp-tck, a2a-tck).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Tier {
    /// Every provider (every agent) must pass it: a failure fails the verdict.
    Mandatory,
    /// Must pass where the subject claims the capability; skipped, or
    /// checked as refused, where it does not. A failure fails the verdict.
    Capability,
    /// Recommended: a failure is reported and leaves the verdict alone.
    Advisory,
}

impl Tier {
    /// The tier's name, as the report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mandatory => "MANDATORY",
            Self::Capability => "CAPABILITY",
            Self::Advisory => "ADVISORY",
        }
    }
}

/// What became of one requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    /// The requirement held.
    Pass,
    /// The requirement did not hold; the finding says what was seen.
    Fail,
    /// The requirement was not checked; the finding says why.
    Skipped,
}

impl Status {
    /// The status's name, as the report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Skipped => "SKIPPED",
        }
    }
}

/// One requirement, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Finding {
    /// The requirement's stable id (`cancel.after-publication`, `acp.initialize`, …).
    pub id: String,
    /// Its tier.
    pub tier: Tier,
    /// What became of it.
    pub status: Status,
    /// What the requirement asks, in one line.
    pub title: String,
    /// For a failure, what was seen; for a skip, why; for a pass, anything
    /// worth knowing (how it was checked). `None` when there is nothing to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How long the check took, in milliseconds.
    pub elapsed_ms: u64,
}

impl Finding {
    /// A finding with this id, tier, status and title, and no detail.
    pub fn new(id: impl Into<String>, tier: Tier, status: Status, title: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            tier,
            status,
            title: title.into(),
            detail: None,
            elapsed_ms: 0,
        }
    }

    /// Sets the detail.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the time the check took.
    #[must_use]
    pub fn with_elapsed(mut self, elapsed: std::time::Duration) -> Self {
        self.elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Whether this finding fails the verdict: a failure of a MANDATORY or
    /// CAPABILITY requirement.
    pub fn fails_verdict(&self) -> bool {
        self.status == Status::Fail && self.tier != Tier::Advisory
    }
}

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
        assert!(self.passed(), "{}", wording::did_not_conform(self));
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&wording::table(self))
    }
}
