//! Cassettes (`dsh_llm::cassette`): what recording costs
//! ([`recording`](crate::recording)), what replaying a 1,000-request
//! cassette with 8 children at once costs in time and memory, and that
//! finding a request does not grow with the cassette (an index, not a
//! scan).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_llm::cassette::{Cassette, Recorder, RecordingModel, ReplayModel, Timing};
use dsh_llm::{CancellationToken, ChatModel, ChatRequest, Message, ScriptedModel, complete};

use crate::delegation::Scratch;
use crate::memory::child_numbers;
use crate::{Flavor, Plan, Row, median, micros, ratio, status_kb, yes_no};

/// The requests of the replay figures' cassette.
pub const REPLAYED: usize = 1_000;

/// Children replaying at once.
pub const CHILDREN: usize = 8;

/// The cassette sizes the lookup is timed at.
pub const SIZES: [usize; 3] = [100, 1_000, 10_000];

/// `count` distinct requests, as `CHILDREN` children ask them (each child
/// its own conversation).
fn requests(count: usize) -> Vec<ChatRequest> {
    (0..count)
        .map(|index| {
            ChatRequest::new(vec![
                Message::system(format!("You are child {}.", index % CHILDREN)),
                Message::user(format!("Question {index}: what is {index} squared?")),
            ])
        })
        .collect()
}

/// Records `count` requests on the scripted model into `file`.
async fn record(file: &std::path::Path, count: usize) -> Result<(), String> {
    let recorder = Recorder::create(file).map_err(|error| error.to_string())?;
    let model = RecordingModel::new(ScriptedModel::builtin(), &recorder).map_err(|error| error.to_string())?;
    let cancel = CancellationToken::new();
    for request in requests(count) {
        complete(&model, request, &cancel)
            .await
            .map_err(|error| error.to_string())?;
    }
    recorder.finish().map_err(|error| error.to_string())?;
    Ok(())
}

/// Asks every request of `requests(count)` of `model`, `CHILDREN` at once
/// (child `c` asks requests c, c + 8, …); the time for all.
async fn ask_all(model: Arc<dyn ChatModel>, count: usize) -> Result<Duration, String> {
    let requests = requests(count);
    let start = Instant::now();
    let children: Vec<_> = (0..CHILDREN)
        .map(|child| {
            let model = model.clone();
            let mine: Vec<ChatRequest> = requests.iter().skip(child).step_by(CHILDREN).cloned().collect();
            tokio::spawn(async move {
                let cancel = CancellationToken::new();
                for request in mine {
                    complete(&*model, request, &cancel)
                        .await
                        .map_err(|error| error.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for child in children {
        child.await.map_err(|error| error.to_string())??;
    }
    Ok(start.elapsed())
}

/// Replaying a `REPLAYED`-request cassette with `CHILDREN` children at once
/// (the cassette loaded, then every request answered), against the same
/// requests asked of the scripted model itself.
pub fn replay_row(plan: &Plan, flavor: Flavor) -> Result<Row, String> {
    let scratch = Scratch::new("replay")?;
    let file = scratch.path().join("replay.jsonl");
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        record(&file, REPLAYED).await?;
        let (mut floors, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..plan.rounds.max(1) {
            floors.push(ask_all(Arc::new(ScriptedModel::builtin()), REPLAYED).await?);
            let start = Instant::now();
            let cassette = Cassette::load(&file).map_err(|error| error.to_string())?;
            let asked = ask_all(Arc::new(ReplayModel::new(cassette, Timing::Fast)), REPLAYED).await?;
            ours.push(start.elapsed().max(asked));
        }
        let (ours, floor) = (micros(median(ours)), micros(median(floors)));
        Ok(Row {
            figure: format!("replay a {REPLAYED}-request cassette, {CHILDREN} children at once (load included)"),
            flavor: flavor.name(),
            ours: format!("{:.1} ms", ours / 1e3),
            floor: format!("{:.1} ms (the scripted model asked)", floor / 1e3),
            ratio: format!("{:.1}×", ratio(ours, floor)),
            target: "(none: time reported)".to_owned(),
        })
    })
}

/// The child-process half of the replay's memory figure: records a
/// `count`-request cassette, then loads and replays it with `CHILDREN`
/// children; prints `<baseline kB> <peak kB>`.
pub fn replay_memory_child(count: usize, flavor: Flavor) -> Result<String, String> {
    let scratch = Scratch::new("replay-memory")?;
    let file = scratch.path().join("replay.jsonl");
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        record(&file, count).await?;
        // Warm the runtime and the scripted model on the same requests.
        ask_all(Arc::new(ScriptedModel::builtin()), count).await?;
        let baseline = status_kb("VmRSS")?;
        let cassette = Cassette::load(&file).map_err(|error| error.to_string())?;
        ask_all(Arc::new(ReplayModel::new(cassette, Timing::Fast)), count).await?;
        let peak = status_kb("VmHWM")?;
        Ok(format!("{baseline} {peak}"))
    })
}

/// The replay's memory row, measured in a fresh process.
pub fn replay_memory_row(flavor: Flavor) -> Result<Row, String> {
    let [baseline, peak] = child_numbers("--replay-memory", REPLAYED, flavor)?;
    let grown = peak.saturating_sub(baseline) as f64 / 1024.0;
    Ok(Row {
        figure: format!(
            "peak memory replaying a {REPLAYED}-request cassette, {CHILDREN} children at once (above the baseline)"
        ),
        flavor: flavor.name(),
        ours: format!("{grown:.1} MB"),
        floor: "-".to_owned(),
        ratio: "-".to_owned(),
        target: "(none: memory reported)".to_owned(),
    })
}

/// Finding a request: the median time to answer one request from a
/// cassette of each of [`SIZES`] (the last recorded request, asked alone;
/// the cassette loaded afresh each round so the request is unused), and the
/// largest against the smallest.
pub fn lookup_rows(plan: &Plan, flavor: Flavor) -> Result<Vec<Row>, String> {
    let scratch = Scratch::new("lookup")?;
    let runtime = flavor.runtime()?;
    runtime.block_on(async {
        let mut times = Vec::new();
        for size in SIZES {
            let file = scratch.path().join(format!("lookup-{size}.jsonl"));
            record(&file, size).await?;
            let cassette = Cassette::load(&file).map_err(|error| error.to_string())?;
            let ask: Vec<ChatRequest> = requests(size);
            let samples = (plan.rounds.max(1) * 100).min(size);
            let replay = ReplayModel::new(cassette, Timing::Fast);
            let cancel = CancellationToken::new();
            let mut found = Vec::with_capacity(samples);
            // Each a different request, spread over the whole cassette.
            for request in ask.into_iter().rev().step_by((size / samples).max(1)).take(samples) {
                let start = Instant::now();
                complete(&replay, request, &cancel)
                    .await
                    .map_err(|error| error.to_string())?;
                found.push(start.elapsed());
            }
            times.push((size, micros(median(found))));
        }
        let smallest = times.first().map_or(0.0, |(_, time)| *time);
        Ok(times
            .into_iter()
            .map(|(size, time)| {
                let grows = ratio(time, smallest);
                Row {
                    figure: format!("answer one request from a {size}-request cassette"),
                    flavor: flavor.name(),
                    ours: format!("{time:.1} µs"),
                    floor: format!("{smallest:.1} µs (from {} requests)", SIZES[0]),
                    ratio: format!("{grows:.2}×"),
                    target: format!("≤ 2× at 100× the size (an index): {}", yes_no(grows <= 2.0)),
                }
            })
            .collect())
    })
}

/// Every cassette row of one flavor (the memory row measured in a fresh
/// process when `memory`).
pub fn rows(plan: &Plan, flavor: Flavor, memory: bool) -> Result<Vec<Row>, String> {
    let mut rows = crate::recording::rows(plan, flavor)?;
    rows.push(replay_row(plan, flavor)?);
    if memory {
        rows.push(replay_memory_row(flavor)?);
    }
    rows.extend(lookup_rows(plan, flavor)?);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cassette_rows_measure_what_they_say() {
        let rows = rows(&Plan::smoke(), Flavor::CurrentThread, false).unwrap();
        assert_eq!(rows.len(), crate::recording::ROWS + 1 + SIZES.len());
        assert!(
            rows[0]
                .figure
                .starts_with("a delegation on the scripted model, recorded")
        );
        let last = &rows[rows.len() - 1].figure;
        assert!(last.contains("10000-request"), "{last}");
    }
}
