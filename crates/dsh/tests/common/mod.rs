//! What the `dsh` end-to-end tests share: the binary, a hang guard, a raw
//! JSON-RPC peer of `dsh acp`, and a `subagent_acp` tool over `dsh acp`
//! children.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_acp::{AcpConfig, AcpProvider};
use dsh_tool_subagent::{MaxDepth, SubagentToolConfig, SubagentToolPlugin};
use dsh_tools::ToolRegistry;
use serde_json::Value;

/// A hang guard, far above anything these tests wait for.
pub const GUARD: Duration = Duration::from_secs(60);

/// The binary under test.
pub const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// Runs the binary in `dir` with `args` and waits for it, offline: none of
/// the environment a `dsh` reads ([`offline`]).
pub fn dsh(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(DSH);
    command.args(args).current_dir(dir);
    offline(&mut command);
    command.output().unwrap()
}

/// Takes out of `command`'s environment every variable a `dsh` it runs
/// reads: a model endpoint, key or model, a log filter, a context window,
/// a self-mount marker or a cassette from a `dsh` running the tests.
pub fn offline(command: &mut Command) {
    for key in [
        "DSH_BASE_URL",
        "DSH_API_KEY",
        "DSH_MODEL",
        "DSH_LOG",
        "DSH_PARENT_CONFIGS",
        "DSH_CONTEXT_WINDOW",
        "DSH_CASSETTE",
    ] {
        command.env_remove(key);
    }
}

/// Lines from a child's stdout, read on a thread so every wait is bounded.
pub struct Peer {
    pub child: std::process::Child,
    pub stdin: std::process::ChildStdin,
    pub lines: mpsc::Receiver<String>,
}

impl Peer {
    pub fn start(dir: &Path, args: &[&str]) -> Self {
        Self::with_stderr(dir, args, Stdio::null())
    }

    /// [`Peer::start`], with stderr going to `stderr` (piped: `child.stderr`).
    pub fn with_stderr(dir: &Path, args: &[&str], stderr: Stdio) -> Self {
        let mut child = Command::new(DSH)
            .arg("acp")
            .args(args)
            .current_dir(dir)
            .env_remove("DSH_API_KEY")
            .env_remove("DSH_BASE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, stdin, lines }
    }

    pub fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next stdout line, which must be JSON-RPC.
    pub fn next(&self) -> Value {
        let line = self.lines.recv_timeout(GUARD).expect("a line from dsh acp");
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON on stdout: {line}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        value
    }

    /// Messages up to and including the response with this id.
    pub fn until_response(&self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next();
            let done = message["id"] == id && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

impl Peer {
    /// `initialize`; returns the result.
    pub fn initialize(&mut self) -> Value {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
        self.until_response(1).pop().unwrap()["result"].clone()
    }

    /// `session/new` (request id 2); returns the session id.
    pub fn new_session(&mut self, cwd: &Path) -> String {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []}}));
        self.until_response(2).pop().unwrap()["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Sends `session/prompt` with this request id and text.
    pub fn prompt(&mut self, id: u64, session: &str, text: &str) {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}),
        );
    }
}

/// The `update` objects of the `session/update` notifications among `messages`.
pub fn updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|message| message["method"] == "session/update")
        .map(|message| message["params"]["update"].clone())
        .collect()
}

/// What keeps a mounted `subagent_acp` alive: the service, its registry, the
/// provider's registration and the tool plugin.
pub struct AcpMount {
    pub service: SubagentService,
    pub tools: ToolRegistry,
    pub provider: ProviderRegistration,
    pub tool: SubagentToolPlugin,
}

/// A service with the `acp` provider over `config` and the `subagent_acp`
/// tool (`maxDepth: "provider-managed"`).
pub fn mount_subagent_acp(config: AcpConfig) -> AcpMount {
    let service = SubagentService::new();
    let tools = ToolRegistry::new();
    let provider = service
        .register_provider(std::sync::Arc::new(AcpProvider::new(config).unwrap()))
        .unwrap();
    let tool = SubagentToolPlugin::apply(
        SubagentToolConfig::new("acp")
            .tool_name(SubagentToolConfig::ACP_TOOL_NAME)
            .max_depth(MaxDepth::ProviderManaged),
        &service,
        &tools,
    )
    .unwrap();
    AcpMount {
        service,
        tools,
        provider,
        tool,
    }
}

/// A scripted parent that hands the user's task to `subagent_acp` and
/// answers `Parent heard: <the child's answer>`.
pub const PARENT_DELEGATING_TO_SUBAGENT_ACP: &str = r#"{"rules": [
  {"when": {"last_tool": "subagent_acp"}, "reply": {"text": "Parent heard: {{last_tool_result}}"}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_acp", "arguments": {"description": "summarize", "prompt": "{{last_user}}"}}
  ]}}
]}"#;

/// The test MCP server (`dsh-test-programs`): tools `echo`, `slow`,
/// `crash`, `fail`; with `MCP_TEST_LOG` naming a file it appends
/// `pid <pid>` and each call there.
pub fn mcp_test_server() -> PathBuf {
    dsh_test_programs::Program::McpTestServer.path()
}
