//! A provider written from scratch: `subagent` over a tiny agent loop of the
//! harness's own, with no model and no fixture of this workspace, assembled
//! with the harness builder.
//!
//! The "agent" counts: asked `count to N`, it says one number per step. Each
//! step costs one token of a fixed budget, so a long count stops at the
//! token limit; `wait` idles until cancelled. The example builds the
//! harness, then checks a success, a stop reason, a cancellation, a count in
//! the background collected with `task_output`, and that every child was
//! released exactly once. Any broken promise fails it.
//!
//! ```text
//! cargo run --example custom_provider -p dsh-harness
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_harness::provider::{
    BoxFuture, Capabilities, ContentBlock, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentResult,
    SubagentRun, concat_text,
};
use dsh_harness::{
    AgentRef, Background, CancellationToken, Harness, HarnessBuilder, SubagentToolConfig, ToolExecution,
};
use dsh_tool_subagent::ErrorCode;
use serde_json::json;
use tokio::sync::{Notify, oneshot};

/// Tokens one child may spend: a count past this stops at the limit.
const BUDGET: usize = 5;

/// The author's own agent loop: one step per number, one token per step.
async fn counting_loop(prompt: String, cancel: CancellationToken, started: Arc<Notify>) -> SubagentResult {
    started.notify_one();
    let target = match prompt.strip_prefix("count to ").map(str::parse::<usize>) {
        Some(Ok(target)) => target,
        _ if prompt == "wait" => {
            cancel.cancelled().await;
            return SubagentResult::new(StopReason::Aborted, Vec::new());
        }
        _ => {
            return SubagentResult::new(StopReason::Error, Vec::new())
                .with_diagnostic(format!("cannot do {prompt:?}: only `count to N` and `wait`"));
        }
    };
    let mut said = Vec::new();
    for number in 1..=target {
        if said.len() == BUDGET {
            return stopped(StopReason::MaxTokens, &said).with_diagnostic(format!("budget of {BUDGET} tokens spent"));
        }
        tokio::select! {
            () = cancel.cancelled() => {
                return stopped(StopReason::Aborted, &said);
            }
            () = tokio::time::sleep(Duration::from_millis(1)) => said.push(number.to_string()),
        }
    }
    SubagentResult::completed(said.join(" "))
}

/// A run that ended early, keeping what the child had said so far.
fn stopped(reason: StopReason, said: &[String]) -> SubagentResult {
    SubagentResult::new(reason, vec![ContentBlock::text(said.join(" "))])
}

/// The provider: each child is one task running [`counting_loop`].
#[derive(Default)]
struct CountingProvider {
    starts: AtomicUsize,
    disposes: Arc<AtomicUsize>,
    started: Arc<Notify>,
}

impl SubagentProvider for CountingProvider {
    fn name(&self) -> &str {
        "counter"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        Box::pin(async move {
            if request.cancel.is_cancelled() {
                return Err(SubagentError::aborted("counter start cancelled before publication"));
            }
            let number = self.starts.fetch_add(1, Ordering::SeqCst) + 1;
            let id = format!("counter-{number}:{}", request.parent.id());

            // The child's own token: the request's, so the parent's cancel reaches it.
            let cancel = request.cancel.clone();
            let (settled, result) = oneshot::channel();
            let child = tokio::spawn({
                let cancel = cancel.clone();
                let started = self.started.clone();
                let prompt = concat_text(&request.prompt);
                async move {
                    let _ = settled.send(counting_loop(prompt, cancel, started).await);
                }
            });

            let disposes = self.disposes.clone();
            Ok(SubagentRun::new(
                id,
                async move {
                    result
                        .await
                        .map_err(|_| SubagentError::failed("counter child vanished"))
                },
                move || async move {
                    // Stop what remains and wait until nothing of the child runs.
                    cancel.cancel();
                    let joined = child.await;
                    disposes.fetch_add(1, Ordering::SeqCst);
                    joined.map_err(|error| SubagentError::failed(format!("counter child failed: {error}")))
                },
            ))
        })
    }
}

fn caller(cancel: CancellationToken) -> ToolExecution {
    ToolExecution::new(cancel).with_agent(AgentRef::new("parent-1"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let provider = Arc::new(CountingProvider::default());
    // One `subagent` tool over the counter; background runs become tasks,
    // collected with the task tools the builder mounts beside it.
    let harness = HarnessBuilder::new()
        .subagent(
            SubagentToolConfig::new("counter").enable_run_in_background(true),
            provider.clone(),
        )
        .background(Background::Tasks)
        .build()?;
    success(&harness).await;
    max_tokens(&harness).await;
    cancellation(&harness, &provider).await;
    background(&harness).await;

    // Every child was released exactly once, and only once it had settled.
    assert_eq!(provider.starts.load(Ordering::SeqCst), 4);
    assert_eq!(provider.disposes.load(Ordering::SeqCst), 4);
    println!("released     → 4 of 4 children, once each");
    Ok(())
}

/// Success: the child's final text is the tool's result.
async fn success(harness: &Harness) {
    let ok = harness
        .tools()
        .call(
            "subagent",
            json!({"description": "count", "prompt": "count to 3"}),
            caller(CancellationToken::new()),
        )
        .await;
    assert!(!ok.is_error, "{}", ok.text);
    assert_eq!(ok.text, "1 2 3");
    println!("success      → {}", ok.text);
}

/// A stop reason: the budget runs out; partial output is an error, never a success.
async fn max_tokens(harness: &Harness) {
    let long = harness
        .tools()
        .call(
            "subagent",
            json!({"description": "count", "prompt": "count to 9"}),
            caller(CancellationToken::new()),
        )
        .await;
    assert!(long.is_error);
    assert_eq!(
        long.text,
        "Error: subagent run hit its token limit before finishing\nDiagnostic: budget of 5 tokens spent\nPartial output before the run ended:\n1 2 3 4 5"
    );
    assert!(long.error.as_ref().is_some_and(|e| e.has_code(ErrorCode::RunMaxTokens)));
    println!("max tokens   → {}", long.text.replace('\n', " | "));
}

/// Cancellation: the caller gives up while the child works.
async fn cancellation(harness: &Harness, provider: &CountingProvider) {
    let cancel = CancellationToken::new();
    let call = harness.tools().call(
        "subagent",
        json!({"description": "idle", "prompt": "wait"}),
        caller(cancel.clone()),
    );
    let stopper = async {
        provider.started.notified().await;
        cancel.cancel();
    };
    let (cancelled, ()) = tokio::join!(call, stopper);
    assert!(cancelled.is_error);
    assert_eq!(cancelled.text, "Error: subagent run was cancelled");
    println!("cancellation → {}", cancelled.text);
}

/// In the background: the call returns a task id at once, the task
/// settles the child, and its owner is told before its next model call.
/// Every call reserves the next id when it starts (the three calls before
/// kept theirs unused), so ids follow the order of the calls.
async fn background(harness: &Harness) {
    let tools = harness.tools();
    let started = tools
        .call(
            "subagent",
            json!({"description": "count", "prompt": "count to 2", "run_in_background": true}),
            caller(CancellationToken::new()),
        )
        .await;
    assert_eq!(started.text, "started background subagent task subagent-4");
    let output = tools
        .call(
            "task_output",
            json!({"task_id": "subagent-4", "wait": true}),
            caller(CancellationToken::new()),
        )
        .await;
    assert_eq!(output.text, "1 2\n[status: completed]");
    assert_eq!(
        harness.notices().take(&"parent-1".into()),
        [
            "background task subagent-4 (subagent: count) finished [status: completed]. Read its output with task_output."
        ]
    );
    println!("background   → {}", output.text.replace('\n', " | "));
}
