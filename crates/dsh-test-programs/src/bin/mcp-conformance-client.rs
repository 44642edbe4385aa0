//! The client the official MCP conformance suite drives (not a product
//! binary): `mcp-conformance-client <server URL>`, the scenario in
//! `MCP_CONFORMANCE_SCENARIO`.
//!
//! It is dsh's own client path: [`McpMount::start`] mounts the server at the
//! URL over Streamable HTTP (initialize, tools/list), the scenario's tool is
//! called through the registry as an agent would call it, and the mount is
//! released (DELETE). The result goes to stdout; a failure exits 1.

use std::process::ExitCode;

use dsh_mcp::{ClientOptions, McpMount, McpServerSpec, RemoteServer};
use dsh_tools::{CancellationToken, ToolExecution, ToolRegistry};
use serde_json::{Value, json};

/// The tool a scenario calls, and its arguments; `None`: mount and list only.
fn scenario_call(scenario: &str) -> Option<(&'static str, Value)> {
    match scenario {
        "tools_call" => Some(("add_numbers", json!({"a": 2, "b": 3}))),
        "sse-retry" => Some(("test_reconnection", json!({}))),
        _ => None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: mcp-conformance-client <server URL>");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let spec = match RemoteServer::new(url).and_then(|server| McpServerSpec::remote("conformance", server)) {
        Ok(spec) => spec,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let tools = ToolRegistry::new();
    let mount = match McpMount::start(&spec, &tools, &ClientOptions::default()).await {
        Ok(mount) => mount,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!("mounted {:?}", mount.tool_names());
    let mut ok = true;
    if let Some((tool, args)) = scenario_call(&scenario) {
        let exec = ToolExecution::new(CancellationToken::new());
        let result = tools.call(&spec.tool_name(tool), args, exec).await;
        println!("{tool}: {}", result.text);
        ok = !result.is_error;
    }
    if let Err(error) = mount.release().await {
        eprintln!("{error}");
        ok = false;
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
