//! Why a server could not be mounted or released: the client's errors, each
//! naming the server, with the cause typed and reachable through
//! [`std::error::Error::source`].

use std::fmt;
use std::time::Duration;

use dsh_process::TeardownError;
use dsh_tools::RegistryError;

use crate::{BoxedCause, wording};

/// Why a server could not be mounted: it names the server and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{}", wording::start_error(server, &cause.to_string()))]
#[non_exhaustive]
pub struct McpStartError {
    /// The server's name.
    pub server: String,
    /// What went wrong (its text is the end of this error's).
    #[source]
    pub cause: StartFailure,
}

/// What kept a server from being mounted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartFailure {
    /// The server's program could not be run.
    #[error("{}", wording::cannot_run(program, source))]
    CannotRun {
        /// The program.
        program: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A step of the handshake failed while the server still ran.
    #[error("{}", wording::handshake_failed(step.as_str(), &source.to_string()))]
    Handshake {
        /// The step that failed.
        step: HandshakeStep,
        /// The SDK's error.
        source: BoxedCause,
    },
    /// The server process ended during the handshake.
    #[error("{}", wording::exited_before_answering(how, step.as_str()))]
    ExitedBeforeAnswering {
        /// How it ended, in words (with its last line of stderr, if any).
        how: String,
        /// The step it did not answer.
        step: HandshakeStep,
        /// The SDK's error for that step.
        source: BoxedCause,
    },
    /// The server did not answer `initialize` and `tools/list` in time.
    #[error("{}", wording::startup_timed_out(*timeout))]
    TimedOut {
        /// The startup timeout.
        timeout: Duration,
    },
    /// The variable that holds a remote server's bearer token is unset or empty.
    #[error("{}", wording::token_variable_unset(variable))]
    TokenVariableUnset {
        /// The variable's name.
        variable: String,
    },
    /// A header of a remote server that HTTP cannot carry.
    #[error("{}", wording::spec_bad_header(header))]
    BadHeader {
        /// The header's name.
        header: String,
    },
    /// The HTTP client could not be built.
    #[error("{}", crate::client::http::describe(source.as_ref()))]
    HttpClient {
        /// The HTTP client's error.
        source: BoxedCause,
    },
    /// A remote server could not be reached at all during the handshake.
    #[error("{}", wording::unreachable(url, error))]
    Unreachable {
        /// The server's URL.
        url: String,
        /// The HTTP client's error with its causes, in words.
        error: String,
        /// The SDK's error for the handshake step (the HTTP client's
        /// error is below it).
        source: BoxedCause,
    },
    /// A remote server answered the handshake with an HTTP error.
    #[error("{}", wording::http_refused(url, *status))]
    Refused {
        /// The server's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The SDK's error for the handshake step.
        source: BoxedCause,
    },
    /// One of the server's tools could not be mounted (its name is taken).
    #[error("{0}")]
    Register(#[source] RegistryError),
}

/// A step of the MCP handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandshakeStep {
    /// `initialize`.
    Initialize,
    /// `tools/list`.
    ToolsList,
}

impl HandshakeStep {
    /// The step's method name, e.g. `tools/list`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::ToolsList => "tools/list",
        }
    }
}

impl fmt::Display for HandshakeStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a server's process group could not be released: it names the server
/// and what was still there.
#[derive(Debug, thiserror::Error)]
#[error("{}", wording::release_error(server, &wording::teardown_failed(cause)))]
#[non_exhaustive]
pub struct McpReleaseError {
    /// The server's name.
    pub server: String,
    /// What the teardown of its process group met.
    #[source]
    pub cause: TeardownError,
}
