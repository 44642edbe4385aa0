//! `cargo run --release -p dsh-bench -- [--quick]`: prints the benchmark table.
//!
//! `--only acp` (with or without `--quick`) prints only the `dsh acp`
//! delegation rows. `DSH_BENCH_DSH_BIN` names the `dsh` binary they run;
//! unset, the bench builds it with `cargo build -p dsh` when started by Cargo.
//!
//! `--only limits` prints only the bounded-delegation rows, `--only context`
//! only the context fit's, `--only answer` only the long answer's,
//! `--only cassette` only the cassettes' (recording, replay, lookup; with the
//! load average before and after),
//! `--only tree` only `dsh tree`'s on a generated data directory,
//! `--only live` only `dsh run`'s live view's, `--only delegation` only the
//! delegation's (sequential, concurrent, cancelled; `--quick` too),
//! `--only durable` only the transcripts' and the crashed tree's resume,
//! `--only resume` only the resume.
//!
//! `--in-flight <N> <flavor>` and `--queued <N> <flavor>` are the child modes
//! the memory figures run in (a fresh process, so its peak RSS belongs to
//! that measurement alone), `--answer <bytes> <flavor>` the long
//! answer's, `--answer-http <bytes>` the long answer's through `dsh run`
//! (the `dsh` binary named by `DSH_BENCH_DSH_BIN`), and
//! `--replay-memory <requests> <flavor>` the replay's; `--tree <dsh>` the
//! `dsh tree` measurement's, `--resume-tree <dsh> <dir> <root>` the
//! resume's.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use dsh_bench::{Flavor, Plan};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => run(Plan::full()),
        ["--quick"] => run(Plan::quick()),
        ["--only", "acp"] => run_acp(&Plan::full()),
        ["--quick", "--only", "acp"] | ["--only", "acp", "--quick"] => run_acp(&Plan::quick()),
        ["--only", "limits"] => run_limits(&Plan::full()),
        ["--only", "delegation"] => print_rows(dsh_bench::delegation_rows(&Plan::full())),
        ["--quick", "--only", "delegation"] | ["--only", "delegation", "--quick"] => {
            print_rows(dsh_bench::delegation_rows(&Plan::quick()))
        }
        ["--only", "durable"] => run_durable(&Plan::full()),
        ["--only", "resume"] => print_rows(dsh_bench::resume::rows(Plan::full().resume_runs)),
        ["--resume-tree", dsh, dir, root] => print_child(dsh_bench::resume::measure_child(
            std::path::Path::new(dsh),
            std::path::Path::new(dir),
            root,
        )),
        ["--only", "context"] => run_context(&Plan::full()),
        ["--only", "answer"] => run_answer(&Plan::full()),
        ["--only", "cassette"] => run_cassette(&Plan::full()),
        ["--only", "tree"] => print_rows(dsh_bench::tree::rows()),
        ["--only", "live"] => print_rows(dsh_bench::live::rows(Plan::full().live_runs)),
        ["--only", "subagents"] => print_rows(dsh_bench::acp_subagents::rows(Plan::full().acp_samples)),
        ["--tree", dsh] => print_child(dsh_bench::tree::measure_child(std::path::Path::new(dsh))),
        ["--answer-http", bytes] => match bytes.parse::<usize>() {
            Ok(bytes) => print_child(dsh_bench::answer_http::memory_child(bytes)),
            Err(_) => usage(),
        },
        [
            mode @ ("--in-flight" | "--queued" | "--answer" | "--replay-memory"),
            count,
            flavor,
        ] => {
            let (Ok(count), Some(flavor)) = (count.parse::<usize>(), Flavor::parse(flavor)) else {
                return usage();
            };
            print_child(match *mode {
                "--queued" => dsh_bench::limits::queued_child(count, flavor),
                "--answer" => dsh_bench::answer::memory_child(count, flavor),
                "--replay-memory" => dsh_bench::cassette::replay_memory_child(count, flavor),
                _ => dsh_bench::in_flight_child(count, flavor),
            })
        }
        _ => usage(),
    }
}

/// Prints what a child mode measured, or why it could not.
fn print_child(child: Result<String, String>) -> ExitCode {
    match child {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("dsh-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(plan: Plan) -> ExitCode {
    match dsh_bench::run(&plan) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("dsh-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Only the context fit's rows.
fn run_context(plan: &Plan) -> ExitCode {
    let rows = Flavor::ALL.into_iter().try_fold(Vec::new(), |mut rows, flavor| {
        rows.extend(dsh_bench::context::rows(plan, flavor)?);
        Ok::<_, String>(rows)
    });
    print_rows(rows)
}

/// Only the cassettes' rows; the load average before and after them.
fn run_cassette(plan: &Plan) -> ExitCode {
    let before = load();
    let rows = Flavor::ALL.into_iter().try_fold(Vec::new(), |mut rows, flavor| {
        rows.extend(dsh_bench::cassette::rows(plan, flavor, true)?);
        Ok::<_, String>(rows)
    });
    let code = print_rows(rows);
    println!();
    println!("load before: {}load after:  {}", before, load());
    code
}

/// `/proc/loadavg`, as it reads.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

/// Only the durable writing's rows (transcripts on both flavors, then the
/// resume of a crashed tree).
fn run_durable(plan: &Plan) -> ExitCode {
    let rows = Flavor::ALL.into_iter().try_fold(Vec::new(), |mut rows, flavor| {
        rows.extend(dsh_bench::durable::rows(plan, flavor)?);
        Ok::<_, String>(rows)
    });
    let rows = rows.and_then(|mut rows| {
        rows.extend(dsh_bench::resume::rows(plan.resume_runs)?);
        Ok(rows)
    });
    print_rows(rows)
}

/// Only the long answer's rows.
fn run_answer(plan: &Plan) -> ExitCode {
    let rows = Flavor::ALL.into_iter().try_fold(Vec::new(), |mut rows, flavor| {
        rows.extend(dsh_bench::answer::rows(plan, flavor)?);
        rows.push(dsh_bench::answer::memory_row(flavor)?);
        Ok::<_, String>(rows)
    });
    let rows = rows.map(|mut rows| {
        rows.push(dsh_bench::answer_http::memory_row_or_failed());
        rows
    });
    print_rows(rows)
}

/// Prints the rows as a table, or the error that stopped them.
fn print_rows(rows: Result<Vec<dsh_bench::Row>, String>) -> ExitCode {
    match rows {
        Ok(rows) => {
            print!(
                "{}",
                dsh_bench::Report {
                    machine: dsh_bench::machine(),
                    rows
                }
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("dsh-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Only the bounded-delegation rows.
fn run_limits(plan: &Plan) -> ExitCode {
    let rows = Flavor::ALL.into_iter().try_fold(Vec::new(), |mut rows, flavor| {
        rows.extend(dsh_bench::limits::rows(plan, flavor)?);
        rows.push(dsh_bench::limits::queued_memory_row(10_000, flavor)?);
        Ok::<_, String>(rows)
    });
    print_rows(rows)
}

/// Only the `dsh acp` rows; the load average before and after them.
fn run_acp(plan: &Plan) -> ExitCode {
    let before = load();
    let rows = dsh_bench::acp::rows(plan.acp_samples).and_then(|mut rows| {
        rows.extend(dsh_bench::acp_subagents::rows(plan.acp_samples)?);
        Ok(rows)
    });
    match rows {
        Ok(rows) => {
            let report = dsh_bench::Report {
                machine: dsh_bench::machine(),
                rows,
            };
            print!("{report}");
            println!();
            println!("load before: {}load after:  {}", before, load());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("dsh-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: dsh-bench [--quick] [--only acp|subagents|limits|context|answer|cassette|tree|live|delegation|durable|resume]"
    );
    ExitCode::FAILURE
}
