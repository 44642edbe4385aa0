//! `[[mcp_servers]]`: the MCP servers whose tools join the parent's, each a
//! program to run (its launch keys read as an ACP child's are) or a URL to
//! reach, under a name used once.

use std::ops::Range;
use std::path::Path;

use dsh_mcp::{McpServerSpec, RemoteServer, SpecError};
use toml::Spanned;

use super::file::RawMcpServer;
use super::launch::{LaunchKeys, Place};
use super::{At, ConfigFileError, non_empty, variable_name};
use crate::wording;

/// Every `[[mcp_servers]]` entry, in file order, a relative `cwd` resolved
/// against `base`; a name used twice is refused at its second use.
pub(super) fn resolve_mcp_servers(
    entries: Vec<Spanned<RawMcpServer>>,
    base: &Path,
    at: &At<'_>,
) -> Result<Vec<McpServerSpec>, ConfigFileError> {
    let mut servers: Vec<McpServerSpec> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let table = entry.span();
        let (server, name_span) = Entry { index, at, base }.resolve(entry.into_inner(), table)?;
        if let Some(first) = servers.iter().position(|other| other.name == server.name) {
            return Err(at(
                Some(name_span),
                format!("mcp_servers[{index}].name"),
                wording::config_duplicate_mcp_server(&server.name, first),
            ));
        }
        servers.push(server);
    }
    Ok(servers)
}

/// One entry being read: where it is, for the errors, and the directory a
/// relative `cwd` is resolved against.
struct Entry<'a, 'b> {
    index: usize,
    at: &'a At<'b>,
    base: &'a Path,
}

impl Entry<'_, '_> {
    /// The key path of one of the entry's keys.
    fn key(&self, name: &str) -> String {
        format!("mcp_servers[{}].{name}", self.index)
    }

    /// The entry as the MCP client takes it: a `command` with its `args`,
    /// `env` and `cwd`, or a `url` with its headers and the variable of its
    /// bearer token; and where its name is.
    fn resolve(
        &self,
        mut raw: RawMcpServer,
        table: Range<usize>,
    ) -> Result<(McpServerSpec, Range<usize>), ConfigFileError> {
        let at = self.at;
        let name_span = raw.name.span();
        if let Some(token) = &raw.bearer_token {
            return Err(at(
                Some(token.span()),
                self.key("bearer_token"),
                wording::CONFIG_MCP_LITERAL_TOKEN.to_owned(),
            ));
        }
        let spec = match (raw.command.take(), raw.url.take()) {
            (Some(_), Some(url)) => {
                return Err(at(
                    Some(url.span()),
                    self.key("url"),
                    wording::CONFIG_MCP_COMMAND_AND_URL.to_owned(),
                ));
            }
            (None, None) => {
                return Err(at(
                    Some(table),
                    self.key("command"),
                    wording::CONFIG_MCP_NEEDS_ENDPOINT.to_owned(),
                ));
            }
            (Some(command), None) => self.command(command, raw)?,
            (None, Some(url)) => self.remote(url, raw)?,
        };
        Ok((spec, name_span))
    }

    /// A name that cannot be part of a tool name, at the entry's `name`.
    fn bad_name(&self, span: Range<usize>, error: SpecError) -> ConfigFileError {
        (self.at)(Some(span), self.key("name"), error.to_string())
    }

    /// A server run as a program: no key of a remote one; launched as
    /// [`McpServerSpec::default_launch`] says (dsh's whole environment) with
    /// what its launch keys add.
    fn command(&self, command: Spanned<String>, raw: RawMcpServer) -> Result<McpServerSpec, ConfigFileError> {
        let at = self.at;
        let remote_only = [
            ("headers", raw.headers.as_ref().map(Spanned::span)),
            ("bearer_token_env", raw.bearer_token_env.as_ref().map(Spanned::span)),
        ];
        if let Some((name, Some(span))) = remote_only.into_iter().find(|(_, span)| span.is_some()) {
            return Err(at(
                Some(span),
                self.key(name),
                wording::CONFIG_MCP_URL_ONLY_KEY.to_owned(),
            ));
        }
        let keys = LaunchKeys {
            args: raw.args.as_ref(),
            env: raw.env.as_ref(),
            pass_env: raw.pass_env.as_ref(),
            cwd: raw.cwd.as_ref(),
        };
        let key = |name: &str| self.key(name);
        let place = Place {
            key: &key,
            at,
            base: self.base,
        };
        let program = super::launch::program(&command, &keys, McpServerSpec::default_launch(), &place)?;
        let name_span = raw.name.span();
        match McpServerSpec::stdio(raw.name.into_inner(), program) {
            Ok(spec) => Ok(spec),
            Err(error @ SpecError::BadName { .. }) => Err(self.bad_name(name_span, error)),
            Err(error) => Err(at(Some(command.span()), self.key("command"), error.to_string())),
        }
    }

    /// A server reached at a URL, with its headers (never an authorization
    /// one) and the variable of its bearer token.
    fn remote(&self, url: Spanned<String>, raw: RawMcpServer) -> Result<McpServerSpec, ConfigFileError> {
        let at = self.at;
        let keys = LaunchKeys {
            args: raw.args.as_ref(),
            env: raw.env.as_ref(),
            pass_env: raw.pass_env.as_ref(),
            cwd: raw.cwd.as_ref(),
        };
        if let Some((name, span)) = keys.written().into_iter().next() {
            return Err(at(
                Some(span),
                self.key(name),
                wording::CONFIG_MCP_COMMAND_ONLY_KEY.to_owned(),
            ));
        }
        let name_span = raw.name.span();
        let name = raw.name.into_inner();
        let url_span = url.span();
        let url = non_empty(url, &self.key("url"), at)?;
        let mut server =
            RemoteServer::new(url).map_err(|error| at(Some(url_span), self.key("url"), error.to_string()))?;
        if let Some(headers) = raw.headers {
            let span = headers.span();
            for (header, value) in headers.into_inner() {
                let header_key = self.key(&format!("headers.{header}"));
                if header.eq_ignore_ascii_case("authorization") {
                    return Err(at(Some(span), header_key, wording::CONFIG_MCP_LITERAL_TOKEN.to_owned()));
                }
                let Some(value) = value.as_str() else {
                    return Err(at(
                        Some(span),
                        header_key,
                        wording::CONFIG_MCP_HEADER_NOT_TEXT.to_owned(),
                    ));
                };
                server = server
                    .header(header.clone(), value)
                    .map_err(|error| at(Some(span.clone()), header_key, error.to_string()))?;
            }
        }
        if let Some(variable) = raw.bearer_token_env {
            let key = self.key("bearer_token_env");
            if !variable_name(variable.get_ref()) {
                return Err(at(
                    Some(variable.span()),
                    key,
                    wording::config_bad_variable(variable.get_ref()),
                ));
            }
            server = server
                .bearer_token_env(variable.get_ref().clone())
                .map_err(|error| at(Some(variable.span()), key, error.to_string()))?;
        }
        McpServerSpec::remote(name, server).map_err(|error| self.bad_name(name_span, error))
    }
}
