//! Which program runs, with which arguments, launched how: the one
//! description an ACP child's configuration and an MCP server's stdio
//! endpoint both hold.

use std::fmt;
use std::path::PathBuf;

use crate::Launch;

/// Which program runs ([`Program::command`]), with which arguments
/// ([`Program::args`]), launched and released how ([`Program::launch`]).
///
/// `dsh-subagent-acp`'s `AcpConfig` and `dsh-mcp`'s stdio endpoint each hold
/// one, and `dsh.toml`'s `command`, `args`, `env`, `pass_env` and `cwd` keys
/// fill it the same way under `[[subagents]]` and `[[mcp_servers]]`. The
/// command is one program, never a shell line: nothing splits it, expands
/// variables or globs. [`ChildSpec::of`](crate::ChildSpec::of) runs it.
///
/// ```
/// use std::time::Duration;
/// use dsh_process::{Environment, Ladder, Launch, Program};
///
/// let launch = Launch::new(
///     Environment::Scrubbed { pass: vec![] },
///     Ladder::new(Duration::from_millis(500), Duration::from_millis(1500)),
/// );
/// let program = Program::new("mcp-files", launch)
///     .args(["--root", "."])
///     .env("FILES_LOG", "debug")
///     .pass_env("FILES_TOKEN")
///     .cwd("/srv/files");
/// assert_eq!(program.to_string(), "mcp-files --root .");
/// assert_eq!(program.launch.env, [("FILES_LOG".to_owned(), "debug".to_owned())]);
/// assert_eq!(program.launch.environment, Environment::Scrubbed { pass: vec!["FILES_TOKEN".into()] });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Program {
    /// The program: a name looked up on the child's `PATH`, or a path.
    pub command: PathBuf,
    /// Its arguments, each passed as it is.
    pub args: Vec<String>,
    /// How it is launched and released: its environment, working directory
    /// and teardown graces.
    pub launch: Launch,
}

impl Program {
    /// Runs `command` with no arguments, launched as `launch` says.
    pub fn new(command: impl Into<PathBuf>, launch: Launch) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            launch,
        }
    }

    /// Appends arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one variable ([`Launch::env`]).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.launch = self.launch.env(key, value);
        self
    }

    /// Passes one of the parent's variables on ([`Launch::pass_env`]).
    #[must_use]
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        self.launch = self.launch.pass_env(name);
        self
    }

    /// Withholds one of the parent's variables ([`Launch::withheld_env`]).
    #[must_use]
    pub fn withhold_env(mut self, name: impl Into<String>) -> Self {
        self.launch = self.launch.withhold_env(name);
        self
    }

    /// Sets the working directory ([`Launch::cwd`]).
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.launch = self.launch.cwd(cwd);
        self
    }
}

/// The command and its arguments as one line a POSIX shell would split back
/// into the same words (for messages; nothing runs it through a shell).
impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", quoted(&self.command.to_string_lossy()))?;
        for arg in &self.args {
            write!(f, " {}", quoted(arg))?;
        }
        Ok(())
    }
}

/// A word quoted for a POSIX shell when it needs it: bare when it has only
/// characters no shell treats specially, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Whether `name` can name an environment variable: not empty, and without
/// `=` or NUL (what the operating system cannot carry).
pub fn valid_variable_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Environment, Ladder};
    use std::time::Duration;

    fn program(command: &str) -> Program {
        Program::new(
            command,
            Launch::new(Environment::Inherited, Ladder::new(Duration::ZERO, Duration::ZERO)),
        )
    }

    #[test]
    fn it_shows_as_a_line_a_shell_splits_back() {
        let shown = program("server").args(["--root", "/a b", "it's", ""]).to_string();
        assert_eq!(shown, r"server --root '/a b' 'it'\''s' ''");
        assert_eq!(program("/opt/My App/agent").to_string(), "'/opt/My App/agent'");
    }

    #[test]
    fn a_variable_name_is_what_the_system_can_carry() {
        assert!(valid_variable_name("DSH_API_KEY"));
        assert!(!valid_variable_name(""));
        assert!(!valid_variable_name("A=B"));
        assert!(!valid_variable_name("A\0"));
    }
}
