//! The server half: serve the tools of a `ToolRegistry` over MCP, on stdio
//! or Streamable HTTP ([`http`]), every client message screened first.

pub(crate) mod call_progress;
pub(crate) mod http;
pub(crate) mod screen;
pub(crate) mod stdio;
pub(crate) mod tool_server;
