//! `cargo run --release -p dsh-bench -- [--quick]`: prints the benchmark table.
//!
//! `--in-flight <N> <flavor>` is the child mode the memory figure runs in (a
//! fresh process, so its peak RSS belongs to that measurement alone).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use dsh_bench::{Flavor, Plan};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => run(Plan::full()),
        ["--quick"] => run(Plan::quick()),
        ["--in-flight", count, flavor] => {
            let (Ok(count), Some(flavor)) = (count.parse::<usize>(), Flavor::parse(flavor)) else {
                return usage();
            };
            match dsh_bench::in_flight_child(count, flavor) {
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
        _ => usage(),
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

fn usage() -> ExitCode {
    eprintln!("usage: dsh-bench [--quick]");
    ExitCode::FAILURE
}
