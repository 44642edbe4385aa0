//! How a process is launched and released, apart from which program (that
//! is [`Program`](crate::Program), which holds one): its environment,
//! working directory and the graces of its teardown ladder.

use std::path::PathBuf;
use std::time::Duration;

use crate::Environment;

/// How long the group may take to vanish after SIGKILL by default
/// ([`Ladder::kill_wait`]). SIGKILL cannot be caught; only a process stuck
/// in the kernel (uninterruptible sleep) outlives it, and zombies count as
/// gone.
pub const DEFAULT_KILL_WAIT: Duration = Duration::from_millis(1000);

/// How long a child may take to exit after its stdin closed, by default
/// ([`ChildSpec::new`](crate::ChildSpec::new)).
pub const DEFAULT_EOF_GRACE: Duration = Duration::from_millis(500);

/// How long a group may take to exit after SIGTERM, by default
/// ([`ChildSpec::new`](crate::ChildSpec::new)).
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_millis(1500);

/// The graces of the teardown ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ladder {
    /// How long the child may take to exit after its stdin closed.
    pub eof_grace: Duration,
    /// How long the group may take to exit after SIGTERM, before SIGKILL.
    pub term_grace: Duration,
    /// How long the group may take to vanish after SIGKILL before the
    /// teardown fails.
    pub kill_wait: Duration,
}

impl Ladder {
    /// A ladder with these graces and the default wait after SIGKILL
    /// ([`DEFAULT_KILL_WAIT`]).
    pub fn new(eof_grace: Duration, term_grace: Duration) -> Self {
        Self {
            eof_grace,
            term_grace,
            kill_wait: DEFAULT_KILL_WAIT,
        }
    }

    /// Sets [`Ladder::kill_wait`].
    #[must_use]
    pub fn kill_wait(mut self, wait: Duration) -> Self {
        self.kill_wait = wait;
        self
    }

    /// The longest a teardown on this ladder takes.
    pub fn longest(&self) -> Duration {
        self.eof_grace + self.term_grace + self.kill_wait
    }
}

/// How a process is launched and released: where its environment comes
/// from, the variables set and withheld, its working directory, and the
/// graces of its teardown. A [`Program`](crate::Program) holds one, with the
/// program it runs and that program's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Launch {
    /// Where the environment comes from.
    pub environment: Environment,
    /// Variables set for the process, on top of what the policy gives; they
    /// win over inherited values.
    pub env: Vec<(String, String)>,
    /// Names of the parent's variables the process never gets, whatever the
    /// policy (a secret such as the token that guards the parent's own
    /// server). An explicit [`Launch::env`] entry of that name is still set.
    pub withheld_env: Vec<String>,
    /// The working directory; `None` means the parent's.
    pub cwd: Option<PathBuf>,
    /// The graces of its teardown: after its stdin closes, after SIGTERM,
    /// and after SIGKILL.
    pub teardown: Ladder,
}

impl Launch {
    /// A launch with this environment policy and teardown ladder, no
    /// variable set or withheld, in the parent's working directory.
    pub fn new(environment: Environment, teardown: Ladder) -> Self {
        Self {
            environment,
            env: Vec::new(),
            withheld_env: Vec::new(),
            cwd: None,
            teardown,
        }
    }

    /// Sets one variable (see [`Launch::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Passes one of the parent's variables on, when the parent has it,
    /// under [`Environment::Scrubbed`]; the inherited environment already has
    /// every one.
    #[must_use]
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        if let Environment::Scrubbed { pass } = &mut self.environment {
            pass.push(name.into());
        }
        self
    }

    /// Withholds one of the parent's variables (see [`Launch::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, name: impl Into<String>) -> Self {
        self.withheld_env.push(name.into());
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets the teardown's grace after stdin closes ([`Ladder::eof_grace`]).
    #[must_use]
    pub fn eof_grace(mut self, grace: Duration) -> Self {
        self.teardown.eof_grace = grace;
        self
    }

    /// Sets the teardown's grace after SIGTERM ([`Ladder::term_grace`]).
    #[must_use]
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.teardown.term_grace = grace;
        self
    }
}
