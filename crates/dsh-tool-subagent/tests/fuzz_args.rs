//! A stable-toolchain fuzzer for argument parsing and result rendering
//! (cargo-fuzz needs nightly).
//!
//! It feeds every file of the committed corpus (`fuzz/corpus/`), then
//! mutates corpus entries at random (bit flips, byte inserts and deletes,
//! splices, duplication) for a bounded budget. Each input is used twice:
//! parsed as JSON (or, when it is not JSON, wrapped as a JSON string and as a
//! `prompt`) and sent as the tool's arguments; and split into a stop reason,
//! a reply and a diagnostic for a scripted child whose outcome the tool
//! renders. Every call must answer with the child's reply or an `Error: …`,
//! never a panic, and must release its child.
//!
//! Budget: `DSH_FUZZ_ITERS` mutations (default 1,000: the smoke run) or
//! `DSH_FUZZ_SECS` seconds; `DSH_FUZZ_SEED` fixes the seed (printed on start).
//! A long run: `DSH_FUZZ_SECS=600 cargo test --release -p dsh-tool-subagent --test fuzz_args -- --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Fixture;
use dsh_subagent_api::StopReason;
use dsh_subagent_testing::scripted::DEFAULT_REPLY;
use serde_json::{Value, json};

/// xorshift64*: deterministic for a seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    entries.iter().map(|path| std::fs::read(path).unwrap()).collect()
}

const INTERESTING: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"\"prompt\"",
    b"\"description\"",
    b"\"run_in_background\"",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b" ",
];

fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = corpus[rng.below(corpus.len())].clone();
    for _ in 0..=rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if !input.is_empty() => {
                let at = at.min(input.len() - 1);
                input[at] ^= 1 << rng.below(8);
            }
            1 => input.insert(at, rng.next() as u8),
            2 if !input.is_empty() => {
                let end = (at + rng.below(8)).min(input.len());
                input.drain(at.min(end)..end);
            }
            3 => {
                let token = INTERESTING[rng.below(INTERESTING.len())];
                input.splice(at..at, token.iter().copied());
            }
            4 => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len());
                input.splice(at..at, other[from..].iter().copied());
            }
            _ => {
                let copy = input.clone();
                input.splice(at..at, copy);
                input.truncate(1 << 16);
            }
        }
    }
    input
}

/// Runs both uses of one input; returns a description of a violation.
fn exercise(runtime: &tokio::runtime::Runtime, fixture: &Fixture, input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input).into_owned();
    let candidates = match serde_json::from_slice::<Value>(input) {
        Ok(value) => vec![value],
        Err(_) => vec![
            Value::String(text.clone()),
            json!({"description": "fuzz", "prompt": text}),
        ],
    };
    for args in candidates {
        let result = runtime.block_on(fixture.call(args));
        let ok = !result.is_error && result.text == DEFAULT_REPLY;
        let clear_error = result.is_error
            && result.text.len() > "Error: ".len()
            && result.text.starts_with("Error: ")
            && matches!(
                result.error.as_ref().and_then(|e| e.code()),
                Some("INVALID_ARGUMENTS" | "BACKGROUND_DISABLED")
            );
        if !(ok || clear_error) {
            return Err(format!("arguments answered {:?}", result.text));
        }
    }
    // The same bytes as a child's outcome: stop reason, reply, diagnostic.
    let mut lines = text.splitn(3, '\n');
    let reason = StopReason::parse(lines.next().unwrap_or_default());
    let reply = lines.next().unwrap_or_default().to_owned();
    let diagnostic = lines.next().map(str::to_owned);
    let child = Fixture::new(|b| {
        let b = b
            .stop_reason(reason.clone())
            .reply(reply.clone())
            .record_requests(false);
        match &diagnostic {
            Some(d) => b.diagnostic(d.clone()),
            None => b,
        }
    });
    let result = runtime.block_on(child.delegate());
    let expected = if reason.is_completed() {
        reply
    } else {
        let bounded = diagnostic.map(dsh_subagent_api::bound_diagnostic);
        format!(
            "Error: {}",
            dsh_tool_subagent::wording::stopped_run(&reason, bounded.as_deref(), &reply)
        )
    };
    if result.text != expected {
        return Err(format!("outcome rendered {:?}, expected {expected:?}", result.text));
    }
    let stats = child.provider.stats();
    if (stats.disposes(), stats.live()) != (1, 0) {
        return Err("the child was not released exactly once".to_owned());
    }
    Ok(())
}

#[test]
fn fuzz_arguments_and_outcomes() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let fixture = Fixture::new(|b| b.record_requests(false));
    let corpus = corpus();
    assert!(!corpus.is_empty(), "the committed corpus is missing");
    for input in &corpus {
        if let Err(violation) = exercise(&runtime, &fixture, input) {
            panic!("corpus input {:?}: {violation}", String::from_utf8_lossy(input));
        }
    }
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("DSH_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }) | 1;
    let deadline = env("DSH_FUZZ_SECS").map(|secs| Instant::now() + Duration::from_secs(secs));
    let iterations = if deadline.is_some() {
        u64::MAX
    } else {
        env("DSH_FUZZ_ITERS").unwrap_or(1_000)
    };
    eprintln!("fuzz: seed {seed}");
    let mut rng = Rng(seed);
    let mut done = 0_u64;
    while done < iterations && deadline.is_none_or(|deadline| Instant::now() < deadline) {
        let input = mutate(&mut rng, &corpus);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(&runtime, &fixture, &input)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(violation)) => panic!("seed {seed}, input {:?}: {violation}", String::from_utf8_lossy(&input)),
            Err(_) => panic!("seed {seed}, input {:?}: panicked", String::from_utf8_lossy(&input)),
        }
        done += 1;
    }
    eprintln!("fuzz: {done} mutated inputs, no violation");
}
