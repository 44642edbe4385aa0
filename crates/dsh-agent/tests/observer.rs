//! What an observer hears of a run: text as it streams, tool calls as they
//! start and end, in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use dsh_agent::{Agent, AgentObserver, AgentRuntime, AgentStop, Priced};
use dsh_llm::{Price, ScriptedModel, ToolCall, Usage};
use dsh_tools::{AgentId, CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry, ToolResult};
use futures::future::BoxFuture;
use serde_json::{Value, json};

#[derive(Default)]
/// The events in order, and the cost each step reported.
struct Recorder(Mutex<Vec<String>>, Mutex<Vec<Priced>>);

impl Recorder {
    fn push(&self, event: String) {
        self.0.lock().unwrap().push(event);
    }
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

impl AgentObserver for Recorder {
    fn text_delta(&self, _agent: &AgentId, delta: &str) {
        self.push(format!("delta {delta:?}"));
    }
    fn step_finished(&self, _agent: &AgentId, steps: u32, _usage: Option<Usage>, cost: Priced) {
        self.push(format!("step {steps}"));
        self.1.lock().unwrap().push(cost);
    }
    fn tool_call_started(&self, _agent: &AgentId, call: &ToolCall) {
        self.push(format!("start {} {} {}", call.id, call.name, call.arguments));
    }
    fn tool_call_finished(&self, _agent: &AgentId, call: &ToolCall, result: &ToolResult) {
        self.push(format!("end {} error={} {}", call.id, result.is_error, result.text));
    }
}

struct Echo(Value);

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echo."
    }
    fn parameters(&self) -> &Value {
        &self.0
    }
    fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            match args["say"].as_str() {
                Some(say) => Ok(ToolOutput::text(say.to_owned())),
                None => Err(ToolError::new("echo needs `say`")),
            }
        })
    }
}

fn agent(script: Value, recorder: Arc<Recorder>) -> Agent {
    agent_priced(script, recorder, None)
}

/// An agent of the scripted model, at `price` when one is given.
fn agent_priced(script: Value, recorder: Arc<Recorder>, price: Option<Price>) -> Agent {
    let tools = ToolRegistry::new();
    std::mem::forget(
        tools
            .register(Arc::new(Echo(
                json!({"type": "object", "properties": {"say": {"type": "string"}}}),
            )))
            .unwrap(),
    );
    let model = ScriptedModel::from_json_str(&script.to_string()).unwrap();
    let mut runtime = AgentRuntime::new(Arc::new(model), tools).with_observer(recorder);
    if let Some(price) = price {
        runtime = runtime.with_price("scripted", price);
    }
    Agent::builder(Arc::new(runtime)).build().unwrap()
}

#[tokio::test]
async fn deltas_stream_before_the_step_ends_and_every_tool_call_starts_before_it_ends() {
    let recorder = Arc::new(Recorder::default());
    let script = json!({"rules": [
        {"when": {"last_message": "user"}, "reply": {"text": "Let me check.", "tool_calls": [
            {"name": "echo", "arguments": {"say": "hi"}},
            {"name": "echo", "arguments": {}}
        ]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "All done."}}
    ]});
    let agent = agent(script, recorder.clone());
    let outcome = agent.run("go", &CancellationToken::new()).await;
    assert_eq!(outcome.stop, AgentStop::Completed);
    let events = recorder.events();
    // The two calls run concurrently: their events interleave freely, but
    // each starts before it ends, and both sit between the two model calls.
    let calls = [
        (r#"start call_1_0 echo {"say":"hi"}"#, "end call_1_0 error=false hi"),
        (
            "start call_1_1 echo {}",
            "end call_1_1 error=true Error: echo needs `say`",
        ),
    ];
    let at = |wanted: &str| events.iter().position(|event| event == wanted).unwrap();
    for (start, end) in calls {
        assert!(
            at("step 1") < at(start) && at(start) < at(end) && at(end) < at("delta \"All \""),
            "{events:?}"
        );
    }
    let rest: Vec<&str> = events
        .iter()
        .map(String::as_str)
        .filter(|event| !event.starts_with("start ") && !event.starts_with("end "))
        .collect();
    assert_eq!(
        rest,
        [
            "delta \"Let \"",
            "delta \"me \"",
            "delta \"check.\"",
            "step 1",
            "delta \"All \"",
            "delta \"done.\"",
            "step 2",
        ]
    );
}

#[tokio::test]
async fn text_streamed_before_a_cancellation_was_reported() {
    let recorder = Arc::new(Recorder::default());
    let script = json!({"rules": [
        {"when": {}, "reply": {"text": "one two three four five six", "delay_ms": 40}}
    ]});
    let agent = agent(script, recorder.clone());
    let cancel = CancellationToken::new();
    let run = agent.run("go", &cancel);
    let stop = async {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        cancel.cancel();
    };
    let (outcome, ()) = tokio::join!(run, stop);
    assert_eq!(outcome.stop, AgentStop::Cancelled);
    let events = recorder.events();
    assert!(events.iter().any(|event| event == "delta \"one \""), "{events:?}");
    assert!(
        !events.iter().any(|event| event.starts_with("delta \"six")),
        "{events:?}"
    );
    // The run's end is its outcome (above); the cancelled model call never
    // finished a step.
    assert!(!events.iter().any(|event| event.starts_with("step ")), "{events:?}");
}

/// Each step reports what the run's calls cost so far where the model has
/// a price, rising with every call; without a price, that it is unknown.
#[tokio::test]
async fn each_step_reports_the_runs_cost_so_far_where_a_price_is_known() {
    let script = json!({"rules": [
        {"when": {"last_message": "user"}, "reply": {"text": "Let me check.", "tool_calls": [
            {"name": "echo", "arguments": {"say": "hi"}}
        ]}},
        {"when": {"last_message": "tool"}, "reply": {"text": "All done."}}
    ]});
    let recorder = Arc::new(Recorder::default());
    let price = Price::new(1_000_000.0, 1_000_000.0).unwrap();
    let priced = agent_priced(script.clone(), recorder.clone(), Some(price));
    assert_eq!(priced.info().model, "scripted");
    priced.run("go", &CancellationToken::new()).await;
    let costs: Vec<u64> = recorder
        .1
        .lock()
        .unwrap()
        .iter()
        .map(|cost| cost.known().unwrap().nanos())
        .collect();
    assert_eq!(costs.len(), 2, "{costs:?}");
    assert!(0 < costs[0] && costs[0] < costs[1], "{costs:?}");
    let usage = priced.usage();
    assert_eq!(usage.own_cost.known().unwrap().nanos(), costs[1]);

    let recorder = Arc::new(Recorder::default());
    agent(script, recorder.clone())
        .run("go", &CancellationToken::new())
        .await;
    assert_eq!(*recorder.1.lock().unwrap(), [Priced::Unknown, Priced::Unknown]);
}
