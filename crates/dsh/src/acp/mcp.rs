//! The MCP servers an ACP client hands a session (`mcpServers` of
//! `session/new` and `session/load`).
//!
//! Each session has a tool registry of its own: every shared tool (the
//! delegation and task tools, the MCP servers of `--mcp-server` and
//! `dsh.toml`), and the tools of the servers its client gave, as
//! `mcp__<name>__<tool>`. The session's parent agent runs on the shared
//! runtime over that registry ([`Setup::runtime_with`]), and so do its
//! in-process children, which inherit their parent's runtime: a session's
//! servers reach that session's agent and its children, never another
//! session's. The servers run until the session ends (the connection
//! closes, or a later `session/load` of it gives the servers anew).
//!
//! Only stdio servers are taken, the transport every ACP agent must
//! support; `initialize` advertises no other (`mcpCapabilities`), and a
//! server of another transport is refused by name.

use std::path::Path;

use acp::v1::schema::McpServer;
use agent_client_protocol as acp;
use dsh_mcp::{McpMount, McpServerSpec};
use dsh_tools::{ToolRegistration, ToolRegistry};

use crate::runtime::Setup;
use crate::wording;

/// One session's tools: the shared ones, and its client's MCP servers.
pub(crate) struct SessionTools {
    registry: ToolRegistry,
    /// The shared tools, mounted here too.
    _shared: Vec<ToolRegistration>,
    /// The client's servers, mounted here only.
    mounts: Vec<McpMount>,
}

/// One stdio server as the client gave it: what to run, and its variables.
struct StdioServer {
    spec: McpServerSpec,
    env: Vec<(String, String)>,
}

/// The client's servers, checked: stdio ones only, each with a name that
/// can be part of a tool name and a command we can run.
fn stdio_servers(servers: &[McpServer]) -> Result<Vec<StdioServer>, acp::Error> {
    let invalid = |message: String| acp::Error::new(acp::ErrorCode::INVALID_PARAMS, message);
    servers
        .iter()
        .map(|server| match server {
            McpServer::Stdio(stdio) => {
                let Some(program) = stdio.command.to_str() else {
                    return Err(invalid(wording::acp_mcp_command_not_utf8(&stdio.name)));
                };
                let spec = McpServerSpec::new(stdio.name.clone(), program, stdio.args.iter().cloned())
                    .map_err(|error| invalid(error.to_string()))?;
                let env = stdio
                    .env
                    .iter()
                    .map(|variable| (variable.name.clone(), variable.value.clone()))
                    .collect();
                Ok(StdioServer { spec, env })
            }
            McpServer::Http(http) => Err(invalid(wording::acp_mcp_transport_unsupported(&http.name, "HTTP"))),
            McpServer::Sse(sse) => Err(invalid(wording::acp_mcp_transport_unsupported(&sse.name, "SSE"))),
            _ => Err(invalid(wording::ACP_MCP_TRANSPORT_UNKNOWN.to_owned())),
        })
        .collect()
}

impl SessionTools {
    /// A registry with every shared tool of `setup`, and the client's
    /// `servers` started (in the session's `cwd`) and mounted. All or
    /// nothing: when one server is refused or fails to start, the ones
    /// already started are released, and the error names the server and
    /// the cause.
    pub(crate) async fn mount(setup: &Setup, servers: &[McpServer], cwd: &Path) -> Result<Self, acp::Error> {
        let servers = stdio_servers(servers)?;
        if !servers.is_empty() && !cwd.is_dir() {
            return Err(acp::Error::new(
                acp::ErrorCode::INVALID_PARAMS,
                wording::acp_mcp_cwd_not_a_directory(cwd),
            ));
        }
        let registry = ToolRegistry::new();
        let shared = setup
            .tools()
            .names()
            .iter()
            .filter_map(|name| setup.tools().get(name))
            .map(|tool| registry.register(tool))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, error.to_string()))?;
        let mut tools = Self {
            registry,
            _shared: shared,
            mounts: Vec::new(),
        };
        for server in servers {
            // The loop guard's marker (the setup's options), then the
            // client's own variables.
            let options = server
                .env
                .iter()
                .fold(setup.mcp_options().clone().cwd(cwd), |options, (key, value)| {
                    options.env(key, value)
                });
            match McpMount::start(&server.spec, &tools.registry, &options).await {
                Ok(mount) => tools.mounts.push(mount),
                Err(error) => {
                    tools.release().await;
                    return Err(acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, error.to_string()));
                }
            }
        }
        Ok(tools)
    }

    /// The session's registry.
    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Releases the client's servers, waiting until their process groups
    /// are gone; a failed release is logged.
    pub(crate) async fn release(&mut self) {
        for mount in std::mem::take(&mut self.mounts) {
            let server = mount.server().to_owned();
            if let Err(error) = mount.release().await {
                tracing::warn!(server = %server, "{}", wording::log_mcp_release_failed(&error));
            }
        }
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
    fn stdio_servers_are_taken_and_others_refused_by_name() {
        let taken = stdio_servers(&servers(serde_json::json!([
            {"name": "files", "command": "/usr/bin/files", "args": ["--root", "."],
             "env": [{"name": "TOKEN", "value": "t"}]}
        ])))
        .unwrap();
        assert_eq!(taken[0].spec.name, "files");
        assert_eq!(taken[0].spec.program, "/usr/bin/files");
        assert_eq!(taken[0].spec.args, ["--root", "."]);
        assert_eq!(taken[0].env, [("TOKEN".to_owned(), "t".to_owned())]);

        let refused = |json| stdio_servers(&servers(json)).err().unwrap();
        let http = refused(serde_json::json!([
            {"type": "http", "name": "docs", "url": "https://example.com/mcp", "headers": []}
        ]));
        assert_eq!(http.code, acp::ErrorCode::INVALID_PARAMS);
        assert!(http.message.contains("\"docs\""), "{}", http.message);
        assert!(http.message.contains("HTTP"), "{}", http.message);
        let bad_name = refused(serde_json::json!([
            {"name": "my files", "command": "/usr/bin/files", "args": [], "env": []}
        ]));
        assert!(bad_name.message.contains("\"my files\""), "{}", bad_name.message);
    }
}
