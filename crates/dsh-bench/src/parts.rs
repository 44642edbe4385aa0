//! Where a concurrent delegation's time goes: the same round of calls with
//! less and less of the delegation in it, each against the floor.
//!
//! A delegation's ratio to the floor counts three parties: the harness that
//! makes the call (a task per call, the cloned arguments, a token, the
//! result over a oneshot), the library (the registry, the `subagent` tool,
//! the service, the settlement) and the child (here the scripted one). These
//! rows take the library out, then the child, so that the part each one
//! costs can be read off the table:
//!
//! - **the harness alone**: each call is the harness's task with its cloned
//!   arguments and caller, which answers a fixed result over the oneshot;
//! - **a tool that answers at once**: the harness's call through the real
//!   [`ToolRegistry::call`](dsh_tools::ToolRegistry::call), to a tool whose
//!   future is ready;
//! - **the scripted child alone**: a task per call that starts the bench's
//!   scripted child on the provider directly, takes its result and disposes
//!   of it, answering over a oneshot.
//!
//! The whole delegation is measured in the same rounds, and **the library's
//! own share** is what is left of it once the harness through the registry
//! and the scripted child alone are taken out: both of those hold a task and
//! a oneshot, which the delegation holds once, so the floor is added back
//! once. It guards the library's part alone, which the delegation's row
//! mixes with the harness's and the child's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_subagent_api::{StartRequest, SubagentProvider as _};
use dsh_tools::{CancellationToken, Tool, ToolError, ToolExecution, ToolOutput, ToolResult};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::{Caller, Fixture, Flavor, REPLY, Row, delegate_concurrent, floor_concurrent, median, micros, ratio};

/// The name the tool that answers at once is registered under.
const ANSWERS_AT_ONCE: &str = "answers_at_once";

/// A tool whose call is ready at once with the bench's reply.
struct AnswersAtOnce {
    parameters: Value,
}

impl Tool for AnswersAtOnce {
    fn name(&self) -> &str {
        ANSWERS_AT_ONCE
    }

    fn description(&self) -> &str {
        "Answers at once."
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, _args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(std::future::ready(Ok(ToolOutput::text(REPLY))))
    }
}

/// What one call of a round is made of.
#[derive(Clone, Copy)]
enum Part {
    /// The harness's task, arguments and caller; no registry, no tool.
    Harness,
    /// The harness's call through the registry to [`AnswersAtOnce`].
    ToolAnswersAtOnce,
    /// The scripted child started, read and disposed of on the provider.
    ChildAlone,
}

impl Part {
    const ALL: [Self; 3] = [Self::Harness, Self::ToolAnswersAtOnce, Self::ChildAlone];

    fn figure(self, count: usize) -> String {
        match self {
            Self::Harness => format!("… the harness alone: {count} concurrent calls that answer without a tool"),
            Self::ToolAnswersAtOnce => {
                format!("… the harness through the registry: {count} concurrent calls of a tool that answers at once")
            }
            Self::ChildAlone => {
                format!("… the scripted child alone: {count} concurrent starts, results and disposes on the provider")
            }
        }
    }
}

/// One call of `part`, spawned as its own task, answering over a oneshot.
fn spawn(part: Part, fixture: &Fixture, caller: &Caller) -> oneshot::Receiver<Result<(), String>> {
    let (tx, rx) = oneshot::channel();
    let exec = ToolExecution::new(CancellationToken::new()).with_agent(caller.agent.clone());
    match part {
        Part::Harness => {
            let args = Value::clone(&caller.args);
            drop(tokio::spawn(async move {
                drop((args, exec));
                let result = ToolResult::from_outcome(Ok(ToolOutput::text(REPLY)));
                let _ = tx.send(crate::check(&result));
            }));
        }
        Part::ToolAnswersAtOnce => {
            let call = caller.tools.call(ANSWERS_AT_ONCE, Value::clone(&caller.args), exec);
            drop(tokio::spawn(call.map(move |result| {
                let _ = tx.send(crate::check(&result));
            })));
        }
        Part::ChildAlone => {
            let provider = fixture.provider.clone();
            let request = StartRequest::text(crate::PROMPT, caller.agent.clone(), exec.cancel().clone());
            drop(tokio::spawn(async move {
                let answered = async {
                    let mut run = provider.start(request).await.map_err(|error| error.to_string())?;
                    let result = run.take_result().await.map_err(|error| error.to_string())?;
                    run.dispose().await.map_err(|error| error.to_string())?;
                    if result.text() == REPLY {
                        Ok(())
                    } else {
                        Err(format!("the scripted child answered {:?}", result.text()))
                    }
                };
                let _ = tx.send(answered.await);
            }));
        }
    }
    rx
}

/// One round of `count` concurrent calls of `part`; the time per call.
async fn round(part: Part, fixture: &Fixture, caller: &Caller, count: usize) -> Result<Duration, String> {
    let start = Instant::now();
    let answers: Vec<_> = (0..count).map(|_| spawn(part, fixture, caller)).collect();
    for answer in answers {
        answer.await.map_err(|_| "a bench task died".to_owned())??;
    }
    Ok(start.elapsed() / count as u32)
}

/// The rows of each part at `count` concurrent calls, `rounds` rounds each,
/// interleaved with the floor's and the whole delegation's, each as a ratio
/// to the floor, then the library's own share.
pub(crate) async fn rows(fixture: &Fixture, count: usize, rounds: usize, flavor: Flavor) -> Result<Vec<Row>, String> {
    let _registration = fixture
        .tools
        .register(Arc::new(AnswersAtOnce {
            parameters: json!({"type": "object"}),
        }))
        .map_err(|error| error.to_string())?;
    let caller = fixture.caller();
    let mut floors = Vec::with_capacity(rounds);
    let mut delegations = Vec::with_capacity(rounds);
    let mut parts = Part::ALL.map(|_| Vec::with_capacity(rounds));
    for _ in 0..rounds {
        floors.push(floor_concurrent(count).await);
        for (part, times) in Part::ALL.into_iter().zip(&mut parts) {
            times.push(round(part, fixture, &caller, count).await?);
        }
        delegations.push(delegate_concurrent(&caller, count).await?);
    }
    let floor = micros(median(floors));
    let [_, registry, child] = parts.clone().map(|times| micros(median(times)));
    let mut rows: Vec<Row> = Part::ALL
        .into_iter()
        .zip(parts)
        .map(|(part, times)| {
            let ours = micros(median(times));
            Row {
                figure: part.figure(count),
                flavor: flavor.name(),
                ours: format!("{ours:.2} µs"),
                floor: format!("{floor:.2} µs"),
                ratio: format!("{:.1}×", ratio(ours, floor)),
                target: "(none)".to_owned(),
            }
        })
        .collect();
    rows.push(library_row(
        count,
        flavor,
        micros(median(delegations)),
        registry,
        child,
        floor,
    ));
    Ok(rows)
}

/// The library's own share of a delegation: the whole delegation less the
/// harness through the registry and the scripted child alone, with the
/// floor (a task and a oneshot, which both of those hold) added back once.
fn library_row(count: usize, flavor: Flavor, delegation: f64, registry: f64, child: f64, floor: f64) -> Row {
    let library = delegation - registry - child + floor;
    Row {
        figure: format!(
            "… the library's own share: {count} concurrent delegations less the harness through the registry and the scripted child alone"
        ),
        flavor: flavor.name(),
        ours: format!("{library:.2} µs"),
        floor: format!("{floor:.2} µs"),
        ratio: format!("{:.1}×", ratio(library, floor)),
        target: format!(
            "(none): delegation {delegation:.2} − registry {registry:.2} − child {child:.2} + floor {floor:.2} µs, the same rounds"
        ),
    }
}
