//! The provider's configuration: what to run, where, with what, and how long to wait.

use std::path::PathBuf;
use std::time::Duration;

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

/// Configuration of an [`AcpProvider`](crate::AcpProvider).
///
/// Built with [`AcpConfig::new`] and the builder methods; every field is
/// public for reading. Defaults: no arguments, no extra environment, the
/// parent process's working directory, [`PermissionPolicy::Reject`], a 60 s
/// startup timeout, a 2 s wait for a cancelled turn to end, 6000 ms stdin-EOF
/// grace and 3000 ms SIGTERM grace at dispose, 1 MiB of collected answer text
/// and 4 MiB per protocol line.
///
/// ```
/// use std::time::Duration;
/// use dsh_subagent_acp::{AcpConfig, PermissionPolicy};
///
/// let config = AcpConfig::new("dsh")
///     .args(["acp", "--quiet"])
///     .env("DSH_MODEL", "deepseek-chat")
///     .inherit_env("DSH_API_KEY")
///     .permission(PermissionPolicy::AllowFirst)
///     .dispose_eof_grace(Duration::from_millis(500));
/// assert_eq!(config.args, ["acp", "--quiet"]);
/// assert_eq!(config.dispose_term_grace, Duration::from_millis(3000));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcpConfig {
    /// The provider's registered name (default [`DEFAULT_NAME`]).
    pub name: String,
    /// The program to run (resolved through the child's `PATH`).
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for the child, on top of the scrubbed base
    /// ([`BASE_ENV`](crate::BASE_ENV)); they win over inherited values.
    pub env: Vec<(String, String)>,
    /// Names of parent variables passed through as they are (e.g. an API key
    /// the child needs). Nothing else of the parent's environment reaches the child.
    pub inherit_env: Vec<String>,
    /// The child's working directory, also sent in `session/new`; `None`
    /// means the parent process's working directory at start.
    pub cwd: Option<PathBuf>,
    /// The answer to permission requests.
    pub permission: PermissionPolicy,
    /// How long `initialize` and `session/new` together may take.
    pub startup_timeout: Duration,
    /// After a cancellation, how long to wait for the child to end the turn
    /// (`cancelled`) before the run settles `aborted` without it.
    pub cancel_grace: Duration,
    /// At dispose: how long the child may take to exit after its stdin closes.
    pub dispose_eof_grace: Duration,
    /// At dispose: how long the group may take to exit after SIGTERM, before SIGKILL.
    pub dispose_term_grace: Duration,
    /// The most answer text collected; a child that streams more fails the run.
    pub max_output_bytes: usize,
    /// The longest protocol line read from the child; a longer one fails the run.
    pub max_line_bytes: usize,
}

impl AcpConfig {
    /// A configuration that runs `command` with every default.
    pub fn new(command: impl Into<PathBuf>) -> Self {
        Self {
            name: DEFAULT_NAME.to_owned(),
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            inherit_env: Vec::new(),
            cwd: None,
            permission: PermissionPolicy::Reject,
            startup_timeout: Duration::from_secs(60),
            cancel_grace: Duration::from_secs(2),
            dispose_eof_grace: Duration::from_millis(6000),
            dispose_term_grace: Duration::from_millis(3000),
            max_output_bytes: 1 << 20,
            max_line_bytes: 4 << 20,
        }
    }

    /// Sets the provider name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets one variable for the child.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Passes one parent variable through, when the parent has it.
    #[must_use]
    pub fn inherit_env(mut self, name: impl Into<String>) -> Self {
        self.inherit_env.push(name.into());
        self
    }

    /// Sets the working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets the permission policy.
    #[must_use]
    pub fn permission(mut self, permission: PermissionPolicy) -> Self {
        self.permission = permission;
        self
    }

    /// Sets the startup timeout.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets the wait for a cancelled turn to end.
    #[must_use]
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// Sets the stdin-EOF grace of dispose.
    #[must_use]
    pub fn dispose_eof_grace(mut self, grace: Duration) -> Self {
        self.dispose_eof_grace = grace;
        self
    }

    /// Sets the SIGTERM grace of dispose.
    #[must_use]
    pub fn dispose_term_grace(mut self, grace: Duration) -> Self {
        self.dispose_term_grace = grace;
        self
    }

    /// Sets the bound on collected answer text.
    #[must_use]
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets the bound on one protocol line.
    #[must_use]
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }

    /// Checks what the builder cannot: a command, an absolute-or-relative
    /// usable cwd, and non-zero bounds.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let prefix = "subagent-acp";
        if self.command.as_os_str().is_empty() {
            return Err(InvalidConfig::new(format!(
                "{prefix}: config command must not be empty"
            )));
        }
        if let Some(cwd) = &self.cwd {
            if cwd.as_os_str().is_empty() {
                return Err(InvalidConfig::new(format!(
                    "{prefix}: config cwd must not be empty — omit the key to inherit the parent's working directory"
                )));
            }
            if !cwd.is_dir() {
                return Err(InvalidConfig::new(format!(
                    "{prefix}: config cwd is not an accessible directory: {}",
                    cwd.display()
                )));
            }
        }
        for (key, _) in &self.env {
            if key.is_empty() || key.contains('=') || key.contains('\0') {
                return Err(InvalidConfig::new(format!(
                    "{prefix}: config env names a variable that cannot exist: {key:?}"
                )));
            }
        }
        let zero = [
            ("startupTimeout", self.startup_timeout.is_zero()),
            ("maxOutputBytes", self.max_output_bytes == 0),
            ("maxLineBytes", self.max_line_bytes == 0),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, is_zero)| *is_zero) {
            return Err(InvalidConfig::new(format!(
                "{prefix}: config {key} must be greater than zero"
            )));
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
        assert_eq!(config.dispose_eof_grace, Duration::from_millis(6000));
        assert_eq!(config.dispose_term_grace, Duration::from_millis(3000));
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
        let zero = AcpConfig::new("a").max_line_bytes(0);
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            "subagent-acp: config maxLineBytes must be greater than zero"
        );
        let env = AcpConfig::new("a").env("A=B", "c");
        assert!(env.validate().unwrap_err().to_string().contains("cannot exist"));
    }
}
