//! `dsh` exporting its spans over OTLP/HTTP to a receiver inside the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::otlp::{Receiver, Span, Typed};

fn dsh(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command.args(args).current_dir(dir);
    for key in ["DSH_BASE_URL", "DSH_API_KEY", "DSH_MODEL", "DSH_LOG"] {
        command.env_remove(key);
    }
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|span| span.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one {name:?} in {:#?}", names(spans));
    found[0]
}

fn names(spans: &[Span]) -> Vec<String> {
    spans
        .iter()
        .map(|span| format!("{} <- {}", span.name, span.parent))
        .collect()
}

/// The received spans as an indented tree (printed with `--nocapture`).
fn tree(spans: &[Span]) -> String {
    fn walk(spans: &[Span], parent: &str, depth: usize, out: &mut String) {
        for span in spans.iter().filter(|span| span.parent == parent) {
            let keys: Vec<String> = span
                .attributes
                .iter()
                .filter(|(key, _)| key.starts_with("gen_ai.") || key.as_str() == "error.type")
                .map(|(key, value)| format!("{key}={value}"))
                .collect();
            out.push_str(&format!(
                "{}{} [trace {} span {}] {}\n",
                "  ".repeat(depth),
                span.name,
                &span.trace_id[..8],
                &span.span_id[..8],
                keys.join(" ")
            ));
            for (event, _) in &span.events {
                out.push_str(&format!("{}  · {event}\n", "  ".repeat(depth)));
            }
            walk(spans, &span.span_id, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(spans, "", 0, &mut out);
    out
}

fn parent_of<'a>(spans: &'a [Span], span: &Span) -> &'a Span {
    spans
        .iter()
        .find(|candidate| candidate.span_id == span.parent)
        .unwrap_or_else(|| panic!("the parent of {} in {:#?}", span.name, names(spans)))
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn a_delegation_exports_one_tree_with_the_gen_ai_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &["run", "Summarize the README."],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint),
            ("OTEL_SERVICE_NAME", "dsh-under-test"),
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(!text(&output.stderr).contains("warning"), "{}", text(&output.stderr));
    // Flushed before exit: everything is here once the process has ended.
    let spans = receiver.spans();
    eprintln!("{}", tree(&spans));
    assert!(receiver.paths().iter().all(|path| path == "/v1/traces"));

    // One trace.
    let trace = &spans[0].trace_id;
    assert!(spans.iter().all(|span| &span.trace_id == trace), "{:#?}", names(&spans));
    assert!(spans.iter().all(|span| span.service == "dsh-under-test"));

    // invoke_agent (parent) → execute_tool subagent → invoke_agent (child) → chat.
    let parent = one(&spans, "invoke_agent dsh run");
    assert_eq!(parent.parent, "", "the parent's run is the root");
    let tool = one(&spans, "execute_tool subagent");
    assert_eq!(parent_of(&spans, tool).span_id, parent.span_id);
    let child = one(&spans, "invoke_agent Summarize the README.");
    assert_eq!(parent_of(&spans, child).span_id, tool.span_id);
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 3, "two parent calls, one child call: {:#?}", names(&spans));
    assert_eq!(chats.iter().filter(|chat| chat.parent == child.span_id).count(), 1);
    assert_eq!(chats.iter().filter(|chat| chat.parent == parent.span_id).count(), 2);

    // The attributes the conventions name.
    let attr = |span: &Span, key: &str| span.attributes.get(key).cloned().unwrap_or_default();
    assert_eq!(attr(parent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(parent, "gen_ai.agent.name"), "dsh run");
    assert!(!attr(parent, "gen_ai.agent.id").is_empty());
    assert_eq!(attr(parent, "gen_ai.provider.name"), "dsh.scripted");
    assert_eq!(attr(parent, "gen_ai.request.model"), "scripted");
    assert_eq!(attr(child, "gen_ai.operation.name"), "invoke_agent");
    assert_ne!(attr(child, "gen_ai.agent.id"), attr(parent, "gen_ai.agent.id"));
    assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "subagent");
    assert_eq!(attr(tool, "gen_ai.tool.type"), "function");
    assert!(!attr(tool, "gen_ai.tool.call.id").is_empty());
    assert_eq!(attr(tool, "gen_ai.agent.id"), attr(parent, "gen_ai.agent.id"));
    assert!(!tool.attributes.contains_key("error.type"));
    let chat = chats.iter().find(|chat| chat.parent == child.span_id).unwrap();
    assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(chat, "gen_ai.request.model"), "scripted");

    // Typed as the conventions type them: finish reasons a string array,
    // token counts ints (not their text).
    assert_eq!(chat.typed["gen_ai.response.finish_reasons"], Typed::strings(&["stop"]));
    let first = chats.iter().find(|chat| chat.parent == parent.span_id).unwrap();
    assert_eq!(
        first.typed["gen_ai.response.finish_reasons"],
        Typed::strings(&["tool_calls"])
    );
    for span in chats.iter().copied().chain([parent, child]) {
        for key in ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"] {
            assert!(
                matches!(span.typed[key], Typed::Int(count) if count > 0),
                "{key} on {span:#?}"
            );
        }
    }
    let sum = |key: &str| -> i64 {
        chats
            .iter()
            .filter(|chat| chat.parent == parent.span_id)
            .map(|chat| match chat.typed[key] {
                Typed::Int(count) => count,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(
        parent.typed["gen_ai.usage.input_tokens"],
        Typed::Int(sum("gen_ai.usage.input_tokens"))
    );
    assert_eq!(
        parent.typed["gen_ai.usage.output_tokens"],
        Typed::Int(sum("gen_ai.usage.output_tokens"))
    );
    // Every attribute the conventions name has its type: counts are ints,
    // finish reasons a string array, the rest strings.
    let ints = [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.request.max_tokens",
    ];
    for span in chats.iter().copied().chain([parent, tool, child]) {
        for (key, value) in span.typed.iter().filter(|(key, _)| key.starts_with("gen_ai.")) {
            let typed = match value {
                Typed::Int(_) => ints.contains(&key.as_str()),
                Typed::Array(_) => key == "gen_ai.response.finish_reasons",
                Typed::String(_) => !ints.contains(&key.as_str()) && key != "gen_ai.response.finish_reasons",
                _ => false,
            };
            assert!(typed, "{key} = {value:?} on {}", span.name);
        }
    }
    // Message text is opt-in: not recorded by default.
    assert!(!parent.attributes.contains_key("gen_ai.input.messages"));
    // No price, no cost: never a made-up one.
    for span in chats.iter().copied().chain([parent, child]) {
        assert!(!span.attributes.contains_key("dsh.cost"), "{span:#?}");
    }

    // The lifecycle, as events on the execute_tool span.
    let events: Vec<&str> = tool.events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        events,
        [
            "subagent.started",
            "subagent.published",
            "subagent.settled",
            "subagent.disposed"
        ]
    );
    assert_eq!(tool.events[0].1["subagent.provider"], "spawn");
    assert_eq!(tool.events[0].1["subagent.child_id"], attr(child, "gen_ai.agent.id"));
    assert_eq!(tool.events[2].1["subagent.stop_reason"], "completed");
    assert_eq!(tool.events[3].1["subagent.disposed"], "ok");
}

/// A background child outlives the call that started it: its task's
/// `subagent.task` span starts a trace of its own, linked to that call's
/// `execute_tool` span, and carries the whole lifecycle (`settled` and
/// `disposed` included) with the child's run under it.
#[test]
fn a_background_childs_lifecycle_sits_on_its_tasks_span() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{"rules": [
        {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "background result"}},
        {"when": {"last_tool": "task_output"}, "reply": {"text": "Collected: {{last_tool_result}}"}},
        {"when": {"last_tool": "subagent"},
         "reply": {"tool_calls": [{"name": "task_output", "arguments": {"task_id": "subagent-1", "wait": true}}]}},
        {"when": {"last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "in the background", "prompt": "work", "run_in_background": true}}]}}
    ]}"#;
    std::fs::write(dir.path().join("bg.json"), script).unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &["run", "--quiet", "--script", "bg.json", "go"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("Collected: background result"));
    let spans = receiver.spans();
    eprintln!("{}", tree(&spans));

    let parent = one(&spans, "invoke_agent dsh run");
    let call = one(&spans, "execute_tool subagent");
    assert_eq!(call.parent, parent.span_id);
    assert!(
        call.events.is_empty(),
        "the call only started the task: {:#?}",
        call.events
    );
    let task = one(&spans, "subagent.task");
    assert_eq!(task.parent, "", "the task's span starts a trace");
    assert_ne!(task.trace_id, parent.trace_id);
    assert_eq!(task.links, [(call.trace_id.clone(), call.span_id.clone())]);
    assert_eq!(task.typed["subagent.task_id"], Typed::String("subagent-1".into()));
    let child = one(&spans, "invoke_agent in the background");
    assert_eq!(child.parent, task.span_id);
    assert_eq!(child.trace_id, task.trace_id);

    let events: Vec<&str> = task.events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        events,
        [
            "subagent.started",
            "subagent.published",
            "subagent.settled",
            "subagent.disposed"
        ]
    );
    assert_eq!(
        task.events[0].1["subagent.child_id"],
        child.attributes["gen_ai.agent.id"]
    );
    assert_eq!(task.events[2].1["subagent.stop_reason"], "completed");
    assert_eq!(task.events[3].1["subagent.disposed"], "ok");
}

#[test]
fn a_failing_delegation_carries_its_error_type() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.json"),
        r#"{"rules": [
            {"when": {"last_tool": "subagent"}, "reply": {"text": "The delegation failed: {{last_tool_result}}"}},
            {"when": {}, "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "empty", "prompt": ""}}]}}
        ]}"#,
    )
    .unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &["run", "--script", "script.json", "go"],
        &[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            &format!("{}/v1/traces", receiver.endpoint),
        )],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let spans = receiver.spans();
    let tool = one(&spans, "execute_tool subagent");
    assert_eq!(tool.attributes["error.type"], "INVALID_ARGUMENTS");
    let parent = one(&spans, "invoke_agent dsh run");
    assert_eq!(parent_of(&spans, tool).span_id, parent.span_id);
    assert!(
        !parent.attributes.contains_key("error.type"),
        "the parent itself completed"
    );
}

#[test]
fn message_text_is_recorded_only_on_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &["run", "--quiet", "hello there"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let spans = receiver.spans();
    let parent = one(&spans, "invoke_agent dsh run");
    assert!(parent.attributes["gen_ai.input.messages"].contains("hello there"));
    assert!(parent.attributes["gen_ai.output.messages"].contains("assistant"));
}

/// A run against a collector that refuses connections, or one that accepts
/// and never answers, succeeds and exits within the flush bound, with one
/// warning line.
#[test]
fn a_collector_that_is_down_or_slow_never_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let baseline = dsh(dir.path(), &["run", "--quiet", "hi"], &[]);
    let baseline = (started.elapsed(), baseline);
    assert!(baseline.1.status.success());

    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow = format!("http://{}", silent.local_addr().unwrap());
    // Accepts and reads, never answers.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming() {
            held.push(stream);
        }
    });
    for endpoint in [closed, slow] {
        let started = Instant::now();
        let output = dsh(
            dir.path(),
            &["run", "--quiet", "hi"],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
        );
        let elapsed = started.elapsed();
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert_eq!(text(&output.stdout), text(&baseline.1.stdout));
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("dsh: warning: some spans were not exported over OTLP"),
            "{stderr}"
        );
        assert!(
            elapsed < baseline.0 + Duration::from_millis(2500),
            "{endpoint}: {elapsed:?} against {:?}",
            baseline.0
        );
    }
}

#[test]
fn spans_are_flushed_after_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("slow.json"),
        r#"{"rules": [
            {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "never finished", "delay_ms": 60000}},
            {"when": {"last_message": "user"}, "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "slow", "prompt": "work"}}]}}
        ]}"#,
    )
    .unwrap();
    let receiver = Receiver::start();
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(["run", "--quiet", "--script", "slow.json", "go"])
        .current_dir(dir.path())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    // Let the child's model call start, then interrupt.
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output.stderr));
    let spans = receiver.spans();
    // A signal stops the run resumably: interrupted, not cancelled.
    let parent = one(&spans, "invoke_agent dsh run");
    assert_eq!(parent.attributes["error.type"], "INTERRUPTED");
    let child = one(&spans, "invoke_agent slow");
    assert_eq!(child.attributes["error.type"], "INTERRUPTED");
    assert_eq!(
        one(&spans, "execute_tool subagent").attributes["error.type"],
        "RUN_ABORTED"
    );
}

/// Bounded delegation on the wire: under `--max-concurrent 1` the second of
/// two parallel calls waits, and its `execute_tool` span says so with
/// `subagent.queued` (`subagent.queue_ahead`) and `subagent.admitted`
/// (`subagent.wait_ms`), both ints; under `--max-children 1` the second call
/// is refused with `subagent.refused`, its `error.type` a string.
#[test]
fn the_limits_events_carry_int_counts_and_a_string_error_type() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{"rules": [
        {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "done", "delay_ms": 50}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "first", "prompt": "one"}},
            {"name": "subagent", "arguments": {"description": "second", "prompt": "two"}}]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "both handled"}}
    ]}"#;
    std::fs::write(dir.path().join("two.json"), script).unwrap();
    let events_of = |flags: &[&str]| {
        let receiver = Receiver::start();
        let mut args = vec!["run", "--script", "two.json"];
        args.extend_from_slice(flags);
        args.push("Do two things.");
        let output = dsh(
            dir.path(),
            &args,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        let spans = receiver.spans();
        let tools = named(&spans, "execute_tool subagent");
        assert_eq!(tools.len(), 2, "{:#?}", names(&spans));
        tools
            .iter()
            .flat_map(|tool| {
                tool.events
                    .iter()
                    .map(|(name, _)| name.clone())
                    .zip(tool.typed_events.clone())
            })
            .collect::<Vec<_>>()
    };
    let event = |events: &[(String, std::collections::BTreeMap<String, Typed>)], name: &str| {
        events
            .iter()
            .find(|(event, _)| event == name)
            .map(|(_, attributes)| attributes.clone())
            .unwrap_or_else(|| panic!("no {name} among {events:#?}"))
    };

    let waited = events_of(&["--max-concurrent", "1"]);
    let queued = event(&waited, "subagent.queued");
    assert_eq!(queued["subagent.queue_ahead"], Typed::Int(0), "{queued:?}");
    let admitted = event(&waited, "subagent.admitted");
    assert!(
        matches!(admitted["subagent.wait_ms"], Typed::Int(ms) if ms >= 0),
        "{admitted:?}"
    );

    let refused = events_of(&["--max-children", "1"]);
    let refused = event(&refused, "subagent.refused");
    assert_eq!(
        refused["error.type"],
        Typed::String("max_children".to_owned()),
        "{refused:?}"
    );
}

#[test]
fn a_cut_result_records_its_full_and_shown_size_and_the_run_shows_it_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    // The parent delegates; its child answers 5,000 characters; the parent
    // reads at most 1,024 bytes of it (`--result-limit 256`).
    let script = serde_json::json!({"rules": [
        {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "w".repeat(5_000), "stream_by": "whole"}},
        {"when": {"last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "write at length", "prompt": "Write."}}]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "read it"}}
    ]});
    std::fs::write(dir.path().join("long.json"), script.to_string()).unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &[
            "run",
            "--script",
            "long.json",
            "--result-limit",
            "256",
            "Write at length.",
        ],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    );
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let spans = receiver.spans();
    let tool = one(&spans, "execute_tool subagent");
    assert_eq!(tool.typed["dsh.result.full_bytes"], Typed::Int(5_000));
    assert_eq!(tool.typed["dsh.result.full_chars"], Typed::Int(5_000));
    let Typed::Int(shown) = tool.typed["dsh.result.shown_bytes"] else {
        panic!("{:?}", tool.typed)
    };
    assert!(shown > 0 && shown < 1_024, "{shown}");
    assert_eq!(tool.typed["dsh.result.shown_chars"], Typed::Int(shown));
    assert!(
        stderr.contains(&format!(
            "↳ subagent \"write at length\" completed (5 KB answer, {shown} B shown; task_output reads the rest from task subagent-1)"
        )),
        "{stderr}"
    );

    // A budget below 256 tokens is refused before anything runs.
    let refused = dsh(
        dir.path(),
        &["run", "--script", "long.json", "--result-limit", "100", "go"],
        &[],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("--result-limit"),
        "{}",
        text(&refused.stderr)
    );
}

/// With a price (`[model] price`), every chat span carries its call's cost
/// as a float, `dsh.cost`, and each run's invoke_agent span the sum of its
/// own calls' (a child's calls are its own run's, not its parent's).
#[test]
fn priced_model_calls_and_runs_carry_their_cost_as_a_float() {
    let dir = tempfile::tempdir().unwrap();
    // One unit a token.
    std::fs::write(
        dir.path().join("dsh.toml"),
        "[model]\nprice = { input = 1000000, output = 1000000 }\n",
    )
    .unwrap();
    let receiver = Receiver::start();
    let output = dsh(
        dir.path(),
        &["run", "Summarize the README."],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let spans = receiver.spans();
    let cost = |span: &Span| match span.typed.get("dsh.cost") {
        Some(Typed::Double(cost)) => *cost,
        other => panic!("dsh.cost = {other:?} on {span:#?}"),
    };
    let tokens = |span: &Span| -> f64 {
        ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"]
            .iter()
            .map(|key| match span.typed[*key] {
                Typed::Int(count) => count as f64,
                _ => 0.0,
            })
            .sum()
    };
    let parent = one(&spans, "invoke_agent dsh run");
    let child = one(&spans, "invoke_agent Summarize the README.");
    for run in [parent, child] {
        let chats: Vec<&Span> = named(&spans, "chat scripted")
            .into_iter()
            .filter(|chat| chat.parent == run.span_id)
            .collect();
        assert!(!chats.is_empty(), "{:#?}", names(&spans));
        for chat in &chats {
            assert!(cost(chat) > 0.0, "{chat:#?}");
            assert!((cost(chat) - tokens(chat)).abs() < 1e-6, "{chat:#?}");
        }
        let sum: f64 = chats.iter().map(|chat| cost(chat)).sum();
        assert!((cost(run) - sum).abs() < 1e-6, "{} != {sum}", cost(run));
        assert!((cost(run) - tokens(run)).abs() < 1e-6, "{run:#?}");
    }
}
