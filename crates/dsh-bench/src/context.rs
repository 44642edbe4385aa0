//! The context fit: what fitting one turn of 100 tool results into the
//! room a context window leaves costs the agent loop
//! ([`dsh_agent::fit_tool_results`]: the sizes of the JSON-escaped texts,
//! the water-filling shares, and each large result cut to its head, its
//! tail and a notice).

use std::time::{Duration, Instant};

use dsh_tools::{ToolOutput, ToolResult};

use crate::{Flavor, Plan, Row, floor_sequential, median, micros, ratio};

/// Results in the turn.
const RESULTS: usize = 100;

/// A small result's bytes: each stays whole.
const SMALL: usize = 1_000;

/// A large result's bytes: each is cut.
const LARGE: usize = 64 * 1024;

/// The room the request leaves for the results, in tokens: less than the
/// large results take (50 × 16,384), more than the small ones (50 × 250).
const ROOM: u64 = 100_000;

/// The turn: every other result small, with text JSON escapes now and then.
fn turn() -> Vec<ToolResult> {
    (0..RESULTS)
        .map(|index| {
            let bytes = if index % 2 == 0 { SMALL } else { LARGE };
            let line = "a result line, \"quoted\" now and then\n";
            let text: String = line.chars().cycle().take(bytes).collect();
            ToolResult::from_outcome(Ok(ToolOutput::text(text)))
        })
        .collect()
}

/// Fits `samples` fresh turns; the median time of one fit, and how many of
/// a turn's results it cut.
fn fit(samples: usize) -> Result<(Duration, usize), String> {
    let mut times = Vec::with_capacity(samples);
    let mut cut = 0;
    for _ in 0..samples.max(1) {
        let mut results = turn();
        let start = Instant::now();
        cut = dsh_agent::fit_tool_results(ROOM, &mut results);
        times.push(start.elapsed());
        let shown: usize = results.iter().map(|result| result.text.len()).sum();
        if shown > usize::try_from(dsh_tools::budget::bytes_in(ROOM)).unwrap_or(usize::MAX) {
            return Err(format!("the fitted turn is {shown} bytes, more than its room"));
        }
    }
    Ok((median(times), cut))
}

/// One turn of 100 results fitted, on `flavor`, against the spawn +
/// oneshot floor of the same flavor.
pub fn rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        floor_sequential(plan.sequential.max(1_000)).await;
        let samples = plan.rounds * 5;
        let (mut floors, mut fits) = (Vec::new(), Vec::new());
        let mut cut = 0;
        for _ in 0..plan.rounds {
            floors.push(floor_sequential(plan.sequential).await);
            let (time, round_cut) = fit(samples)?;
            fits.push(time);
            cut = round_cut;
        }
        let (floor, ours) = (micros(median(floors)), micros(median(fits)));
        let bytes = (RESULTS / 2) * (SMALL + LARGE);
        Ok(vec![Row {
            figure: format!(
                "one turn of {RESULTS} tool results fitted ({} KB, {cut} cut to share {ROOM} tokens)",
                bytes / 1024
            ),
            flavor: flavor.name(),
            ours: format!("{ours:.0} µs ({:.0} MB/s)", bytes as f64 / ours),
            floor: format!("{floor:.2} µs"),
            ratio: format!("{:.0}×", ratio(ours, floor)),
            target: "(none: reported)".to_owned(),
        }])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_is_fitted_and_its_large_results_cut() {
        let (_, cut) = fit(1).unwrap();
        assert_eq!(cut, RESULTS / 2);
        let rows = rows(&Plan::smoke(), Flavor::CurrentThread).unwrap();
        assert!(
            rows[0].figure.starts_with("one turn of 100 tool results fitted"),
            "{}",
            rows[0].figure
        );
    }
}
