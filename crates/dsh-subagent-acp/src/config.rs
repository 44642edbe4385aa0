//! The provider's configuration: what to run, where, with what, and how long to wait.

use std::path::PathBuf;
use std::time::Duration;

use dsh_process::{Environment, Ladder, Launch, Program, valid_variable_name};

use crate::ByteLimit;

use crate::wording;

/// How long the group may take to vanish after SIGKILL before release reports
/// failure. SIGKILL cannot be caught; only a process stuck in the kernel
/// (uninterruptible sleep) outlives it, and zombies count as gone.
const KILL_WAIT: Duration = Duration::from_millis(1000);

/// The default provider name.
pub const DEFAULT_NAME: &str = "acp";

/// How the provider answers a child's `session/request_permission`.
///
/// Nobody is there to ask: the answer is automatic either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PermissionPolicy {
    /// Choose the child's "reject once" option (else "reject always"); with
    /// neither, answer `cancelled`. The default.
    #[default]
    Reject,
    /// Choose the child's first "allow once" option (else "allow always");
    /// with neither, answer `cancelled`.
    AllowFirst,
}

/// Which authentication method, if any, the provider asks the child for
/// (ACP `authenticate`, between `initialize` and `session/new`).
///
/// Agent products list the methods they accept in their `initialize` answer;
/// a child that needs one refuses `session/new` with "authentication
/// required" until the client has called `authenticate`. The start error then
/// lists the methods the child offered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcpAuth {
    /// Never call `authenticate` (the default): for children that need no
    /// authentication or find their credentials on their own.
    #[default]
    None,
    /// Call `authenticate` with this method id; the start fails if the child
    /// does not offer it.
    Method(String),
    /// Call `authenticate` with the first offered `env_var` method whose
    /// variable is set in the child's environment (see
    /// [`AcpConfig::pass_env`] and [`AcpConfig::env`]); when none is, call
    /// nothing and let the child decide.
    FirstEnvVar,
}

/// Configuration of an [`AcpProvider`](crate::AcpProvider).
///
/// Built with [`AcpConfig::new`] and the builder methods; every field is
/// public for reading. Defaults: no arguments, no extra environment, the
/// parent process's working directory, [`PermissionPolicy::Reject`], no
/// authentication ([`AcpAuth::None`]), a 60 s startup timeout, no turn
/// timeout, a 1000 ms wait for a cancelled turn to end, 500 ms stdin-EOF
/// grace and 1500 ms SIGTERM grace at release, 1 MiB of collected answer text
/// and 4 MiB per protocol line.
///
/// The graces are chosen so that a cancelled delegation is over well inside
/// the `subagent` tool's release grace (5 s): [`AcpConfig::longest_release`]
/// adds them up. Agent products rarely exit when their stdin closes, so the
/// stdin-EOF grace is short; they do exit on SIGTERM.
///
/// ```
/// use std::time::Duration;
/// use dsh_subagent_acp::{AcpConfig, PermissionPolicy};
///
/// let config = AcpConfig::new("dsh")
///     .args(["acp", "--quiet"])
///     .env("DSH_MODEL", "deepseek-chat")
///     .pass_env("DSH_API_KEY")
///     .permission(PermissionPolicy::AllowFirst)
///     .eof_grace(Duration::from_millis(300));
/// assert_eq!(config.program.to_string(), "dsh acp --quiet");
/// assert_eq!(config.program.launch.teardown.term_grace, Duration::from_millis(1500));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcpConfig {
    /// The provider's registered name (default [`DEFAULT_NAME`]).
    pub name: String,
    /// What runs: the command (resolved through the child's `PATH`), its
    /// arguments, and how the child is launched and released: its
    /// environment (scrubbed: [`BASE_ENV`](crate::BASE_ENV), the names
    /// passed on, less the withheld ones, then the variables set), its
    /// working directory (also sent in `session/new`; `None` means the parent
    /// process's working directory at start), and the graces of its teardown
    /// at dispose.
    pub program: Program,
    /// The answer to permission requests.
    pub permission: PermissionPolicy,
    /// The authentication method to ask the child for.
    pub auth: AcpAuth,
    /// How long `initialize`, `authenticate` and `session/new` together may take.
    pub startup_timeout: Duration,
    /// How long one turn (`session/prompt`) may take; when it runs out the
    /// turn is cancelled and the run fails naming the timeout. `None` (the
    /// default) means no limit.
    pub turn_timeout: Option<Duration>,
    /// After a cancellation, how long to wait for the child to end the turn
    /// (`cancelled`) before the run settles `aborted` without it.
    pub cancel_grace: Duration,
    /// The most answer text collected; a child that streams more fails the run.
    pub max_output_bytes: ByteLimit,
    /// The longest protocol line read from the child; a longer one fails the run.
    pub max_line_bytes: ByteLimit,
}

impl AcpAuth {
    /// A child's refusal with "authentication required" under this choice,
    /// with the list of the methods it offered (`None` when it offered none).
    pub(crate) fn required(&self, offered: Option<&str>) -> String {
        let Some(list) = offered else {
            return wording::AUTH_REQUIRED_NO_OFFER.to_owned();
        };
        match self {
            Self::FirstEnvVar => wording::auth_required_env_var(list),
            Self::Method(id) => wording::auth_required_method(list, id),
            Self::None => wording::auth_required_none(list),
        }
    }
}

impl AcpConfig {
    /// A configuration that runs `command` with every default.
    pub fn new(command: impl Into<PathBuf>) -> Self {
        Self {
            name: DEFAULT_NAME.to_owned(),
            program: Program::new(
                command,
                Launch::new(
                    Environment::Scrubbed { pass: Vec::new() },
                    Ladder::new(Duration::from_millis(500), Duration::from_millis(1500)).kill_wait(KILL_WAIT),
                ),
            ),
            permission: PermissionPolicy::Reject,
            auth: AcpAuth::None,
            startup_timeout: Duration::from_secs(60),
            turn_timeout: None,
            cancel_grace: Duration::from_millis(1000),
            max_output_bytes: ByteLimit::DEFAULT_MAX_OUTPUT,
            max_line_bytes: ByteLimit::DEFAULT_MAX_LINE,
        }
    }

    /// Sets the provider name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Appends arguments ([`Program::args`]).
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.program = self.program.args(args);
        self
    }

    /// Sets one variable for the child ([`Launch::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.program.launch = self.program.launch.env(key, value);
        self
    }

    /// Passes one parent variable through, when the parent has it
    /// ([`Launch::pass_env`]).
    #[must_use]
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        self.program.launch = self.program.launch.pass_env(name);
        self
    }

    /// Withholds one parent variable from the child, even when
    /// [`AcpConfig::pass_env`] names it ([`Launch::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, name: impl Into<String>) -> Self {
        self.program.launch = self.program.launch.withhold_env(name);
        self
    }

    /// Sets the working directory ([`Launch::cwd`]).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.program.launch = self.program.launch.cwd(cwd);
        self
    }

    /// Sets the permission policy.
    #[must_use]
    pub fn permission(mut self, permission: PermissionPolicy) -> Self {
        self.permission = permission;
        self
    }

    /// Sets the authentication choice.
    #[must_use]
    pub fn auth(mut self, auth: AcpAuth) -> Self {
        self.auth = auth;
        self
    }

    /// Sets the startup timeout.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets a limit on each turn.
    #[must_use]
    pub fn turn_timeout(mut self, timeout: Duration) -> Self {
        self.turn_timeout = Some(timeout);
        self
    }

    /// Sets the wait for a cancelled turn to end.
    #[must_use]
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// Sets how long the child may take to exit after its stdin closes, at
    /// dispose ([`Launch::eof_grace`]).
    #[must_use]
    pub fn eof_grace(mut self, grace: Duration) -> Self {
        self.program.launch = self.program.launch.eof_grace(grace);
        self
    }

    /// Sets how long the group may take to exit after SIGTERM, before
    /// SIGKILL, at dispose ([`Launch::term_grace`]).
    #[must_use]
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.program.launch = self.program.launch.term_grace(grace);
        self
    }

    /// Sets the bound on collected answer text.
    #[must_use]
    pub fn max_output_bytes(mut self, bytes: ByteLimit) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets the bound on one protocol line.
    #[must_use]
    pub fn max_line_bytes(mut self, bytes: ByteLimit) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// The longest a cancelled run can take, from the cancellation until its
    /// process group is gone: the wait for the turn to end, then the
    /// stdin-EOF and SIGTERM graces, then the wait after SIGKILL.
    ///
    /// Keep it under the release grace of whatever awaits the release (the
    /// `subagent` tool gives 5 s), or a cancelled call reports that the child
    /// may still be running. The defaults add up to 4 s.
    pub fn longest_release(&self) -> Duration {
        self.cancel_grace + self.program.launch.teardown.longest()
    }

    /// Checks what the builder cannot: a command, an absolute-or-relative
    /// usable cwd, and non-zero timeouts (the byte bounds checked
    /// themselves when they were made).
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.program.command.as_os_str().is_empty() {
            return Err(InvalidConfig::new(wording::COMMAND_EMPTY.to_owned()));
        }
        if let Some(cwd) = &self.program.launch.cwd {
            if cwd.as_os_str().is_empty() {
                return Err(InvalidConfig::new(wording::CWD_EMPTY.to_owned()));
            }
            if !cwd.is_dir() {
                return Err(InvalidConfig::new(wording::cwd_not_a_directory(cwd)));
            }
        }
        for (key, _) in &self.program.launch.env {
            if !valid_variable_name(key) {
                return Err(InvalidConfig::new(wording::env_name_impossible(key)));
            }
        }
        if let AcpAuth::Method(id) = &self.auth
            && id.trim().is_empty()
        {
            return Err(InvalidConfig::new(wording::AUTH_METHOD_EMPTY.to_owned()));
        }
        let zero = [
            ("startupTimeout", self.startup_timeout.is_zero()),
            ("turnTimeout", self.turn_timeout.is_some_and(|t| t.is_zero())),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, is_zero)| *is_zero) {
            return Err(InvalidConfig::new(wording::must_be_positive(key)));
        }
        Ok(())
    }
}

/// An [`AcpConfig`] that cannot work: the message names the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(String);

impl InvalidConfig {
    fn new(message: String) -> Self {
        Self(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_reference() {
        let config = AcpConfig::new("agent");
        assert_eq!(config.name, "acp");
        assert_eq!(config.permission, PermissionPolicy::Reject);
        assert_eq!(config.auth, AcpAuth::None);
        assert_eq!(config.turn_timeout, None);
        assert_eq!(config.cancel_grace, Duration::from_millis(1000));
        assert_eq!(config.program.launch.teardown.eof_grace, Duration::from_millis(500));
        assert_eq!(config.program.launch.teardown.term_grace, Duration::from_millis(1500));
        assert_eq!(config.longest_release(), Duration::from_millis(4000));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn validation_names_the_key() {
        let empty = AcpConfig::new("");
        assert_eq!(
            empty.validate().unwrap_err().to_string(),
            "subagent-acp: config command must not be empty"
        );
        let cwd = AcpConfig::new("a").cwd("");
        assert!(
            cwd.validate()
                .unwrap_err()
                .to_string()
                .contains("config cwd must not be empty")
        );
        let missing = AcpConfig::new("a").cwd("/definitely/not/here");
        assert!(
            missing
                .validate()
                .unwrap_err()
                .to_string()
                .contains("not an accessible directory")
        );
        // A zero byte bound cannot be made: it checks itself (byte_limit.rs).
        assert!(ByteLimit::new(0).is_err());
        let env = AcpConfig::new("a").env("A=B", "c");
        assert!(env.validate().unwrap_err().to_string().contains("cannot exist"));
        let turn = AcpConfig::new("a").turn_timeout(Duration::ZERO);
        assert_eq!(
            turn.validate().unwrap_err().to_string(),
            "subagent-acp: config turnTimeout must be greater than zero"
        );
        let auth = AcpConfig::new("a").auth(AcpAuth::Method(" ".into()));
        assert_eq!(
            auth.validate().unwrap_err().to_string(),
            "subagent-acp: config auth method id must not be empty"
        );
    }
}
