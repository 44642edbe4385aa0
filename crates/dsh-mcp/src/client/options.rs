//! How the client starts and releases a server: the options every mount
//! takes, read by the client and by the server process it spawns.

use std::path::PathBuf;
use std::time::Duration;

use dsh_tools::ResultPolicy;

/// How servers are started and released.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long `initialize` and `tools/list` together may take (default 30 s).
    pub startup_timeout: Duration,
    /// At release: how long the server may take to exit after its stdin closes (default 2 s).
    pub eof_grace: Duration,
    /// At release: how long the group may take to exit after SIGTERM, before SIGKILL (default 2 s).
    pub term_grace: Duration,
    /// Variables set for a server started as a process, on top of the
    /// environment it inherits (default none); they win over inherited values.
    pub env: Vec<(String, String)>,
    /// Variables of ours a server started as a process never inherits
    /// (default none): secrets that are not its business, such as the
    /// token that guards our own server.
    pub withheld_env: Vec<String>,
    /// The working directory of a server started as a process (default:
    /// ours).
    pub cwd: Option<PathBuf>,
    /// The result budget of every tool mounted, and where a result it cuts
    /// is kept for paged reads (default: 8,000 tokens, nothing kept).
    pub results: ResultPolicy,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            eof_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            env: Vec::new(),
            withheld_env: Vec::new(),
            cwd: None,
            results: ResultPolicy::default(),
        }
    }
}

impl ClientOptions {
    /// Sets [`ClientOptions::startup_timeout`].
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets one variable for the server's process (see [`ClientOptions::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Withholds one of our variables from the server's process (see
    /// [`ClientOptions::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, key: impl Into<String>) -> Self {
        self.withheld_env.push(key.into());
        self
    }

    /// Sets the working directory of the server's process.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets [`ClientOptions::results`]: the mounted tools' result budget,
    /// and where a result it cuts is kept.
    #[must_use]
    pub fn results(mut self, results: ResultPolicy) -> Self {
        self.results = results;
        self
    }

    /// Sets both release graces.
    #[must_use]
    pub fn release_graces(mut self, eof: Duration, term: Duration) -> Self {
        self.eof_grace = eof;
        self.term_grace = term;
        self
    }
}
