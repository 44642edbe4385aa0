//! The span tree of one delegation, pinned: `invoke_agent` → `execute_tool
//! subagent` → `invoke_agent` (child) → `chat`, with the GenAI attributes and
//! the lifecycle events, for a foreground success, a failed child, a
//! cancelled child and a background child continued by `send_message`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dsh_agent::JsonlChildStore;
use dsh_agent::{Agent, AgentRuntime};
use dsh_e2e::Harness;
use dsh_harness::{Background, HarnessBuilder, SubagentToolConfig};
use dsh_llm::ScriptedModel;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tools::{CancellationToken, ToolExecution};
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One captured span: its fields, parent, links and events.
#[derive(Default)]
struct Node {
    fields: BTreeMap<String, String>,
    parent: Option<usize>,
    follows: Vec<usize>,
    events: Vec<BTreeMap<String, String>>,
}

/// Records the `dsh::gen_ai` spans and events.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Node>>>);

struct Index(usize);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != "dsh::gen_ai" {
            return;
        }
        let span = ctx.span(id).unwrap();
        let parent = span
            .scope()
            .skip(1)
            .find_map(|ancestor| ancestor.extensions().get::<Index>().map(|index| index.0));
        let mut node = Node {
            parent,
            ..Node::default()
        };
        attrs.record(&mut Fields(&mut node.fields));
        let mut nodes = self.0.lock().unwrap();
        span.extensions_mut().insert(Index(nodes.len()));
        nodes.push(node);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        if let Some(index) = span.extensions().get::<Index>() {
            values.record(&mut Fields(&mut self.0.lock().unwrap()[index.0].fields));
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        let (Some(span), Some(origin)) = (ctx.span(id), ctx.span(follows)) else {
            return;
        };
        if let (Some(index), Some(origin)) = (span.extensions().get::<Index>(), origin.extensions().get::<Index>()) {
            self.0.lock().unwrap()[index.0].follows.push(origin.0);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "dsh::gen_ai" {
            return;
        }
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let owner = ctx
            .event_scope(event)
            .and_then(|mut scope| scope.find_map(|span| span.extensions().get::<Index>().map(|index| index.0)));
        let mut nodes = self.0.lock().unwrap();
        match owner {
            Some(index) => nodes[index].events.push(fields),
            None => {
                // An event outside any captured span still shows, as a root line.
                fields.insert("otel.name".to_owned(), "(event outside a span)".to_owned());
                nodes.push(Node {
                    events: vec![fields],
                    ..Node::default()
                });
            }
        }
    }
}

fn is_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

impl Capture {
    /// The spans as an indented tree; random ids become `<child-N>`.
    fn render(&self) -> String {
        let nodes = self.0.lock().unwrap();
        let mut ids = HashMap::new();
        let mut name = |value: &str| -> String {
            if !is_uuid(value) {
                return value.to_owned();
            }
            let next = ids.len() + 1;
            ids.entry(value.to_owned())
                .or_insert_with(|| format!("<child-{next}>"))
                .clone()
        };
        fn line(out: &mut String, nodes: &[Node], at: usize, depth: usize, name: &mut dyn FnMut(&str) -> String) {
            let node = &nodes[at];
            let indent = "  ".repeat(depth);
            let _ = write!(
                out,
                "{indent}{}",
                node.fields.get("otel.name").map_or("?", String::as_str)
            );
            for origin in &node.follows {
                let _ = write!(out, " (follows from {})", nodes[*origin].fields["otel.name"]);
            }
            out.push('\n');
            for (key, value) in &node.fields {
                if key != "otel.name" {
                    let _ = writeln!(out, "{indent}    {key} = {}", name(value));
                }
            }
            for event in &node.events {
                let rest: Vec<String> = event
                    .iter()
                    .filter(|(key, _)| *key != "message" && *key != "otel.name")
                    .map(|(key, value)| format!("{key}={}", name(value)))
                    .collect();
                let _ = writeln!(out, "{indent}    · {} {}", event["message"], rest.join(" "));
            }
            for (child, _) in nodes.iter().enumerate().filter(|(_, n)| n.parent == Some(at)) {
                line(out, nodes, child, depth + 1, name);
            }
        }
        let mut out = String::new();
        for (root, _) in nodes.iter().enumerate().filter(|(_, node)| node.parent.is_none()) {
            line(&mut out, &nodes, root, 0, &mut name);
        }
        out
    }
}

/// Runs `work` on a current-thread runtime with only the capture installed.
fn captured<F: std::future::Future<Output = ()>>(work: impl FnOnce() -> F) -> String {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work());
    });
    capture.render()
}

fn parent_script(child: Value) -> Value {
    json!({"rules": [
        child,
        {"when": {"system_contains": "You are the parent.", "last_message": "user"},
         "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "find the code", "prompt": "Find the code word."}}]}},
        {"when": {"system_contains": "You are the parent.", "last_message": "tool"},
         "reply": {"text": "Parent: {{last_tool_result}}"}}
    ]})
}

#[test]
fn a_foreground_delegation_that_succeeds() {
    let tree = captured(|| async {
        let harness = Harness::new(parent_script(json!({
            "when": {"system_contains": "You are a delegated subagent"},
            "reply": {"text": "The code word is swordfish."}
        })));
        let outcome = harness
            .parent()
            .run("What is the code word?", &CancellationToken::new())
            .await;
        assert_eq!(outcome.text, "Parent: The code word is swordfish.");
    });
    insta::assert_snapshot!(tree);
}

#[test]
fn a_foreground_delegation_whose_child_fails() {
    let tree = captured(|| async {
        let harness = Harness::new(parent_script(json!({
            "when": {"system_contains": "You are a delegated subagent"},
            "reply": {"error": "the model is down"}
        })));
        harness
            .parent()
            .run("What is the code word?", &CancellationToken::new())
            .await;
    });
    insta::assert_snapshot!(tree);
}

#[test]
fn a_foreground_delegation_whose_child_is_cancelled() {
    let tree = captured(|| async {
        let harness = Harness::new(parent_script(json!({
            "when": {"system_contains": "You are a delegated subagent"},
            "reply": {"text": "never finished", "delay_ms": 60000}
        })));
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stop.cancel();
        });
        harness.parent().run("What is the code word?", &cancel).await;
    });
    insta::assert_snapshot!(tree);
}

#[test]
fn a_background_child_then_a_continuation() {
    let tree = captured(|| async {
        let data = tempfile::tempdir().unwrap();
        let config = SubagentToolConfig::new("spawn").enable_run_in_background(true);
        let harness = HarnessBuilder::new()
            .subagent(config, Arc::new(SpawnProvider::new()))
            .background(Background::Continuable(Arc::new(JsonlChildStore::new(data.path()))))
            .build()
            .unwrap();
        let tools = harness.tools();
        let model = ScriptedModel::from_json_str(
            &json!({"rules": [
                {"when": {"system_contains": "You are a delegated subagent"}, "reply": {"text": "child answer to {{last_user}}"}},
                {"when": {"system_contains": "You are the parent.", "last_message": "user"},
                 "reply": {"tool_calls": [{"name": "subagent", "arguments": {"description": "research", "prompt": "look", "run_in_background": true}}]}},
                {"when": {}, "reply": {"text": "{{last_tool_result}}"}}
            ]})
            .to_string(),
        )
        .unwrap();
        let runtime = Arc::new(AgentRuntime::new(Arc::new(model), tools.clone()).with_data_dir(data.path()));
        let parent = Agent::builder(runtime)
            .id("parent")
            .label(Some("parent".to_owned()))
            .system_prompt("You are the parent.")
            .build()
            .unwrap();
        let started = parent.run("Start the research.", &CancellationToken::new()).await.text;
        // "started subagent <child> as task <task>"
        let words: Vec<&str> = started.split_whitespace().collect();
        let (child, task) = (words[2].to_owned(), words[5].to_owned());
        let call = |tool: &'static str, args: Value| {
            let exec = ToolExecution::new(CancellationToken::new())
                .with_agent(parent.agent_ref())
                .with_call_id(format!("call-{tool}"));
            tools.call(tool, args, exec)
        };
        let first = call("task_output", json!({"task_id": task, "wait": true})).await;
        assert!(!first.is_error, "{}", first.text);
        let sent = call("send_message", json!({"subagent_id": child, "message": "go on"}))
            .await
            .text;
        // "message started task <task> continuing subagent <child>"
        let second = sent.split_whitespace().nth(3).unwrap().to_owned();
        let second = call("task_output", json!({"task_id": second, "wait": true})).await;
        assert!(!second.is_error, "{}", second.text);
    });
    insta::assert_snapshot!(tree);
}

/// The harness's model, as a server that reports no usage in its streams
/// (llama-cpp-python's): the loop's estimate takes its place.
struct ReportsNoUsage(Arc<dsh_e2e::Recording>);

impl dsh_llm::ChatModel for ReportsNoUsage {
    fn model_name(&self) -> &str {
        dsh_llm::ChatModel::model_name(self.0.as_ref())
    }

    fn stream_chat(&self, request: dsh_llm::ChatRequest, cancel: CancellationToken) -> dsh_llm::ChatStream {
        use futures::StreamExt;
        Box::pin(
            self.0
                .stream_chat(request, cancel)
                .filter(|event| std::future::ready(!matches!(event, Ok(dsh_llm::ChatEvent::Usage(_))))),
        )
    }
}

/// Usage the server did not report is the loop's estimate, recorded as the
/// conventions' ints and marked `dsh.usage.estimated = true` on every
/// `chat` and `invoke_agent` span; a reported usage carries no mark (the
/// trees pinned above have none).
#[test]
fn usage_the_server_did_not_report_is_estimated_and_marked() {
    let tree = captured(|| async {
        let harness = Harness::new(parent_script(json!({
            "when": {"system_contains": "You are a delegated subagent"},
            "reply": {"text": "The code word is swordfish."}
        })));
        let model = Arc::new(ReportsNoUsage(harness.model.clone()));
        let runtime = Arc::new(AgentRuntime::new(model, harness.tools.clone()).with_data_dir(harness.data_dir.path()));
        let parent = Agent::builder(runtime)
            .id("parent")
            .system_prompt("You are the parent.")
            .build()
            .unwrap();
        let outcome = parent.run("What is the code word?", &CancellationToken::new()).await;
        assert_eq!(outcome.text, "Parent: The code word is swordfish.");
        assert!(outcome.usage.is_some_and(|usage| usage.is_estimated()));
    });
    // Two runs (parent, child) and three model calls, each marked.
    assert_eq!(tree.matches("dsh.usage.estimated = true").count(), 5, "{tree}");
    for key in ["gen_ai.usage.input_tokens = ", "gen_ai.usage.output_tokens = "] {
        let counts: Vec<u64> = tree
            .lines()
            .filter_map(|line| line.trim().strip_prefix(key))
            .map(|count| count.parse().unwrap())
            .collect();
        assert_eq!(counts.len(), 5, "{key}: {tree}");
        assert!(counts.iter().all(|count| *count > 0), "{key}: {tree}");
    }
}
