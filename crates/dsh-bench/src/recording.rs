//! What recording a run into a cassette (`dsh_llm::cassette::RecordingModel`
//! writing an events-level cassette to a file) costs a delegation
//! ([`crate::delegation`]), against the same delegation unrecorded, in
//! alternated pairs:
//!
//! - on the scripted model, as a ratio: the guard kept from when this was
//!   the target (it may not grow);
//! - on the scripted model, per model exchange: the pairs' median
//!   difference over the delegation's three calls, what recording adds to
//!   each exchange whatever the model;
//! - on a model that takes 1 ms a call, as a ratio: what recording costs a
//!   run on a model that is not free.
//!
//! One recording takes all the delegations of a row, as in a run: created
//! before, finished (written, synced, renamed) after, its writer thread
//! writing meanwhile.

use std::sync::Arc;

use dsh_llm::ScriptedModel;
use dsh_llm::cassette::{Recorder, RecordingModel};

use crate::delegation::{CALLS, Delegation, Pairs, Scratch, SlowModel, pairs};
use crate::{Flavor, Plan, Row, yes_no};

/// The rows [`rows`] returns per flavor.
pub const ROWS: usize = 3;

/// The guard: the ratio on the scripted model measured when it stopped
/// being the target (1.09× current-thread, 1.06× multi-thread), with its
/// noise.
const GUARD: f64 = 1.10;

/// The most recording may add to one model exchange, µs.
const PER_EXCHANGE_US: f64 = 5.0;

/// The most recording may cost a delegation on a 1 ms model.
const ON_A_SLOW_MODEL: f64 = 1.01;

/// Recorded against unrecorded, `count` pairs, over `model`'s kind.
async fn measure(count: usize, slow: bool, scratch: &Scratch) -> Result<Pairs, String> {
    let file = scratch.path().join(if slow { "slow.jsonl" } else { "scripted.jsonl" });
    let recorder = Recorder::create(&file).map_err(|error| error.to_string())?;
    let (recorded, plain) = if slow {
        let recorded = RecordingModel::new(SlowModel(ScriptedModel::builtin()), &recorder);
        let recorded = recorded.map_err(|error| error.to_string())?;
        (
            Delegation::new(Arc::new(recorded), None)?,
            Delegation::new(Arc::new(SlowModel(ScriptedModel::builtin())), None)?,
        )
    } else {
        let recorded = RecordingModel::new(ScriptedModel::builtin(), &recorder).map_err(|error| error.to_string())?;
        (
            Delegation::new(Arc::new(recorded), None)?,
            Delegation::new(Arc::new(ScriptedModel::builtin()), None)?,
        )
    };
    let measured = pairs(count, &plain, &recorded).await?;
    let exchanges = recorder.finish().map_err(|error| error.to_string())?;
    if exchanges != u64::from(CALLS) * (count as u64 + 1) {
        return Err(format!("{exchanges} exchanges recorded, not {CALLS} per delegation"));
    }
    Ok(measured)
}

/// Recording's rows of one flavor: the guard, the cost per exchange (both
/// on the scripted model, one measurement) and the cost on a 1 ms model.
pub fn rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let scratch = Scratch::new("record")?;
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let scripted = measure(plan.rounds.max(1) * 100, false, &scratch).await?;
        let slow = measure(plan.rounds.max(1) * 30, true, &scratch).await?;
        let per_exchange = scripted.extra / f64::from(CALLS);
        Ok(vec![
            Row {
                figure: "a delegation on the scripted model, recorded (3 model calls, events level, to a file)"
                    .to_owned(),
                flavor: flavor.name(),
                ours: format!("{:.1} µs", scripted.ours),
                floor: format!("{:.1} µs (not recorded)", scripted.floor),
                ratio: format!("{:.2}×", scripted.ratio),
                target: format!(
                    "≤ {GUARD:.2}× (a guard: may not grow): {}",
                    yes_no(scripted.ratio <= GUARD)
                ),
            },
            Row {
                figure: "recording, per model exchange, on the scripted model".to_owned(),
                flavor: flavor.name(),
                ours: format!("{per_exchange:.2} µs"),
                floor: format!("{:.1} µs (a delegation, not recorded)", scripted.floor),
                ratio: "-".to_owned(),
                target: format!(
                    "≤ {PER_EXCHANGE_US} µs per exchange: {}",
                    yes_no(per_exchange <= PER_EXCHANGE_US)
                ),
            },
            Row {
                figure: "a delegation on a model that takes 1 ms a call, recorded".to_owned(),
                flavor: flavor.name(),
                ours: format!("{:.2} ms", slow.ours / 1e3),
                floor: format!("{:.2} ms (not recorded)", slow.floor / 1e3),
                ratio: format!("{:.3}×", slow.ratio),
                target: format!(
                    "≤ {ON_A_SLOW_MODEL}× (recording ≤ 1 %): {}",
                    yes_no(slow.ratio <= ON_A_SLOW_MODEL)
                ),
            },
        ])
    })
}
