//! `dsh mcp`: the dsh delegation tools served as a Model Context Protocol
//! server on stdio.
//!
//! The process serves one MCP session (stdio has one client). Its calling
//! agent is a parent agent built like `dsh run`'s that never runs a model
//! turn of its own: the MCP host's model plays its part. It owns the
//! session's children and background tasks; another session (another
//! `dsh mcp` process, even on the same data directory) cannot read, message
//! or kill them. When the client closes stdin, every call still running is
//! cancelled, every background task is killed and released, and the MCP
//! servers of `--mcp-server` are shut down before dsh exits.
//!
//! Stdout carries nothing but the protocol; the banner, progress and logs go
//! to stderr.

use std::sync::Arc;
use std::time::Duration;

use dsh_mcp::McpToolServer;

use crate::cli::McpArgs;
use crate::progress::Progress;
use crate::runtime::Setup;
use crate::setup::Surface;
use crate::{Failure, wording};

pub(crate) async fn serve(args: McpArgs) -> Result<(), Failure> {
    let config = crate::config::load_from_cwd(args.agent.config.as_deref())?;
    let progress = Arc::new(Progress::new(args.quiet));
    let mut setup = Setup::new(
        &args.agent,
        config.as_ref(),
        Some(&args.data_dir),
        progress,
        Surface::McpServer,
    )?;
    setup.mount_mcp_servers().await?;
    if !args.quiet {
        eprintln!("{}", setup.banner);
    }
    let session = setup.parent(wording::MCP_LABEL)?;
    let quiet = args.quiet;
    let server = McpToolServer::new(setup.tools().clone())
        .identity("dsh", env!("CARGO_PKG_VERSION"))
        .progress_interval(Duration::from_millis(args.progress_interval))
        .on_call_end(move |end| {
            if end.cancelled && !quiet {
                eprintln!("{}", wording::mcp_call_cancelled(end.tool, &end.result.text));
            }
        });
    let served = server
        .serve(session.agent_ref(), tokio::io::stdin(), tokio::io::stdout())
        .await;
    setup
        .tasks()
        .dispose_owner(session.id(), wording::MCP_SESSION_CLOSED)
        .await;
    setup.release_mcp_servers().await;
    served.map_err(|error| Failure::failed(wording::mcp_failed(&error)))
}
