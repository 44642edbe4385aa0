#![doc = include_str!("../README.md")]

mod acp;
mod cli;
mod config;
mod config_check;
mod mcp;
mod model;
mod progress;
mod resume;
mod run;
mod setup;
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
        Self::usage(format!("dsh: {error}"))
    }

    /// The message for stderr.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// A bug in dsh itself.
    fn internal(message: impl Into<String>) -> Self {
        Self {
            message: format!("dsh: internal error: {}", message.into()),
            code: 70,
        }
    }
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("DSH_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a parent that reads our
        // stderr (an ACP client quoting its tail) gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let outcome = match cli.command {
        cli::Command::Run(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(run::run(args)),
            Err(error) => Err(Failure::internal(format!("cannot start the async runtime: {error}"))),
        },
        cli::Command::Transcript(args) => transcript::print(&args),
        cli::Command::Config(cli::ConfigCommand::Check(args)) => config_check::check(&args),
        cli::Command::Acp(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(acp::serve(args)),
            Err(error) => Err(Failure::internal(format!("cannot start the async runtime: {error}"))),
        },
        cli::Command::Mcp(args) => match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(mcp::serve(args)),
            Err(error) => Err(Failure::internal(format!("cannot start the async runtime: {error}"))),
        },
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
