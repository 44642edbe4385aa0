//! Token budgets hold against a server that reports no usage, through the
//! real `dsh` binary. The model is a local OpenAI-compatible server (plain
//! HTTP/1.1 and server-sent events on loopback) whose parent keeps
//! delegating and whose children answer at once; it reports no usage in its
//! streams (as llama-cpp-python does), or a usage without `prompt_tokens`,
//! or zeros. `dsh` estimates what each call spent, spends the estimate from
//! the tree's budget, and marks it estimated on its usage line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::model::{ModelServer, Reply, delta, finish};

/// What the server says of usage at the end of each stream.
#[derive(Clone, Copy, Debug)]
enum Reports {
    /// No usage at all (llama-cpp-python's streams).
    Nothing,
    /// A usage with `completion_tokens` only.
    NoPromptTokens,
    /// A usage whose counts are all zero.
    Zeros,
}

const ALL: [Reports; 3] = [Reports::Nothing, Reports::NoPromptTokens, Reports::Zeros];

/// The server, on a port of its own; it lives as long as the test. The
/// parent (a request that offers `subagent`) asks for `fan_out` delegations
/// in every answer, whatever it was told; a child answers at once.
struct Server {
    base_url: String,
    model: ModelServer,
}

impl Server {
    fn start(reports: Reports, fan_out: usize) -> Self {
        let model = ModelServer::start(move |request| answer(request, reports, fan_out));
        Self {
            base_url: model.base_url.clone(),
            model,
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.model.log().into_iter().map(|exchange| exchange.body).collect()
    }
}

fn offers_subagent(request: &Value) -> bool {
    request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|tool| tool["function"]["name"] == "subagent"))
}

fn answer(request: &Value, reports: Reports, fan_out: usize) -> Reply {
    let (answer, reason) = if offers_subagent(request) {
        let turn = request["messages"].as_array().map_or(0, Vec::len);
        let calls: Vec<Value> = (0..fan_out)
            .map(|index| {
                let arguments = json!({"description": format!("part {turn}.{index}"), "prompt": "Answer briefly."});
                json!({"index": index, "id": format!("call_{turn}_{index}"), "type": "function",
                       "function": {"name": "subagent", "arguments": arguments.to_string()}})
            })
            .collect();
        (json!({"tool_calls": calls}), "tool_calls")
    } else {
        (json!({"content": "A brief answer."}), "stop")
    };
    let mut chunks = vec![delta(answer), finish(reason)];
    let usage = match reports {
        Reports::Nothing => None,
        Reports::NoPromptTokens => Some(json!({"completion_tokens": 12})),
        Reports::Zeros => Some(json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})),
    };
    if let Some(usage) = usage {
        chunks.push(json!({"choices": [], "usage": usage}));
    }
    Reply::chunks(chunks)
}

/// `dsh run --token-limit <budget>` against `server`: its exit code,
/// stderr, and the parent's transcript.
fn run(server: &Server, budget: u64) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(common::DSH)
        .args([
            "run",
            "--token-limit",
            &budget.to_string(),
            "Split the work and delegate it.",
        ])
        .current_dir(dir.path())
        .env("DSH_BASE_URL", &server.base_url)
        .env("DSH_API_KEY", "sk-test")
        .env("DSH_MODEL", "test-model")
        .env_remove("DSH_CONTEXT_WINDOW")
        .env_remove("DSH_LOG")
        .env_remove("DSH_PARENT_CONFIGS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let parent = stderr
        .lines()
        .find_map(|line| line.strip_prefix("dsh: transcripts in .dsh/agents: "))
        .and_then(|rest| rest.split(" (parent)").next())
        .unwrap_or_else(|| panic!("no transcripts line:\n{stderr}"));
    let transcript = std::fs::read_to_string(dir.path().join(".dsh/agents").join(format!("{parent}.jsonl"))).unwrap();
    (output.status.code(), stderr, transcript)
}

const REFUSED: &str = "subagent not started: this delegation tree's token budget is spent";

/// A tree budget of 100 tokens: the parent's first call spends more than
/// that by the estimate, so none of its five delegations starts, and the
/// run stops on its budget. (Read as zero tokens, the budget let every
/// delegation start.)
#[test]
fn a_tree_budget_refuses_every_child_once_the_estimate_spent_it() {
    for reports in ALL {
        let server = Server::start(reports, 5);
        let (code, stderr, transcript) = run(&server, 100);
        assert_eq!(code, Some(1), "{reports:?}: {stderr}");
        assert!(
            stderr.ends_with("dsh: the run did not finish: token budget of 100 tokens spent\n"),
            "{reports:?}: {stderr}"
        );
        assert!(
            !stderr.contains(" started ("),
            "{reports:?}: no child started:\n{stderr}"
        );
        assert_eq!(transcript.matches(REFUSED).count(), 5, "{reports:?}: {transcript}");
        assert_eq!(server.bodies().len(), 1, "{reports:?}: only the parent's first call");
    }
}

/// `--token-limit 3000` over a parent that would delegate forever: every
/// request asks for no more than the estimate has left, children start
/// while the budget lasts, the delegation asked for once it is spent is
/// refused, and the run stops on its budget after a few requests (read as
/// zero tokens, the run went on to its turn limit, each request asking for
/// 3,000 tokens). The usage line says its counts are estimated.
#[test]
fn token_limit_stops_a_run_whose_server_reports_no_usage() {
    for reports in ALL {
        let server = Server::start(reports, 1);
        let (code, stderr, transcript) = run(&server, 3_000);
        assert_eq!(code, Some(1), "{reports:?}: {stderr}");
        assert!(
            stderr.ends_with("dsh: the run did not finish: token budget of 3000 tokens spent\n"),
            "{reports:?}: {stderr}"
        );
        assert!(stderr.contains(" completed · 1 model call · "), "{reports:?}: {stderr}");
        assert!(transcript.contains(REFUSED), "{reports:?}: {transcript}");
        let usage = stderr
            .lines()
            .find(|line| line.starts_with("dsh: own model calls: "))
            .unwrap_or_else(|| panic!("{reports:?}: no usage line:\n{stderr}"));
        assert_eq!(usage.matches(" tokens (estimated)").count(), 3, "{reports:?}: {usage}");
        let bodies = server.bodies();
        assert!(bodies.len() < 8, "{reports:?}: {} requests", bodies.len());
        let asked: Vec<u64> = bodies.iter().map(|body| body["max_tokens"].as_u64().unwrap()).collect();
        assert_eq!(asked[0], 3_000, "{reports:?}");
        assert!(
            asked.windows(2).all(|pair| pair[1] < pair[0]),
            "{reports:?}: each request asks for what is left: {asked:?}"
        );
    }
}
