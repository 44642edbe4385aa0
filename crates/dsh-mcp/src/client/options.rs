//! How the client starts servers and bounds their results: the options
//! every mount takes. How a server's process is launched is its own
//! ([`McpServerSpec::default_launch`](crate::McpServerSpec::default_launch)
//! and the spec's [`Program`](dsh_process::Program)).

use std::time::Duration;

use dsh_process::{Environment, Ladder, Launch};
use dsh_tools::ResultPolicy;

/// How long the group may take to vanish after SIGKILL.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

/// How long a server may take to exit after its stdin closes, and its
/// group after SIGTERM, by default.
const GRACE: Duration = Duration::from_secs(2);

/// How a server run as a process is launched and released unless its spec
/// says otherwise: it inherits our whole environment (it is the user's own
/// tool, often needing the user's credentials), runs in our working
/// directory, and at release may take 2 s to exit after its stdin closes
/// and 2 s after SIGTERM, before SIGKILL, and 5 s to vanish after SIGKILL.
pub(crate) fn default_launch() -> Launch {
    Launch::new(Environment::Inherited, Ladder::new(GRACE, GRACE).kill_wait(KILL_WAIT))
}

/// How servers are started, and how their results are bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientOptions {
    /// How long `initialize` and `tools/list` together may take (default 30 s).
    pub startup_timeout: Duration,
    /// The result budget of every tool mounted, and where a result it cuts
    /// is kept for paged reads (default: 8,000 tokens, nothing kept).
    pub results: ResultPolicy,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            startup_timeout: Duration::from_secs(30),
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

    /// Sets [`ClientOptions::results`]: the mounted tools' result budget,
    /// and where a result it cuts is kept.
    #[must_use]
    pub fn results(mut self, results: ResultPolicy) -> Self {
        self.results = results;
        self
    }
}
