//! One requirement, checked: its tier, its status, and what was seen.

use serde::{Deserialize, Serialize};

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
