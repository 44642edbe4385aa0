//! The kit over every in-process provider we ship: the scripted test
//! provider, spawn and fork. Each must keep the whole contract.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime, JsonlChildStore};
use dsh_llm::ScriptedModel;
use dsh_subagent_api::{AgentRef, Capabilities, Capability, ChildStore};
use dsh_subagent_conformance::{Instance, Probe, Report, Status, Subject};
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_subagent_testing::{ScriptedProvider, ScriptedStats};
use dsh_tools::ToolRegistry;
use serde_json::json;

/// The scripted provider's counters, as the kit's probe.
struct Stats(Arc<ScriptedStats>);

impl Probe for Stats {
    fn releases(&self) -> usize {
        self.0.disposes()
    }
    fn live(&self) -> usize {
        self.0.live()
    }
}

/// Prints the report, then checks that the verdict passed and that every
/// requirement passed but those named in `skipped` and `failed`.
fn conforms(report: &Report, skipped: &[&str], failed: &[&str]) {
    println!("{report}");
    report.assert_conforms();
    for finding in &report.findings {
        let id = finding.id.as_str();
        let expect = match (skipped.contains(&id), failed.contains(&id)) {
            (true, _) => Status::Skipped,
            (_, true) => Status::Fail,
            _ => Status::Pass,
        };
        assert_eq!(finding.status, expect, "{}: {:?}", finding.id, finding.detail);
    }
}

#[test]
fn the_scripted_provider_keeps_the_contract() {
    let subject = Subject::new("scripted", || {
        // Honest claims: it reports no usage, so no tokenBudget; its
        // structured answer is the one the kit's schema asks for.
        let provider = ScriptedProvider::builder("scripted")
            .capabilities(Capabilities::ALL.without(Capability::TokenBudget))
            .structured(json!({"answer": "scripted"}))
            .build();
        let probe = Arc::new(Stats(provider.stats().clone()));
        Instance::from(provider).probe(probe)
    });
    let report = subject.check();
    // Its run ids name the parent, not the run (the service promises no
    // uniqueness): an advisory failure, which leaves the verdict alone.
    conforms(&report, &["continuation.remade"], &["run.ids-distinct"]);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["verdict"], "PASS");
}

/// A scripted model for in-process children: answers the kit's prompts
/// after a few words' delay, and reports a structured answer when asked.
fn model() -> Arc<ScriptedModel> {
    let script = json!({"rules": [
        {"when": {"tool_offered": "structured_output", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "structured_output", "arguments": {"answer": "{{last_user_short}}"}}]}},
        {"when": {"last_tool": "structured_output"}, "reply": {"text": "reported"}},
        {"when": {}, "reply": {"text": "an answer to {{last_user_short}}", "delay_ms": 10}}
    ]});
    Arc::new(ScriptedModel::from_json_str(&script.to_string()).unwrap())
}

/// A parent agent over a runtime that keeps transcripts in `dir`: the same
/// id each time, as a restarted process finds it.
fn parent(dir: &PathBuf) -> AgentRef {
    let runtime = Arc::new(AgentRuntime::new(model(), ToolRegistry::new()).with_data_dir(dir));
    Agent::builder(runtime)
        .id("conformance-parent")
        .system_prompt("You are the parent.")
        .build()
        .unwrap()
        .agent_ref()
}

fn in_process(name: &str, make: fn() -> Instance) -> Subject {
    let dir = tempfile::tempdir().unwrap().keep();
    let (for_parent, for_store) = (dir.clone(), dir);
    Subject::new(name, make)
        .parent(move || parent(&for_parent))
        .store(move || Arc::new(JsonlChildStore::new(&for_store)) as Arc<dyn ChildStore>)
}

#[test]
fn spawn_keeps_the_contract() {
    let report = in_process("spawn", || Instance::from(Arc::new(SpawnProvider::new()))).check();
    conforms(&report, &[], &[]);
}

#[test]
fn fork_keeps_the_contract() {
    let report = in_process("fork", || Instance::from(Arc::new(ForkProvider::new()))).check();
    conforms(&report, &[], &[]);
}
