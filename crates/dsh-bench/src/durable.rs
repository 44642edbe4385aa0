//! What writing transcripts durably costs a delegation
//! ([`crate::delegation`]): the same delegation on a runtime with a data
//! directory (every agent's transcript written, each completed model call
//! and tool result one `write(2)` before the next request, as
//! docs/design.md "Durable delegation" says) against one without, in
//! alternated pairs, on a model that takes 1 ms a call and on the scripted
//! model. The data directory is a fresh one under the system's temporary
//! directory, on its file system; every delegation writes two new
//! transcripts (the parent's and its child's).

use std::sync::Arc;

use dsh_llm::{ChatModel, ScriptedModel};

use crate::delegation::{Delegation, Pairs, Scratch, SlowModel, pairs};
use crate::{Flavor, Plan, Row, yes_no};

/// The most transcripts may cost a delegation on a 1 ms model.
const ON_A_SLOW_MODEL: f64 = 1.05;

/// Written against not, `count` pairs, over `model` (made twice: one for
/// each side).
async fn measure(count: usize, model: impl Fn() -> Arc<dyn ChatModel>, scratch: &Scratch) -> Result<Pairs, String> {
    let written = Delegation::new(model(), Some(scratch.path()))?;
    let plain = Delegation::new(model(), None)?;
    let measured = pairs(count, &plain, &written).await?;
    let agents = std::fs::read_dir(scratch.path().join("agents"))
        .map_err(|error| format!("no transcript was written: {error}"))?
        .count();
    if agents < 2 * count {
        return Err(format!("{agents} transcripts written for {count} delegations"));
    }
    Ok(measured)
}

/// The transcripts' rows of one flavor: on a 1 ms model (the target) and on
/// the scripted model (reported).
pub fn rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let slow = measure(
            plan.rounds.max(1) * 30,
            || Arc::new(SlowModel(ScriptedModel::builtin())),
            &Scratch::new("durable-slow")?,
        )
        .await?;
        let scripted = measure(
            plan.rounds.max(1) * 100,
            || Arc::new(ScriptedModel::builtin()),
            &Scratch::new("durable-scripted")?,
        )
        .await?;
        Ok(vec![
            Row {
                figure: "a delegation on a model that takes 1 ms a call, transcripts written".to_owned(),
                flavor: flavor.name(),
                ours: format!("{:.2} ms", slow.ours / 1e3),
                floor: format!("{:.2} ms (no data directory)", slow.floor / 1e3),
                ratio: format!("{:.3}×", slow.ratio),
                target: format!(
                    "≤ {ON_A_SLOW_MODEL}× (durable ≤ 5 %): {}",
                    yes_no(slow.ratio <= ON_A_SLOW_MODEL)
                ),
            },
            Row {
                figure: "a delegation on the scripted model, transcripts written".to_owned(),
                flavor: flavor.name(),
                ours: format!("{:.1} µs", scripted.ours),
                floor: format!("{:.1} µs (no data directory)", scripted.floor),
                ratio: format!("{:.2}×", scripted.ratio),
                target: format!("(none): {:+.1} µs per delegation", scripted.extra),
            },
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_rows_write_transcripts_and_say_so() {
        let rows = rows(&Plan::smoke(), Flavor::CurrentThread).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].figure.contains("1 ms a call"), "{rows:?}");
        assert!(rows[1].ratio.ends_with('×'), "{rows:?}");
    }
}
