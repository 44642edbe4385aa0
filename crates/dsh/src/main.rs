#![doc = include_str!("../README.md")]

mod acp;
mod cassette;
mod cassette_mode;
mod check_acp;
mod cli;
mod config;
mod config_check;
mod delegations;
mod failure;
mod harness;
mod live;
mod mcp_mounts;
mod mcp_server;
mod model;
mod observe;
mod prices;
mod progress;
mod resume;
mod retention;
mod run;
mod runtime;
mod self_mount;
mod signal;
mod task_input;
mod telemetry;
mod transcript;
mod tree;
mod wording;

use std::process::ExitCode;

use clap::Parser;

use crate::failure::Failure;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let telemetry = telemetry::init();
    let outcome = match cli.command {
        cli::Command::Run(mut args) => {
            // The task is read and checked first: bad input starts nothing.
            // A resume needs none: its interrupted turn simply goes on.
            let task = match (args.task.take(), args.task_file.take()) {
                (None, None) if args.resume.is_some() => Ok(None),
                (None, None) => Err(wording::TASK_MISSING.to_owned()),
                (task, file) => task_input::TaskSource::new(task, file)
                    .read(std::io::stdin().lock())
                    .map(Some),
            };
            match task {
                Err(message) => Err(Failure::usage(message)),
                Ok(task) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                    Ok(runtime) => runtime.block_on(run::run(args, task)),
                    Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
                },
            }
        }
        cli::Command::Transcript(args) => transcript::print(&args),
        cli::Command::Tree(args) => tree::print(&args),
        cli::Command::Config(cli::ConfigCommand::Check(args)) => config_check::check(&args),
        cli::Command::Cassette(command) => cassette::run(&command),
        // One thread, as `dsh acp`: the check waits on one agent.
        cli::Command::Check(cli::CheckCommand::Acp(args)) => {
            match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime.block_on(check_acp::run(args)),
                Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
            }
        }
        // One thread: an ACP agent waits on its client, its model and its
        // children, and starts (and ends) faster without worker threads to
        // start and join; an ACP client starts one per child it delegates to.
        cli::Command::Acp(args) => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            // SIGINT and SIGTERM end the server cleanly (acp::serve), so its
            // spans are flushed and its recording closed.
            Ok(runtime) => runtime.block_on(acp::serve(args)),
            Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
        },
        cli::Command::Mcp(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => {
                let served = runtime.block_on(mcp_server::serve(args));
                // Stdin's read, still blocked when a signal ended the
                // session, is not waited for.
                runtime.shutdown_background();
                served
            }
            Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
        },
    };
    // Spans are flushed on every way out (a Ctrl-C ends the run first).
    telemetry.shutdown();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.message());
            ExitCode::from(failure.code())
        }
    }
}
