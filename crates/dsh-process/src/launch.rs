//! How a process is launched and released, apart from which program: the
//! one description the MCP client and the ACP provider both keep.

use std::path::PathBuf;
use std::time::Duration;

use crate::{Environment, Ladder};

/// How a process is launched and released: where its environment comes
/// from, the variables set and withheld, its working directory, and the
/// graces of its teardown. Which program runs, with which arguments, is
/// given beside it ([`ChildSpec::new`](crate::ChildSpec::new) and
/// [`ChildSpec::args`](crate::ChildSpec::args)): an MCP server's spec, an ACP
/// child's command.
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
    pub fn inherit_env(mut self, name: impl Into<String>) -> Self {
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
