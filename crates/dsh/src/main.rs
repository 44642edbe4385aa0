#![doc = include_str!("../README.md")]

mod acp;
mod cli;
mod config;
mod config_check;
mod loop_guard;
mod mcp;
mod mcp_servers;
mod model;
mod observe;
mod progress;
mod resume;
mod retention;
mod run;
mod runtime;
mod setup;
mod telemetry;
mod transcript;
mod wording;

use std::process::ExitCode;

use clap::Parser;

/// Why `dsh` exits non-zero: a message for stderr and an exit code.
pub(crate) struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// Bad input or configuration.
    fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// The task did not complete.
    fn failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }

    /// Interrupted by the user.
    fn interrupted(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 130,
        }
    }

    /// A refused configuration file.
    fn config(error: &config::ConfigFileError) -> Self {
        Self::usage(wording::failed(error))
    }

    /// The message for stderr.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// A bug in dsh itself.
    fn internal(message: impl Into<String>) -> Self {
        Self {
            message: wording::internal_error(&message.into()),
            code: 70,
        }
    }
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let telemetry = telemetry::init();
    let outcome = match cli.command {
        cli::Command::Run(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(run::run(args)),
            Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
        },
        cli::Command::Transcript(args) => transcript::print(&args),
        cli::Command::Config(cli::ConfigCommand::Check(args)) => config_check::check(&args),
        // One thread: an ACP agent waits on its client, its model and its
        // children, and starts (and ends) faster without worker threads to
        // start and join; an ACP client starts one per child it delegates to.
        cli::Command::Acp(args) => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(async {
                // Ctrl-C ends the server cleanly, so its spans are flushed.
                tokio::select! {
                    served = acp::serve(args) => served,
                    _ = tokio::signal::ctrl_c() => Err(Failure::interrupted(wording::INTERRUPTED)),
                }
            }),
            Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
        },
        cli::Command::Mcp(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(mcp::serve(args)),
            Err(error) => Err(Failure::internal(wording::runtime_failed(&error))),
        },
    };
    // Spans are flushed on every way out (a Ctrl-C ends the run first).
    telemetry.shutdown();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
