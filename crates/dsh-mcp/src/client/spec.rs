//! Which MCP server to use: a name, and either a program to run (stdio) or
//! a URL (Streamable HTTP).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use dsh_process::{Launch, Program};

use crate::wording;

/// The prefix of every mounted MCP tool: `mcp__<server>__<tool>`.
pub const TOOL_PREFIX: &str = "mcp__";

/// The separator between the server's name and the tool's name.
pub const NAME_SEPARATOR: &str = "__";

/// One MCP server to mount: its name (the `<server>` in
/// `mcp__<server>__<tool>`) and where it is ([`McpEndpoint`]): a program to
/// run on stdio, or a URL to reach over Streamable HTTP.
///
/// The command-line flag `--mcp-server <name>=<command line or URL>`, a
/// config file's `[[mcp_servers]]` entry and an ACP client's `mcpServers`
/// all become one of these; a program to run is a
/// [`Program`](dsh_process::Program), as an ACP child's is.
///
/// ```
/// use dsh_mcp::{McpEndpoint, McpServerSpec};
///
/// let spec: McpServerSpec = "files=npx -y server-files '/tmp/my dir'".parse().unwrap();
/// assert_eq!(spec.name, "files");
/// let McpEndpoint::Stdio(program) = &spec.endpoint else { panic!() };
/// assert_eq!(program.command.to_str(), Some("npx"));
/// assert_eq!(program.args, ["-y", "server-files", "/tmp/my dir"]);
/// assert_eq!(program.launch, McpServerSpec::default_launch());
/// assert_eq!(spec.tool_name("read"), "mcp__files__read");
///
/// let remote: McpServerSpec = "docs=https://mcp.example.com/mcp".parse().unwrap();
/// let McpEndpoint::Url(server) = &remote.endpoint else { panic!() };
/// assert_eq!(server.url, "https://mcp.example.com/mcp");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServerSpec {
    /// The server's name: ASCII letters, digits, `-` and single `_`.
    pub name: String,
    /// Where the server is.
    pub endpoint: McpEndpoint,
}

/// Where an MCP server is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpEndpoint {
    /// A program we start and talk to on its stdin and stdout: its command
    /// (looked up on `PATH`), its arguments, and how it is launched.
    Stdio(Program),
    /// A server already running somewhere, reached over Streamable HTTP.
    Url(RemoteServer),
}

/// A remote MCP server: its URL and what every request to it carries.
///
/// A bearer token is never part of the specification itself: it is read,
/// when the server is mounted, from the environment variable that
/// [`RemoteServer::bearer_token_env`] names. Header values are not shown by
/// `Debug`, as they may be credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteServer {
    /// The `http://` or `https://` URL of the server's MCP endpoint.
    pub url: String,
    /// Extra headers sent with every request, in order.
    pub headers: Vec<(String, String)>,
    /// The environment variable holding the bearer token, if the server needs one.
    pub bearer_token_env: Option<String>,
}

impl fmt::Debug for RemoteServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("RemoteServer")
            .field("url", &self.url)
            .field("headers", &headers)
            .field("bearer_token_env", &self.bearer_token_env)
            .finish()
    }
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
    /// The command is empty.
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
    /// The URL is not an `http://` or `https://` URL with a host.
    #[error("{}", wording::spec_bad_url(url, reason))]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value that HTTP cannot carry.
    #[error("{}", wording::spec_bad_header(header))]
    BadHeader {
        /// The header's name.
        header: String,
    },
    /// An environment variable name that is empty or has `=` or NUL in it.
    #[error("{}", wording::spec_bad_env_name(variable))]
    BadEnvName {
        /// The name as given.
        variable: String,
    },
}

/// Whether `name` can be a server name.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains(NAME_SEPARATOR)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Whether `text` looks like a URL rather than a command line: it starts
/// with `http://` or `https://` (any case) and is one word.
fn looks_like_url(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")) && !text.contains(char::is_whitespace)
}

impl RemoteServer {
    /// A remote server at `url`, which must be `http://` or `https://` with a host.
    pub fn new(url: impl Into<String>) -> Result<Self, SpecError> {
        let url = url.into();
        let bad = |reason: &str| SpecError::BadUrl {
            url: url.clone(),
            reason: reason.to_owned(),
        };
        let parsed = reqwest::Url::parse(&url).map_err(|error| bad(&error.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad(wording::URL_NOT_HTTP));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad(wording::URL_WITHOUT_HOST));
        }
        Ok(Self {
            url,
            headers: Vec::new(),
            bearer_token_env: None,
        })
    }

    /// Adds a header sent with every request; refused when HTTP cannot carry it.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Result<Self, SpecError> {
        let (name, value) = (name.into(), value.into());
        let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && reqwest::header::HeaderValue::from_str(&value).is_ok();
        if !valid {
            return Err(SpecError::BadHeader { header: name });
        }
        self.headers.push((name, value));
        Ok(self)
    }

    /// Sends `Authorization: Bearer <token>`, the token read from the
    /// environment variable `variable` when the server is mounted.
    pub fn bearer_token_env(mut self, variable: impl Into<String>) -> Result<Self, SpecError> {
        let variable = variable.into();
        if !dsh_process::valid_variable_name(&variable) {
            return Err(SpecError::BadEnvName { variable });
        }
        self.bearer_token_env = Some(variable);
        Ok(self)
    }
}

impl McpServerSpec {
    /// How a server run as a process is launched and released unless told
    /// otherwise: it inherits our whole environment (it is the user's own
    /// tool, often needing the user's credentials), runs in our working
    /// directory, and at release may take 2 s to exit after its stdin
    /// closes and 2 s after SIGTERM, before SIGKILL, and 5 s to vanish after
    /// SIGKILL.
    pub fn default_launch() -> Launch {
        crate::client::options::default_launch()
    }

    /// A server running `command` with `args`, launched as
    /// [`McpServerSpec::default_launch`] says; the name is checked.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, SpecError> {
        Self::stdio(name, Program::new(command, Self::default_launch()).args(args))
    }

    /// A server running `program` (its command, arguments and launch); the
    /// name is checked.
    pub fn stdio(name: impl Into<String>, program: Program) -> Result<Self, SpecError> {
        let name = checked_name(name.into())?;
        if program.command.as_os_str().is_empty() {
            return Err(SpecError::EmptyCommand { name });
        }
        Ok(Self {
            name,
            endpoint: McpEndpoint::Stdio(program),
        })
    }

    /// How the server's process is launched: `None` for a remote server.
    pub fn launch_mut(&mut self) -> Option<&mut Launch> {
        match &mut self.endpoint {
            McpEndpoint::Stdio(program) => Some(&mut program.launch),
            McpEndpoint::Url(_) => None,
        }
    }

    /// A remote server over Streamable HTTP; the name is checked.
    pub fn remote(name: impl Into<String>, server: RemoteServer) -> Result<Self, SpecError> {
        Ok(Self {
            name: checked_name(name.into())?,
            endpoint: McpEndpoint::Url(server),
        })
    }

    /// A server from one command line, split into words like a POSIX shell
    /// does (quotes and backslashes; no variables, globs or pipes): the first
    /// word is the command, the others its arguments, launched as
    /// [`McpServerSpec::default_launch`] says. This is what the
    /// `--mcp-server` flag takes, one string; a configuration file writes
    /// `command` and `args` apart instead.
    pub fn from_command_line(name: impl Into<String>, line: &str) -> Result<Self, SpecError> {
        let name = name.into();
        let words = shlex::split(line).ok_or_else(|| SpecError::BadCommandLine {
            name: name.clone(),
            line: line.to_owned(),
        })?;
        match words.split_first() {
            Some((command, args)) => Self::new(name, command, args.iter().cloned()),
            None => Err(SpecError::EmptyCommand {
                name: checked_name(name)?,
            }),
        }
    }

    /// Parses `<name>=<command line>` or `<name>=<http or https URL>`.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let Some((name, rest)) = text.split_once('=') else {
            return Err(SpecError::MissingName { text: text.to_owned() });
        };
        let rest = rest.trim();
        if looks_like_url(rest) {
            let name = checked_name(name.trim().to_owned())?;
            return Self::remote(name, RemoteServer::new(rest)?);
        }
        Self::from_command_line(name.trim(), rest)
    }

    /// The name a tool of this server is mounted under: `mcp__<server>__<tool>`.
    pub fn tool_name(&self, tool: &str) -> String {
        format!("{TOOL_PREFIX}{}{NAME_SEPARATOR}{tool}", self.name)
    }
}

fn checked_name(name: String) -> Result<String, SpecError> {
    if valid_name(&name) {
        Ok(name)
    } else {
        Err(SpecError::BadName { name })
    }
}

impl FromStr for McpServerSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// `<name>=<command line>` or `<name>=<URL>` (headers and the token's
/// variable are not shown).
impl fmt::Display for McpServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.endpoint {
            McpEndpoint::Stdio(program) => write!(f, "{}={program}", self.name),
            McpEndpoint::Url(server) => write!(f, "{}={}", self.name, server.url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_splits_like_a_shell() {
        let spec = McpServerSpec::parse("fs=server --root \"/a b\" 'c d' e\\ f").unwrap_or_else(|e| panic!("{e}"));
        let McpEndpoint::Stdio(program) = &spec.endpoint else {
            panic!("not a command")
        };
        assert_eq!(program.args, ["--root", "/a b", "c d", "e f"]);
        assert_eq!(spec.to_string(), "fs=server --root '/a b' 'c d' 'e f'");
    }

    #[test]
    fn a_url_is_a_remote_server() {
        let spec = McpServerSpec::parse("docs= HTTPS://mcp.example.com:8443/mcp?x=1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.name, "docs");
        let McpEndpoint::Url(server) = &spec.endpoint else {
            panic!("not a URL")
        };
        assert_eq!(server.url, "HTTPS://mcp.example.com:8443/mcp?x=1");
        assert_eq!(spec.to_string(), "docs=HTTPS://mcp.example.com:8443/mcp?x=1");
        // A command that merely mentions a URL stays a command.
        let command = McpServerSpec::parse("f=curl https://example.com").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(command.endpoint, McpEndpoint::Stdio(_)));
        let server = RemoteServer::new("http://127.0.0.1:9/mcp")
            .and_then(|s| s.header("X-Api-Key", "secret"))
            .and_then(|s| s.bearer_token_env("TOKEN"))
            .unwrap_or_else(|e| panic!("{e}"));
        let shown = format!("{server:?}");
        assert!(shown.contains("X-Api-Key") && !shown.contains("secret"), "{shown}");
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
        assert!(error("a b=https://x.example").starts_with("MCP server name \"a b\" is not valid"));
        assert_eq!(error("x=  "), "MCP server \"x\" has an empty command");
        assert_eq!(
            error("x=cmd 'open"),
            "MCP server \"x\": cannot split the command line \"cmd 'open\" (an unclosed quote?)"
        );
        assert_eq!(
            error("x=http://"),
            "MCP server URL \"http://\" is not valid: empty host"
        );
        let remote = |url: &str| RemoteServer::new(url).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            remote("ftp://x.example/mcp"),
            "MCP server URL \"ftp://x.example/mcp\" is not valid: only http:// and https:// are supported"
        );
        let header = RemoteServer::new("http://x.example")
            .and_then(|s| s.header("Bad Header", "v"))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            header.as_deref(),
            Some("MCP server header \"Bad Header\" is not a valid HTTP header name and value")
        );
        assert!(McpServerSpec::new("ok", "", ["a"]).is_err());
    }
}
