//! Which MCP server to run: a name and a command line.

use std::fmt;
use std::str::FromStr;

use crate::wording;

/// The prefix of every mounted MCP tool: `mcp__<server>__<tool>`.
pub const TOOL_PREFIX: &str = "mcp__";

/// The separator between the server's name and the tool's name.
pub const NAME_SEPARATOR: &str = "__";

/// One MCP server to start: its name (the `<server>` in
/// `mcp__<server>__<tool>`) and the program with its arguments.
///
/// The command-line flag `--mcp-server <name>=<command line>` and a config
/// file's `[[mcp_servers]]` entry (`name`, `command`) both become one of these.
///
/// ```
/// use dsh_mcp::McpServerSpec;
///
/// let spec: McpServerSpec = "files=npx -y server-files '/tmp/my dir'".parse().unwrap();
/// assert_eq!(spec.name, "files");
/// assert_eq!(spec.program, "npx");
/// assert_eq!(spec.args, ["-y", "server-files", "/tmp/my dir"]);
/// assert_eq!(spec.tool_name("read"), "mcp__files__read");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServerSpec {
    /// The server's name: ASCII letters, digits, `-` and single `_`.
    pub name: String,
    /// The program to run (looked up on `PATH`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// Why a server specification was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The text has no `=` between the name and the command line.
    #[error("{}", wording::spec_missing_name(text))]
    MissingName {
        /// The text as given.
        text: String,
    },
    /// The name has characters a tool name cannot carry, or is empty.
    #[error("{}", wording::spec_bad_name(name))]
    BadName {
        /// The name as given.
        name: String,
    },
    /// The command line is empty.
    #[error("{}", wording::spec_empty_command(name))]
    EmptyCommand {
        /// The server.
        name: String,
    },
    /// The command line has an unclosed quote or a trailing backslash.
    #[error("{}", wording::spec_bad_command_line(name, line))]
    BadCommandLine {
        /// The server.
        name: String,
        /// The command line.
        line: String,
    },
}

/// Whether `name` can be a server name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains(NAME_SEPARATOR)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl McpServerSpec {
    /// A server running `program` with `args`; the name is checked.
    pub fn new(
        name: impl Into<String>,
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, SpecError> {
        let name = name.into();
        if !valid_name(&name) {
            return Err(SpecError::BadName { name });
        }
        let program = program.into();
        if program.is_empty() {
            return Err(SpecError::EmptyCommand { name });
        }
        Ok(Self {
            name,
            program,
            args: args.into_iter().map(Into::into).collect(),
        })
    }

    /// A server from a command given as a list of words (program first), as
    /// a config file's `command = ["prog", "arg"]` gives it.
    pub fn from_words(name: impl Into<String>, words: &[String]) -> Result<Self, SpecError> {
        let name = name.into();
        match words.split_first() {
            Some((program, args)) => Self::new(name, program.clone(), args.iter().cloned()),
            None if !valid_name(&name) => Err(SpecError::BadName { name }),
            None => Err(SpecError::EmptyCommand { name }),
        }
    }

    /// A server from one command line, split into words like a POSIX shell
    /// does (quotes and backslashes; no variables, globs or pipes).
    pub fn from_command_line(name: impl Into<String>, line: &str) -> Result<Self, SpecError> {
        let name = name.into();
        let words = shlex::split(line).ok_or_else(|| SpecError::BadCommandLine {
            name: name.clone(),
            line: line.to_owned(),
        })?;
        Self::from_words(name, &words)
    }

    /// Parses `<name>=<command line>`.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let Some((name, line)) = text.split_once('=') else {
            return Err(SpecError::MissingName { text: text.to_owned() });
        };
        Self::from_command_line(name.trim(), line)
    }

    /// The name a tool of this server is mounted under: `mcp__<server>__<tool>`.
    pub fn tool_name(&self, tool: &str) -> String {
        format!("{TOOL_PREFIX}{}{NAME_SEPARATOR}{tool}", self.name)
    }
}

impl FromStr for McpServerSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for McpServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.program)?;
        for arg in &self.args {
            write!(f, " {}", shlex::try_quote(arg).unwrap_or_else(|_| arg.into()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_like_a_shell() {
        let spec = McpServerSpec::parse("fs=server --root \"/a b\" 'c d' e\\ f").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.args, ["--root", "/a b", "c d", "e f"]);
        assert_eq!(spec.to_string(), "fs=server --root '/a b' 'c d' 'e f'");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let error = |text: &str| {
            McpServerSpec::parse(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(error("server"), "expected <name>=<command line>, got \"server\"");
        assert!(error("a b=cmd").starts_with("MCP server name \"a b\" is not valid"));
        assert!(error("a__b=cmd").starts_with("MCP server name \"a__b\" is not valid"));
        assert!(error("=cmd").starts_with("MCP server name \"\" is not valid"));
        assert_eq!(error("x=  "), "MCP server \"x\" has an empty command");
        assert_eq!(
            error("x=cmd 'open"),
            "MCP server \"x\": cannot split the command line \"cmd 'open\" (an unclosed quote?)"
        );
        assert!(McpServerSpec::from_words("ok", &[]).is_err());
    }
}
