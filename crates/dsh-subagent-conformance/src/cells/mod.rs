//! Every cell of the contract, in the order they run, and the check that
//! runs them.

mod cancel;
pub(crate) mod capability;
mod concurrency;
pub(crate) mod continuation;
mod lifecycle;
mod panic;

use std::time::Instant;

use crate::cell::{self, Cell};
use crate::{Finding, Report, Status, Subject, Tier, wording};

/// The cell every other one needs: the provider made and registered.
const MADE: Cell = Cell {
    id: "provider.made",
    tier: Tier::Mandatory,
    body: lifecycle::made,
};

/// The rest, in the order they run.
const CELLS: &[Cell] = &[
    Cell {
        id: "delegation.settles",
        tier: Tier::Mandatory,
        body: lifecycle::settles,
    },
    Cell {
        id: "cancel.before-start",
        tier: Tier::Mandatory,
        body: cancel::before_start,
    },
    Cell {
        id: "cancel.during-start",
        tier: Tier::Mandatory,
        body: cancel::during_start,
    },
    Cell {
        id: "drop.start",
        tier: Tier::Mandatory,
        body: cancel::start_dropped,
    },
    Cell {
        id: "cancel.after-publication",
        tier: Tier::Mandatory,
        body: cancel::after_publication,
    },
    Cell {
        id: "cancel.during-result",
        tier: Tier::Mandatory,
        body: cancel::during_result,
    },
    Cell {
        id: "cancel.after-result",
        tier: Tier::Mandatory,
        body: cancel::after_result,
    },
    Cell {
        id: "drop.caller",
        tier: Tier::Mandatory,
        body: cancel::caller_dropped,
    },
    Cell {
        id: "release.once",
        tier: Tier::Mandatory,
        body: lifecycle::once,
    },
    Cell {
        id: "release.settles-result",
        tier: Tier::Mandatory,
        body: lifecycle::settles_result,
    },
    Cell {
        id: "panic.contained",
        tier: Tier::Mandatory,
        body: panic::contained,
    },
    Cell {
        id: "concurrency.independent",
        tier: Tier::Mandatory,
        body: concurrency::independent,
    },
    Cell {
        id: "capability.outputSchema",
        tier: Tier::Capability,
        body: capability::output_schema_cell,
    },
    Cell {
        id: "capability.depthLimit",
        tier: Tier::Capability,
        body: capability::depth_limit_cell,
    },
    Cell {
        id: "capability.toolFilter",
        tier: Tier::Capability,
        body: capability::tool_filter_cell,
    },
    Cell {
        id: "capability.persona",
        tier: Tier::Capability,
        body: capability::persona_cell,
    },
    Cell {
        id: "capability.tokenBudget",
        tier: Tier::Capability,
        body: capability::token_budget_cell,
    },
    Cell {
        id: "continuation.remade",
        tier: Tier::Capability,
        body: continuation::remade,
    },
    Cell {
        id: "delegation.completes",
        tier: Tier::Advisory,
        body: lifecycle::completes,
    },
    Cell {
        id: "run.ids-distinct",
        tier: Tier::Advisory,
        body: concurrency::distinct_ids,
    },
];

/// The ids of every requirement the provider kit checks, in order.
pub fn requirements() -> impl Iterator<Item = (&'static str, Tier)> {
    std::iter::once(&MADE).chain(CELLS).map(|cell| (cell.id, cell.tier))
}

impl Subject {
    /// Runs every cell and returns the report. Blocking: call it from a
    /// plain `#[test]` (each cell runs on a thread and runtime of its own,
    /// which nothing outlives).
    pub fn check(self) -> Report {
        check(&self)
    }
}

/// Runs every cell over `subject`. When the provider cannot be made, that
/// is the first finding and every other cell is skipped.
fn check(subject: &Subject) -> Report {
    let began = Instant::now();
    let made = cell::run(subject, &MADE);
    let mut findings = Vec::with_capacity(CELLS.len() + 1);
    let unmade = made.status != Status::Pass;
    findings.push(made);
    for cell in CELLS {
        findings.push(if unmade {
            Finding::new(cell.id, cell.tier, Status::Skipped, wording::title(cell.id))
                .with_detail(wording::NO_PROVIDER_MADE)
        } else {
            cell::run(subject, cell)
        });
    }
    Report::new(subject.name.clone(), findings, began.elapsed())
}
