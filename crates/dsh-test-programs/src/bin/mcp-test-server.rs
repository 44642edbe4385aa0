//! A small MCP server for tests (not a product binary), built on rmcp.
//!
//! Tools: `echo` (returns its `text`), `slow` (runs until cancelled),
//! `crash` (exits the process mid-call), `fail` (an `isError` result).
//!
//! When `MCP_TEST_LOG` names a file, one line is appended per event:
//! `pid <pid>` at start, `grandchild <pid>`, `started <tool>`,
//! `cancelled <tool>`.
//!
//! | flag | behaviour |
//! |---|---|
//! | `--exit-at-start` | exits with code 4 before answering anything |
//! | `--grandchild` | first starts a `sleep` in the server's process group, and never reaps it |
//! | `--ignore-eof` | keeps running after its input ends (until a signal) |

use std::io::Write;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

fn log(line: &str) {
    if let Some(path) = std::env::var_os("MCP_TEST_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

struct TestServer;

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let text = json!({"type": "object", "properties": {"text": {"type": "string", "description": "What to echo."}}, "required": ["text"]});
        let empty = json!({"type": "object", "properties": {}});
        let big = json!({"type": "object", "properties": {"bytes": {"type": "integer"}, "fail": {"type": "boolean"}}, "required": ["bytes"]});
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("echo", "Echo the text back.", schema(text)),
            Tool::new("slow", "Run until cancelled.", schema(empty.clone())),
            Tool::new("crash", "Exit the server mid-call.", schema(empty.clone())),
            Tool::new("fail", "Return an error result.", schema(empty.clone())),
            Tool::new(
                "big",
                "Answer `bytes` bytes: the letters a to z over and over (as an error result with `fail`).",
                schema(big),
            ),
            Tool::new("bad name!", "A name no model may call.", schema(empty)),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        log(&format!("started {}", request.name));
        let result = match &*request.name {
            "echo" => {
                let text = request
                    .arguments
                    .as_ref()
                    .and_then(|args| args.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))])
            }
            "slow" => {
                context.ct.cancelled().await;
                log("cancelled slow");
                CallToolResult::success(vec![ContentBlock::text("slow was cancelled")])
            }
            "crash" => {
                eprintln!("test server: crashing on purpose");
                std::process::exit(3);
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("the tool failed on purpose")]),
            "big" => {
                let args = request.arguments.as_ref();
                let bytes = args
                    .and_then(|args| args.get("bytes"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let text: String = (0..bytes).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
                match args.and_then(|args| args.get("fail")).and_then(Value::as_bool) {
                    Some(true) => CallToolResult::error(vec![ContentBlock::text(text)]),
                    _ => CallToolResult::success(vec![ContentBlock::text(text)]),
                }
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    log(&format!("pid {}", std::process::id()));
    if args.iter().any(|arg| arg == "--exit-at-start") {
        eprintln!("test server: refusing to start");
        std::process::exit(4);
    }
    // Never waited for: once it is killed it stays a zombie until its
    // reaper (init, or a subreaper above us) collects it.
    let grandchild = if args.iter().any(|arg| arg == "--grandchild") {
        std::process::Command::new("sleep").arg("1000").spawn().ok()
    } else {
        None
    };
    if let Some(grandchild) = &grandchild {
        log(&format!("grandchild {}", grandchild.id()));
    }
    match TestServer.serve((tokio::io::stdin(), tokio::io::stdout())).await {
        Ok(running) => {
            let _ = running.waiting().await;
        }
        Err(error) => eprintln!("test server: {error}"),
    }
    if args.iter().any(|arg| arg == "--ignore-eof") {
        log("input ended, ignored");
        std::future::pending::<()>().await;
    }
}
