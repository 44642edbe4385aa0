//! `acp-fault-agent <mode>`: a tiny ACP agent over raw JSON-RPC lines on
//! stdio that misbehaves on purpose, one way per mode, so the provider's
//! tests can show that every fault ends as a bounded result with nothing left
//! running. Test support only; not a product binary.
//!
//! With `FAULT_AGENT_PID_FILE` set, it first writes its pid there (the
//! provider starts it as a process-group leader, so the pid is the group id).
//!
//! Every mode answers `initialize` and `session/new` (except `exit-at-init`
//! and `silent-init`) and exits at stdin EOF (except `ignore-cancel`).
//!
//! Flags after the mode add the habits of real product adapters:
//!
//! | flag | behaviour |
//! |---|---|
//! | `--ignore-eof` | keeps running after stdin closes (until a signal) |
//! | `--grandchild` | starts a grandchild (in the same process group) that sleeps until a signal, and never reaps it |
//! | `--color-stderr` | writes ANSI-coloured log lines to stderr |
//! | `--auth` | lists two `authMethods` and refuses `session/new` with `-32000` until `authenticate` picks `fault-key` while `FAULT_AGENT_KEY` is set |
//!
//! | mode | on `session/prompt` |
//! |---|---|
//! | `echo` | streams `echo: <prompt>` in two chunks, `end_turn` |
//! | `stop=<reason>` | streams `partial`, ends with that raw stop reason |
//! | `env` | answers with the sorted variable names and the cwd |
//! | `permission` | asks permission; answers `granted <option>` or `denied` |
//! | `cancel-ok` | streams `started`, answers `cancelled` at `session/cancel` |
//! | `exit-at-init` | (writes to stderr and exits 7 at `initialize`) |
//! | `silent-init` | (never answers `initialize`) |
//! | `exit-mid-turn` | streams `partial answer`, writes to stderr, exits 3 |
//! | `not-json` | writes a line that is not JSON |
//! | `unknown-method` | calls `frobnicate/now` |
//! | `flood` | streams chunks forever |
//! | `flood-line` | writes one endless line |
//! | `ignore-cancel` | streams `working`, then ignores everything, EOF included |
//! | `error-data` | answers with a JSON-RPC error whose `data` holds the cause |
//! | `refuse` | answers with a bare JSON-RPC error (no `data`) |
//! | `subagents` | when the client advertised `subagents`: announces `reader` (with `helper` under it) and `writer`, streams in each, ends them (`end_turn`, `error`), then sends an update for a session it never announced and a second terminal state; answers `both done` |
//! | `subagent-late` | when the client advertised `subagents`: streams in `sub-early` before it announces it, announces `sub-open` and answers `left open` without ending it |
//! | `subagent-flood` | when the client advertised `subagents`: announces 5000 subagents, ending none; answers `flooded` |
//! | `subagent-cancel` | when the client advertised `subagents`: announces `waiter`, streams `started`; at `session/cancel` ends `waiter` as `cancelled`, then answers `cancelled` |
//!
//! `acp-fault-agent sleeper` is the grandchild: it sleeps until a signal.
//! With `FAULT_AGENT_GRANDCHILD_FILE` set, `--grandchild` writes its pid there.

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn send(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

fn reply(id: &Value, result: Value) {
    send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

fn chunk(session: &str, text: &str) {
    send(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": session,
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    }}));
}

/// A `session/update` of `session`.
fn update(session: &str, update: Value) {
    send(&json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}}));
}

/// Announces subagent session `child` on `parent`'s session, running.
fn announce(parent: &str, child: &str, title: &str) {
    update(
        parent,
        json!({"sessionUpdate": "subagent_update", "sessionId": child, "title": title,
            "description": format!("the {title}'s task"), "capabilities": {"cancel": {}}, "state": {"state": "running"}}),
    );
}

/// Ends subagent session `child` (on `parent`'s session): idle, with `stop`.
fn end(parent: &str, child: &str, stop: Value) {
    let mut state = json!({"state": "idle"});
    if let (Some(state), Value::Object(stop)) = (state.as_object_mut(), stop) {
        state.extend(stop);
    }
    update(
        parent,
        json!({"sessionUpdate": "subagent_update", "sessionId": child, "state": state}),
    );
}

/// `subagents`: two subagents (one with its own), their work, their ends,
/// then two faults (an unannounced session's update, a second end).
fn subagents(session: &str) {
    announce(session, "sub-reader", "reader");
    announce(session, "sub-writer", "writer");
    announce("sub-reader", "sub-helper", "helper");
    chunk("sub-reader", "reading");
    chunk("sub-helper", "helping");
    end("sub-reader", "sub-helper", json!({"stopReason": "end_turn"}));
    end(session, "sub-reader", json!({"stopReason": "end_turn"}));
    chunk("sub-writer", "writing");
    end(
        session,
        "sub-writer",
        json!({"stopReason": "error", "error": {"code": -32603, "message": "disk full"}}),
    );
    chunk("sub-stranger", "never announced");
    end(session, "sub-writer", json!({"stopReason": "end_turn"}));
    chunk(session, "both done");
}

fn forever() -> ! {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

fn error(id: &Value, code: i64, message: &str, data: Option<Value>) {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    send(&json!({"jsonrpc": "2.0", "id": id, "error": error}));
}

/// The two methods `--auth` offers, shaped like a product adapter's.
fn auth_methods() -> Value {
    json!([
        {"id": "agent-login", "name": "Log in with a browser", "description": "Opens a browser to sign in."},
        {"id": "fault-key", "name": "Use FAULT_AGENT_KEY", "description": "Requires setting the `FAULT_AGENT_KEY` environment variable.",
         "type": "env_var", "varName": "FAULT_AGENT_KEY"}
    ])
}

#[allow(clippy::too_many_lines, reason = "one agent's behaviour per request, in order")]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_else(|| "echo".to_owned());
    if mode == "sleeper" {
        forever();
    }
    if let Some(path) = std::env::var_os("FAULT_AGENT_PID_FILE") {
        let _ = std::fs::write(path, std::process::id().to_string());
    }
    let flag = |name: &str| args.iter().skip(1).any(|arg| arg == name);
    let (ignore_eof, needs_auth) = (flag("--ignore-eof"), flag("--auth"));
    if flag("--grandchild")
        && let Ok(exe) = std::env::current_exe()
    {
        // Never waited for: once it is killed it stays a zombie until its
        // reaper (init, or a subreaper above us) collects it.
        let grandchild = std::process::Command::new(exe)
            .arg("sleeper")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let (Ok(grandchild), Some(path)) = (grandchild, std::env::var_os("FAULT_AGENT_GRANDCHILD_FILE")) {
            let _ = std::fs::write(path, grandchild.id().to_string());
        }
    }
    if flag("--color-stderr") {
        eprintln!(
            "\u{1b}[2m2026-01-01T00:00:00Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m \u{1b}[1mfault agent\u{1b}[0m: coloured log line"
        );
    }
    let mut authenticated = false;
    // Whether the client advertised `subagents` at `initialize`.
    let mut subagents_advertised = false;
    let session = "fault-session-1";
    let mut pending_prompt: Option<Value> = None;
    let mut pending_permission: Option<Value> = None;
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        match method {
            "initialize" => {
                subagents_advertised = message.pointer("/params/clientCapabilities/subagents").is_some();
                match mode.as_str() {
                    "exit-at-init" => {
                        eprintln!("fault agent: cannot start (exit-at-init)");
                        std::process::exit(7);
                    }
                    "silent-init" => {}
                    _ => reply(
                        &id,
                        json!({"protocolVersion": 1, "agentCapabilities": {},
                               "authMethods": if needs_auth { auth_methods() } else { json!([]) }}),
                    ),
                }
            }
            "authenticate" => {
                let method = message.pointer("/params/methodId").and_then(Value::as_str);
                if method == Some("fault-key") && std::env::var_os("FAULT_AGENT_KEY").is_some() {
                    authenticated = true;
                    reply(&id, json!({}));
                } else {
                    error(
                        &id,
                        -32000,
                        "Authentication required",
                        Some(json!({"message": format!(
                            "cannot authenticate with {}: no browser here, and FAULT_AGENT_KEY is not set",
                            method.unwrap_or("no method")
                        )})),
                    );
                }
            }
            "session/new" if needs_auth && !authenticated => {
                eprintln!("fault agent: refusing session/new, not authenticated");
                error(&id, -32000, "Authentication required", None);
            }
            "session/new" => reply(&id, json!({"sessionId": session})),
            "session/prompt" => {
                let prompt = message
                    .pointer("/params/prompt/0/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                match mode.as_str() {
                    "echo" => {
                        chunk(session, "echo: ");
                        chunk(session, &prompt);
                        reply(&id, json!({"stopReason": "end_turn"}));
                    }
                    "env" => {
                        let mut names: Vec<String> = std::env::vars_os()
                            .map(|(name, _)| name.to_string_lossy().into_owned())
                            .collect();
                        names.sort();
                        let cwd = std::env::current_dir()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default();
                        chunk(session, &format!("env: {}; cwd: {cwd}", names.join(",")));
                        reply(&id, json!({"stopReason": "end_turn"}));
                    }
                    "permission" => {
                        pending_prompt = Some(id);
                        let request_id = json!("perm-1");
                        pending_permission = Some(request_id.clone());
                        send(
                            &json!({"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission", "params": {
                                "sessionId": session,
                                "toolCall": {"toolCallId": "call-1", "title": "write a file"},
                                "options": [
                                    {"optionId": "allow-1", "name": "Allow", "kind": "allow_once"},
                                    {"optionId": "reject-1", "name": "Reject", "kind": "reject_once"}
                                ]
                            }}),
                        );
                    }
                    "cancel-ok" => {
                        chunk(session, "started");
                        pending_prompt = Some(id);
                    }
                    "subagents" => {
                        if subagents_advertised {
                            subagents(session);
                        }
                        reply(&id, json!({"stopReason": "end_turn"}));
                    }
                    "subagent-late" => {
                        if subagents_advertised {
                            chunk("sub-early", "too soon");
                            announce(session, "sub-early", "early");
                            end(session, "sub-early", json!({"stopReason": "end_turn"}));
                            announce(session, "sub-open", "open");
                        }
                        chunk(session, "left open");
                        reply(&id, json!({"stopReason": "end_turn"}));
                    }
                    "subagent-flood" => {
                        if subagents_advertised {
                            for index in 0..5000 {
                                announce(session, &format!("flood-{index}"), "flood");
                            }
                        }
                        chunk(session, "flooded");
                        reply(&id, json!({"stopReason": "end_turn"}));
                    }
                    "subagent-cancel" => {
                        if subagents_advertised {
                            announce(session, "sub-waiter", "waiter");
                        }
                        chunk(session, "started");
                        pending_prompt = Some(id);
                    }
                    "exit-mid-turn" => {
                        chunk(session, "partial answer");
                        eprintln!("fault agent: crashing mid-turn");
                        std::process::exit(3);
                    }
                    "not-json" => {
                        println!("this line is not JSON");
                        let _ = std::io::stdout().flush();
                    }
                    "unknown-method" => {
                        send(&json!({"jsonrpc": "2.0", "id": "x-1", "method": "frobnicate/now", "params": {}}));
                    }
                    "flood" => {
                        let text = "x".repeat(1000);
                        loop {
                            let mut out = std::io::stdout().lock();
                            let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                                "sessionId": session,
                                "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
                            }});
                            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                                std::process::exit(0);
                            }
                        }
                    }
                    "flood-line" => {
                        let block = vec![b'x'; 64 * 1024];
                        let mut out = std::io::stdout().lock();
                        while out.write_all(&block).is_ok() {}
                        std::process::exit(0);
                    }
                    "ignore-cancel" => {
                        chunk(session, "working");
                        forever();
                    }
                    "error-data" => error(
                        &id,
                        -32603,
                        "Internal error",
                        Some(
                            json!({"message": "stream disconnected before completion: invalid api key", "retryable": false}),
                        ),
                    ),
                    "refuse" => error(&id, -32603, "Internal error", None),
                    other => {
                        let reason = other.strip_prefix("stop=").unwrap_or("end_turn");
                        chunk(session, "partial");
                        reply(&id, json!({"stopReason": reason}));
                    }
                }
            }
            "session/cancel" => {
                if mode == "subagent-cancel" && subagents_advertised && pending_prompt.is_some() {
                    end(session, "sub-waiter", json!({"stopReason": "cancelled"}));
                }
                if let Some(prompt) = pending_prompt.take() {
                    reply(&prompt, json!({"stopReason": "cancelled"}));
                }
            }
            "" if pending_permission.as_ref().is_some_and(|p| *p == id) => {
                pending_permission = None;
                let answer = match message.pointer("/result/outcome/outcome").and_then(Value::as_str) {
                    Some("selected") => format!(
                        "granted {}",
                        message
                            .pointer("/result/outcome/optionId")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    ),
                    _ => "denied".to_owned(),
                };
                if let Some(prompt) = pending_prompt.take() {
                    chunk(session, &answer);
                    reply(&prompt, json!({"stopReason": "end_turn"}));
                }
            }
            _ => {}
        }
    }
    if mode == "ignore-cancel" || ignore_eof {
        forever();
    }
}
