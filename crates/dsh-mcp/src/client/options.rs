//! How the client starts and releases a server: the options every mount
//! takes, read by the client and by the server process it spawns.

use std::path::PathBuf;
use std::time::Duration;

use dsh_process::{Environment, Ladder, Launch};
use dsh_tools::ResultPolicy;

/// How long the group may take to vanish after SIGKILL.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

/// How servers are started and released.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long `initialize` and `tools/list` together may take (default 30 s).
    pub startup_timeout: Duration,
    /// How a server started as a process is launched and released: it
    /// inherits our environment less [`Launch::withheld_env`] (default none:
    /// secrets that are not its business, such as the token that guards our
    /// own server), with [`Launch::env`] on top (default none; they win); it
    /// runs in [`Launch::cwd`] (default: ours); at release it may take
    /// [`Ladder::eof_grace`] to exit after its stdin closes and
    /// [`Ladder::term_grace`] after SIGTERM, before SIGKILL (default 2 s
    /// each), and 5 s to vanish after SIGKILL.
    pub launch: Launch,
    /// The result budget of every tool mounted, and where a result it cuts
    /// is kept for paged reads (default: 8,000 tokens, nothing kept).
    pub results: ResultPolicy,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
            launch: Launch::new(
                Environment::Inherited,
                Ladder::new(Duration::from_secs(2), Duration::from_secs(2)).kill_wait(KILL_WAIT),
            ),
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

    /// Sets one variable for the server's process ([`Launch::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.launch = self.launch.env(key, value);
        self
    }

    /// Withholds one of our variables from the server's process
    /// ([`Launch::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, key: impl Into<String>) -> Self {
        self.launch = self.launch.withhold_env(key);
        self
    }

    /// Sets the working directory of the server's process ([`Launch::cwd`]).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.launch = self.launch.cwd(cwd);
        self
    }

    /// Sets [`ClientOptions::results`]: the mounted tools' result budget,
    /// and where a result it cuts is kept.
    #[must_use]
    pub fn results(mut self, results: ResultPolicy) -> Self {
        self.results = results;
        self
    }

    /// Sets how long the server may take to exit after its stdin closes, at
    /// release ([`Launch::eof_grace`]).
    #[must_use]
    pub fn eof_grace(mut self, grace: Duration) -> Self {
        self.launch = self.launch.eof_grace(grace);
        self
    }

    /// Sets how long the group may take to exit after SIGTERM, before
    /// SIGKILL, at release ([`Launch::term_grace`]).
    #[must_use]
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.launch = self.launch.term_grace(grace);
        self
    }
}
