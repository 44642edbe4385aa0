//! The MCP servers an ACP client hands a session (`mcpServers` of
//! `session/new` and `session/load`).
//!
//! Each session has a tool registry of its own: every shared tool (the
//! delegation and task tools, the MCP servers of `--mcp-server` and
//! `dsh.toml`), and the tools of the servers its client gave, as
//! `mcp__<name>__<tool>`. The session's parent agent runs on the shared
//! runtime over that registry ([`SharedRuntime::runtime_with`]), and so do its
//! in-process children, which inherit their parent's runtime: a session's
//! servers reach that session's agent and its children, never another
//! session's. The servers run until the session ends (the connection
//! closes, or a later `session/load` of it gives the servers anew).
//!
//! Stdio servers (the transport every ACP agent must support) and
//! Streamable HTTP servers are taken, as `initialize` advertises
//! (`mcpCapabilities.http`); an SSE server (the older HTTP transport) is
//! refused by name.

use std::path::Path;

use acp::v1::schema::McpServer;
use agent_client_protocol as acp;
use dsh_mcp::{McpServerSpec, Program, RemoteServer};
use dsh_tools::{ToolRegistration, ToolRegistry};

use crate::mcp_mounts::McpMounts;
use crate::runtime::SharedRuntime;
use crate::wording;

/// One session's tools: the shared ones, and its client's MCP servers.
pub(crate) struct SessionTools {
    registry: ToolRegistry,
    /// The shared tools, mounted here too.
    _shared: Vec<ToolRegistration>,
    /// The client's servers, mounted here only.
    mounts: McpMounts,
}

/// The client's servers, checked: stdio and HTTP ones, each with a name
/// that can be part of a tool name and a command we can run (the same
/// [`Program`] a `[[mcp_servers]]` entry becomes: its command, its
/// arguments, the variables it sets, run in the session's `cwd`) or a URL
/// with headers HTTP can carry.
fn client_servers(servers: &[McpServer], cwd: &Path) -> Result<Vec<McpServerSpec>, acp::Error> {
    let invalid = |message: String| acp::Error::new(acp::ErrorCode::INVALID_PARAMS, message);
    servers
        .iter()
        .map(|server| match server {
            McpServer::Stdio(stdio) => {
                let program = stdio.env.iter().fold(
                    Program::new(&stdio.command, McpServerSpec::default_launch())
                        .args(stdio.args.iter().cloned())
                        .cwd(cwd),
                    |program, variable| program.env(variable.name.clone(), variable.value.clone()),
                );
                McpServerSpec::stdio(stdio.name.clone(), program)
                    .map_err(|error| invalid(wording::acp_mcp_bad_server(&stdio.name, &error)))
            }
            McpServer::Http(http) => {
                let remote = RemoteServer::new(http.url.clone())
                    .and_then(|remote| {
                        http.headers.iter().try_fold(remote, |remote, header| {
                            remote.header(header.name.clone(), header.value.clone())
                        })
                    })
                    .and_then(|remote| McpServerSpec::remote(http.name.clone(), remote))
                    .map_err(|error| invalid(wording::acp_mcp_bad_server(&http.name, &error)))?;
                Ok(remote)
            }
            McpServer::Sse(sse) => Err(invalid(wording::acp_mcp_transport_unsupported(&sse.name, "SSE"))),
            _ => Err(invalid(wording::ACP_MCP_TRANSPORT_UNKNOWN.to_owned())),
        })
        .collect()
}

impl SessionTools {
    /// A registry with every tool of the `shared` runtime, and the client's
    /// `servers` started (in the session's `cwd`) and mounted. All or
    /// nothing: when one server is refused or fails to start, the ones
    /// already started are released, and the error names the server and
    /// the cause.
    pub(crate) async fn mount(shared: &SharedRuntime, servers: &[McpServer], cwd: &Path) -> Result<Self, acp::Error> {
        let servers = client_servers(servers, cwd)?;
        if !servers.is_empty() && !cwd.is_dir() {
            return Err(acp::Error::new(
                acp::ErrorCode::INVALID_PARAMS,
                wording::acp_mcp_cwd_not_a_directory(cwd),
            ));
        }
        let registry = ToolRegistry::new();
        let registered = shared
            .tools()
            .names()
            .iter()
            .filter_map(|name| shared.tools().get(name))
            .map(|tool| registry.register(tool))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, error.to_string()))?;
        let mut mounts = McpMounts::default();
        // The self-mount check's marker under the client's own variables,
        // without the withheld ones (the shared runtime's launch).
        let servers = servers
            .into_iter()
            .map(|spec| (shared.mcp_launch().apply(spec), shared.mcp_options().clone()));
        mounts
            .mount(servers, &registry)
            .await
            .map_err(|error| acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, error.to_string()))?;
        Ok(Self {
            registry,
            _shared: registered,
            mounts,
        })
    }

    /// The session's registry.
    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Releases the client's servers, waiting until their process groups
    /// are gone; a failed release is logged.
    pub(crate) async fn release(&mut self) {
        std::mem::take(&mut self.mounts).release().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn servers(json: serde_json::Value) -> Vec<McpServer> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn stdio_and_http_servers_are_taken_and_others_refused_by_name() {
        let cwd = Path::new("/srv");
        let taken = client_servers(
            &servers(serde_json::json!([
                {"name": "files", "command": "/usr/bin/files", "args": ["--root", "."],
                 "env": [{"name": "TOKEN", "value": "t"}]},
                {"type": "http", "name": "docs", "url": "https://example.com/mcp",
                 "headers": [{"name": "Authorization", "value": "Bearer t"}]}
            ])),
            cwd,
        )
        .unwrap();
        assert_eq!(taken[0].name, "files");
        // The same launch type as a `[[mcp_servers]]` entry's, with the client's variables, in the session's cwd.
        let expected = Program::new("/usr/bin/files", McpServerSpec::default_launch())
            .args(["--root", "."])
            .env("TOKEN", "t")
            .cwd(cwd);
        assert_eq!(taken[0].endpoint, dsh_mcp::McpEndpoint::Stdio(expected));
        let dsh_mcp::McpEndpoint::Url(remote) = &taken[1].endpoint else {
            panic!("a URL")
        };
        assert_eq!(remote.url, "https://example.com/mcp");
        assert_eq!(remote.headers, [("Authorization".to_owned(), "Bearer t".to_owned())]);

        let refused = |json| client_servers(&servers(json), cwd).err().unwrap();
        let sse = refused(serde_json::json!([
            {"type": "sse", "name": "old", "url": "https://example.com/sse", "headers": []}
        ]));
        assert_eq!(sse.code, acp::ErrorCode::INVALID_PARAMS);
        assert!(sse.message.contains("\"old\""), "{}", sse.message);
        assert!(sse.message.contains("SSE"), "{}", sse.message);
        let bad_url = refused(serde_json::json!([
            {"type": "http", "name": "docs", "url": "ftp://example.com/mcp", "headers": []}
        ]));
        assert!(bad_url.message.contains("\"docs\""), "{}", bad_url.message);
        let bad_name = refused(serde_json::json!([
            {"name": "my files", "command": "/usr/bin/files", "args": [], "env": []}
        ]));
        assert!(bad_name.message.contains("\"my files\""), "{}", bad_name.message);
    }
}
