//! End to end: a real parent agent starts four in-process children at
//! once, each answering 2 MB. Every result the parent reads is within the
//! result budget, with its head, its tail and the notice; each answer pages
//! back whole through `task_output`, read from the child's transcript (none
//! of it held in memory); a transcript that is gone reads as no longer kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_agent::{Agent, AgentRuntime, AgentStop};
use dsh_harness::{Background, HarnessBuilder, SubagentToolConfig};
use dsh_llm::{Message, ScriptedModel};
use dsh_subagent_api::ToolFilter;
use dsh_subagent_spawn::SpawnProvider;
use dsh_subagent_testing::budget::{marked_answer, noticed_task_id, read_back};
use dsh_tasks::wording::TASK_OUTPUT;
use dsh_tools::budget::PagedRead;
use dsh_tools::{CancellationToken, ResultLimit, ToolExecution};
use serde_json::{Value, json};

const MARKS: [char; 4] = ['w', 'x', 'y', 'z'];

/// A child's answer of about 2.2 MB: characters of one to four bytes, and
/// its mark at both ends.
fn answer(mark: char) -> String {
    marked_answer(mark, 1_000_000)
}

/// The parent delegates four tasks at once, then answers; each child
/// answers at length with its own mark.
fn script() -> Value {
    let calls: Vec<Value> = MARKS
        .iter()
        .map(|mark| {
            json!({"name": "subagent", "arguments": {"description": format!("part {mark}"), "prompt": format!("Write part {mark} in full.")}})
        })
        .collect();
    // A child's system prompt starts with its parent's: its rules come first.
    let mut rules: Vec<Value> = MARKS
        .iter()
        .map(|mark| {
            json!({"when": {"system_contains": "You are a delegated subagent", "last_user_contains": format!("part {mark}")},
                   "reply": {"text": answer(*mark), "stream_by": "whole"}})
        })
        .collect();
    rules.push(
        json!({"when": {"system_contains": "You are the parent.", "last_message": "user"},
                      "reply": {"tool_calls": calls}}),
    );
    rules.push(
        json!({"when": {"system_contains": "You are the parent.", "last_message": "tool"},
                      "reply": {"text": "All four parts are in."}}),
    );
    json!({ "rules": rules })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_children_answering_two_megabytes_each_are_cut_and_page_back_from_their_transcripts() {
    let harness = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("spawn").tool_filter(ToolFilter::denying(vec!["subagent"])),
            Arc::new(SpawnProvider::new()),
        )
        .background(Background::Tasks)
        .build()
        .unwrap();
    let data_dir = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedModel::from_json_str(&script().to_string()).unwrap());
    let runtime = Arc::new(AgentRuntime::new(model, harness.tools().clone()).with_data_dir(data_dir.path()));
    let parent = Agent::builder(runtime)
        .id("parent")
        .system_prompt("You are the parent.")
        .build()
        .unwrap();
    let outcome = parent.run("Write the four parts.", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed, "{}", outcome.text);

    // What the parent read of each child: within the budget, head and tail
    // kept, the notice naming the task that keeps the rest.
    let results: Vec<String> = parent
        .history()
        .into_iter()
        .filter_map(|message| match message {
            Message::Tool { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4);
    let budget = ResultLimit::DEFAULT.bytes();
    let exec = ToolExecution::new(CancellationToken::new()).with_agent(parent.agent_ref());
    for (mark, result) in MARKS.iter().zip(&results) {
        let full = answer(*mark);
        assert!(result.len() <= budget, "{}", result.len());
        assert!(result.len() > 1000, "{result}");
        assert!(result.starts_with(&format!("<{mark} start>a")));
        assert!(result.ends_with(&format!("<{mark} end>")));
        let task_id = noticed_task_id(result, TASK_OUTPUT);

        // Every page from the start, reassembled: exactly the answer.
        let read = PagedRead::new(TASK_OUTPUT, task_id);
        let read_back = read_back(harness.tools(), &read, &exec, ResultLimit::DEFAULT).await;
        assert!(
            read_back == full,
            "part {mark}: {} of {} bytes",
            read_back.len(),
            full.len()
        );
    }
    // Read back from the children's transcripts: nothing of them is kept in memory.
    assert_eq!(harness.service().texts(&parent.agent_ref()).held(), 0);

    // A transcript that is gone: the answer is no longer kept, and reading
    // it says so without running anything.
    let task_id = noticed_task_id(&results[0], TASK_OUTPUT);
    for transcript in std::fs::read_dir(data_dir.path().join("agents")).unwrap() {
        let path = transcript.unwrap().path();
        if std::fs::read_to_string(&path).unwrap().contains("<w end>") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let gone = harness
        .tools()
        .call(TASK_OUTPUT, json!({"task_id": task_id}), exec)
        .await;
    assert!(!gone.is_error);
    assert_eq!(
        gone.text,
        format!(
            "(the output of task {task_id}, {} characters, is no longer kept. Reading it does not run the task again; its status follows.)\n[status: completed]",
            answer('w').chars().count()
        )
    );
}
