//! The client half: mount the tools of MCP servers (a local process over
//! stdio, or a remote one over Streamable HTTP) into a `ToolRegistry`.

pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod mount;
pub(crate) mod options;
pub(crate) mod process;
pub(crate) mod spec;
