//! A money budget per delegation tree, through the real `dsh` binary: the
//! models' prices in `dsh.toml`, the tree's `cost_limit`, and a local
//! OpenAI-compatible server (plain HTTP/1.1 and server-sent events on
//! loopback) whose parent delegates one child in every answer and whose
//! children answer at once. Each call reports 1,000 prompt and 100
//! completion tokens, or no usage at all (then dsh estimates it, and the
//! cost is marked estimated).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use serde_json::{Value, json};
use support::http::{event, read_request};

/// Whether the server reports usage at the end of each stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reports {
    /// 1,000 prompt and 100 completion tokens.
    Usage,
    /// No usage at all.
    Nothing,
    /// 1,000 prompt tokens, 800 of them read from the server's cache, and
    /// 100 completion tokens.
    Cached,
}

/// Starts the server on a port of its own; it lives as long as the test.
fn server(reports: Reports) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve(stream, reports));
        }
    });
    base_url
}

fn serve(mut stream: TcpStream, reports: Reports) {
    let Some(body) = read_request(&mut stream) else { return };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
    let offers_subagent = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|tool| tool["function"]["name"] == "subagent"));
    let (delta, finish) = if offers_subagent {
        let turn = request["messages"].as_array().map_or(0, Vec::len);
        let arguments = json!({"description": format!("part {turn}"), "prompt": "Answer briefly."});
        let call = json!({"index": 0, "id": format!("call_{turn}"), "type": "function",
                          "function": {"name": "subagent", "arguments": arguments.to_string()}});
        (json!({"tool_calls": [call]}), "tool_calls")
    } else {
        (json!({"content": "A brief answer."}), "stop")
    };
    event(&mut stream, &json!({"choices": [{"index": 0, "delta": delta}]}));
    event(
        &mut stream,
        &json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    );
    let usage = match reports {
        Reports::Usage => Some(json!({"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100})),
        Reports::Cached => Some(
            json!({"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
                                       "prompt_tokens_details": {"cached_tokens": 800}}),
        ),
        Reports::Nothing => None,
    };
    if let Some(usage) = usage {
        event(&mut stream, &json!({"choices": [], "usage": usage}));
    }
    let _ = stream.write_all(b"data: [DONE]\n\n");
}

/// `dsh run` in a directory holding `config` as its dsh.toml, against the
/// server at `base_url`, with `args` before the task: its exit code,
/// stderr, the data directory and the parent's transcript.
fn run(base_url: &str, config: &str, args: &[&str]) -> (Option<i32>, String, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dsh.toml"), config).unwrap();
    let output = Command::new(common::DSH)
        .arg("run")
        .args(args)
        .arg("Split the work and delegate it.")
        .current_dir(dir.path())
        .env("DSH_BASE_URL", base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "test-model")
        .env_remove("DSH_CONTEXT_WINDOW")
        .env_remove("DSH_LOG")
        .env_remove("DSH_PARENT_CONFIGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let transcript = stderr
        .lines()
        .find_map(|line| line.strip_prefix("dsh: transcripts in .dsh/agents: "))
        .and_then(|rest| rest.split(" (parent)").next())
        .map(|parent| std::fs::read_to_string(dir.path().join(".dsh/agents").join(format!("{parent}.jsonl"))).unwrap())
        .unwrap_or_default();
    (output.status.code(), stderr, dir, transcript)
}

/// 1,000 units per million tokens: each call of 1,100 tokens costs 1.1.
const PRICED: &str = "[model]\nprice = { input = 1000, output = 1000 }\n";

/// The text the parent's model reads when the budget refuses a delegation.
const REFUSED: &str = "subagent not started: this delegation tree's cost budget is spent (3.3 of 3). Finish the task with the results you have; do not retry.";

/// A budget of 3: the parent's first call (1.1) and its child's (1.1)
/// fit; the parent's second call (1.1 more, 3.3 in all) spends it, so the
/// delegation it asks for is refused with the pinned text, and the run
/// stops on the budget before the parent's next call. The usage line
/// prices the parent's calls, the child's and the whole tree.
#[test]
fn a_tree_out_of_its_cost_limit_refuses_the_next_delegation_and_stops() {
    let base_url = server(Reports::Usage);
    for (config, args) in [
        (format!("{PRICED}[limits]\ncost_limit = 3\n"), vec![]),
        (PRICED.to_owned(), vec!["--cost-limit", "3"]),
    ] {
        let (code, stderr, dir, transcript) = run(&base_url, &config, &args);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.ends_with("dsh: the run did not finish: cost budget of 3 spent\n"),
            "{stderr}"
        );
        tree_shows_cost(dir.path());
        assert_eq!(stderr.matches(" started (").count(), 1, "one child started:\n{stderr}");
        // The child's progress line prices its one call.
        assert!(
            stderr.contains("↳ subagent \"part 2\" completed · 1 model call · 1100 tokens, cost 1.1 · "),
            "{stderr}"
        );
        assert_eq!(transcript.matches(REFUSED).count(), 1, "{transcript}");
        assert!(
            stderr.contains(
                "dsh: own model calls: 2200 tokens, cost 2.2 · children: 1100 tokens, cost 1.1 · total: 3300 tokens, cost 3.3\n"
            ),
            "{stderr}"
        );
    }
}

/// `dsh tree` after that run: the parent's own cost (two calls) and its
/// subtree's, the child's own, as text and as JSON.
fn tree_shows_cost(dir: &std::path::Path) {
    let text = common::dsh(dir, &["tree"]);
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains(" · tokens 2000 in, 200 out · cost 2.2 · subtree 3000 in, 300 out · subtree cost 3.3"),
        "{text}"
    );
    assert!(lines[1].contains(" · tokens 1000 in, 100 out · cost 1.1"), "{text}");
    let json = common::dsh(dir, &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let root = &json["root"];
    assert_eq!(root["cost"], json!({"amount": 2.2, "estimated": false}));
    assert_eq!(root["subtree_cost"], json!({"amount": 3.3, "estimated": false}));
    assert_eq!(root["turns"][0]["cost"], json!({"amount": 2.2, "estimated": false}));
    let child = &root["children"][0];
    assert_eq!(child["cost"], json!({"amount": 1.1, "estimated": false}));
    assert_eq!(child["subtree_cost"], child["cost"]);
}

/// A server that reports no usage: each call's tokens are estimated, so
/// are their costs, and the budget spends the estimates: the refusal says
/// the spend was partly estimated, and the usage line marks each cost.
#[test]
fn estimated_usage_gives_estimated_costs_that_spend_the_budget() {
    let base_url = server(Reports::Nothing);
    // 1,000,000 units per million tokens: one unit a token.
    let config = "[model]\nprice = { input = 1000000, output = 1000000 }\n[limits]\ncost_limit = 1\n";
    let (code, stderr, dir, transcript) = run(&base_url, config, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    let json = common::dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["root"]["cost"]["estimated"], true, "{json}");
    assert_eq!(json["root"]["subtree_cost"]["estimated"], true, "{json}");
    assert!(
        stderr.ends_with("dsh: the run did not finish: cost budget of 1 spent\n"),
        "{stderr}"
    );
    assert!(
        transcript.contains(", partly estimated). Finish the task"),
        "{transcript}"
    );
    let usage = stderr
        .lines()
        .find(|line| line.starts_with("dsh: own model calls: "))
        .unwrap_or_else(|| panic!("no usage line:\n{stderr}"));
    assert!(usage.contains(" tokens (estimated), cost "), "{usage}");
    assert!(usage.ends_with(" (estimated)"), "{usage}");
}

/// Without a price, dsh shows tokens only; a cost budget over a model of
/// no price is refused before anything starts, naming the model and the
/// key that would price it; a price that is no number is refused at its
/// line and key.
#[test]
fn no_price_shows_tokens_only_and_a_budget_without_one_is_refused() {
    let base_url = server(Reports::Usage);
    let (_, stderr, dir, _) = run(&base_url, "", &["--max-turns", "2"]);
    let usage = stderr
        .lines()
        .find(|line| line.starts_with("dsh: own model calls: "))
        .unwrap_or_else(|| panic!("no usage line:\n{stderr}"));
    assert!(!usage.contains("cost"), "{usage}");
    let tree = common::dsh(dir.path(), &["tree"]);
    let tree = String::from_utf8(tree.stdout).unwrap();
    assert!(tree.contains(" · tokens ") && !tree.contains("cost"), "{tree}");
    let json = common::dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (&json["root"]["cost"], &json["root"]["subtree_cost"]),
        (&Value::Null, &Value::Null)
    );

    let (code, stderr, _dir, _) = run(&base_url, "", &["--cost-limit", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "dsh: a cost budget needs the price of every model of the tree, and \"test-model\", the parent's model (set `[model] price` in dsh.toml), has none: what it spends could never be counted\n"
    );
    let config = format!("{PRICED}[[subagents]]\nprovider = \"spawn\"\nagent_options = {{ model = \"other\" }}\n");
    let (code, stderr, _dir, _) = run(&base_url, &config, &["--cost-limit", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("\"other\", the model of the children of `subagent` (set `subagents[0].agent_options.price` in dsh.toml), has none"), "{stderr}");

    let (code, stderr, _dir, _) = run(&base_url, "[model]\nprice = { input = -1, output = 2 }\n", &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "dsh: dsh.toml:2:19: model.price.input: the input price must be a number, zero or more, per million tokens (got -1)\n"
    );
    let (code, stderr, _dir, _) = run(&base_url, "", &["--cost-limit", "-2"]);
    assert_eq!(code, Some(2), "{stderr}");
}

/// A resumed parent runs on the model its transcript names, which
/// `[model] price` does not price (that prices today's model): under a
/// cost budget the resume is refused as bad input naming that model and
/// what would price it, before anything starts.
#[test]
fn a_resumed_parent_whose_model_has_no_price_is_refused_under_a_cost_limit() {
    let base_url = server(Reports::Usage);
    let (_, stderr, dir, _) = run(&base_url, "", &["--max-turns", "1"]);
    let parent = stderr
        .lines()
        .find_map(|line| line.strip_prefix("dsh: transcripts in .dsh/agents: "))
        .and_then(|rest| rest.split(" (parent)").next())
        .unwrap_or_else(|| panic!("no transcripts line:\n{stderr}"))
        .to_owned();
    std::fs::write(dir.path().join("dsh.toml"), PRICED).unwrap();
    let output = Command::new(common::DSH)
        .args(["run", "--resume", &parent, "--cost-limit", "5", "Go on."])
        .current_dir(dir.path())
        .env("DSH_BASE_URL", &base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "priced-model")
        .env_remove("DSH_CONTEXT_WINDOW")
        .env_remove("DSH_LOG")
        .env_remove("DSH_PARENT_CONFIGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "dsh: a cost budget needs the price of every model of the tree, and \"test-model\", the resumed parent's model, from its transcript (run it on a model with a price: `--model`, or `[model] model` and `price` in dsh.toml), has none: what it spends could never be counted\n"
    );
}

/// A server that reports cached prompt tokens: a price with `cached_input`
/// charges them at it (each call: 200 × 1000 + 800 × 100 + 100 × 1000 per
/// million = 0.38), the usage line and `dsh tree` show the cached count,
/// and the transcript keeps it.
#[test]
fn cached_prompt_tokens_are_shown_and_priced_at_the_cached_price() {
    let base_url = server(Reports::Cached);
    let config = "[model]\nprice = { input = 1000, output = 1000, cached_input = 100 }\n";
    let (_, stderr, dir, transcript) = run(&base_url, config, &["--max-turns", "2"]);
    // The parent's two calls, and its two children's.
    assert!(
        transcript.contains(r#""total_tokens":2200,"cached_tokens":1600}"#),
        "{transcript}"
    );
    assert!(
        stderr.contains("↳ subagent \"part 2\" completed · 1 model call · 1100 tokens (800 cached), cost 0.38 · "),
        "{stderr}"
    );
    assert!(
        stderr.contains("dsh: own model calls: 2200 tokens (1600 cached), cost 0.76 · "),
        "{stderr}"
    );
    let tree = common::dsh(dir.path(), &["tree"]);
    let tree = String::from_utf8(tree.stdout).unwrap();
    let lines: Vec<&str> = tree.lines().collect();
    assert!(
        lines[0].contains(" · tokens 2000 in, 200 out, 1600 cached · cost 0.76 · "),
        "{tree}"
    );
    assert!(
        lines[1].contains(" · tokens 1000 in, 100 out, 800 cached · cost 0.38"),
        "{tree}"
    );
}
