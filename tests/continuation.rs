//! End to end: continuable background children through the `subagent` tool
//! and `send_message` over the spawn provider — restart, crash, race.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use dsh_agent::JsonlChildStore;
use dsh_agent::transcript::{TranscriptEntry, read_transcript, transcript_path};
use dsh_agent::{Agent, AgentRuntime};
use dsh_harness::{Background, Harness, HarnessBuilder, SubagentToolConfig};
use dsh_llm::{Message, ScriptedModel};
use dsh_subagent::SubagentControl;
use dsh_subagent_api::{AgentId, ChildStore};
use dsh_subagent_fork::ForkProvider;
use dsh_subagent_spawn::SpawnProvider;
use dsh_tasks::{TaskRegistry, TaskStatus};
use dsh_tools::{AgentRef, CancellationToken, ToolExecution, ToolRegistry, ToolResult};
use serde_json::{Value, json};

/// One process: providers, tasks, the control service and the tools, over a data directory.
struct World {
    tools: ToolRegistry,
    tasks: TaskRegistry,
    control: SubagentControl,
    /// The control service's durable child store.
    store: Arc<dyn ChildStore>,
    runtime: Arc<AgentRuntime>,
    _harness: Harness,
}

impl World {
    fn open(data_dir: &Path) -> Self {
        let script = json!({"rules": [
            {"when": {"system_contains": "You are a delegated subagent"},
             "reply": {"text": "answer to {{last_user}} after {{assistant_turns}} earlier answers", "delay_ms": 1}},
            {"when": {}, "reply": {"text": "parent"}}
        ]});
        let store: Arc<dyn ChildStore> = Arc::new(JsonlChildStore::new(data_dir));
        let config = SubagentToolConfig::new("spawn").enable_run_in_background(true);
        let harness = HarnessBuilder::new()
            .subagent(config, Arc::new(SpawnProvider::new()))
            .provider(Arc::new(ForkProvider::new()))
            .background(Background::Continuable(store.clone()))
            .build()
            .unwrap();
        let tools = harness.tools().clone();
        let model = ScriptedModel::from_json_str(&script.to_string()).unwrap();
        let runtime = Arc::new(AgentRuntime::new(Arc::new(model), tools.clone()).with_data_dir(data_dir));
        Self {
            tools,
            tasks: harness.tasks().clone(),
            control: harness.control().unwrap().clone(),
            store,
            runtime,
            _harness: harness,
        }
    }

    fn parent(&self) -> AgentRef {
        self.parent_with_turns(dsh_agent::DEFAULT_MAX_TURNS)
    }

    fn parent_with_turns(&self, max_turns: u32) -> AgentRef {
        Agent::builder(self.runtime.clone())
            .id("parent")
            .system_prompt("You are the parent.")
            .max_turns(max_turns)
            .build()
            .unwrap()
            .agent_ref()
    }

    async fn call(&self, me: &AgentRef, tool: &str, args: Value) -> ToolResult {
        let exec = ToolExecution::new(CancellationToken::new()).with_agent(me.clone());
        self.tools.call(tool, args, exec).await
    }

    /// Starts a continuable child in the background; returns (child id, task id).
    async fn start(&self, me: &AgentRef, prompt: &str) -> (String, String) {
        let args = json!({"description": "research", "prompt": prompt, "run_in_background": true});
        let text = self.call(me, "subagent", args).await.text;
        let rest = text.strip_prefix("started subagent ").expect(&text);
        let (child, task) = rest.split_once(" as task ").unwrap();
        (child.to_owned(), task.to_owned())
    }

    async fn output(&self, me: &AgentRef, task: &str) -> String {
        self.call(me, "task_output", json!({"task_id": task, "wait": true}))
            .await
            .text
    }

    async fn send(&self, me: &AgentRef, child: &str, message: &str) -> ToolResult {
        self.call(me, "send_message", json!({"subagent_id": child, "message": message}))
            .await
    }
}

#[tokio::test]
async fn a_parent_whose_runtime_persists_nothing_is_refused_before_any_task() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let model =
        ScriptedModel::from_json_str(&json!({"rules": [{"when": {}, "reply": {"text": "x"}}]}).to_string()).unwrap();
    let runtime = Arc::new(AgentRuntime::new(Arc::new(model), world.tools.clone()));
    let me = Agent::builder(runtime).id("parent").build().unwrap().agent_ref();
    let args = json!({"description": "research", "prompt": "p", "run_in_background": true});
    let refused = world.call(&me, "subagent", args).await;
    assert_eq!(
        refused.text,
        "Error: continuable subagents require session persistence (give the agent runtime a data directory)"
    );
    assert_eq!(refused.error.unwrap().code(), Some("PERSISTENCE_UNAVAILABLE"));
    assert!(world.tasks.list(me.id()).is_empty(), "no task exists");
}

fn started_task(result: &ToolResult, child: &str) -> String {
    assert!(!result.is_error, "{}", result.text);
    let rest = result.text.strip_prefix("message started task ").expect(&result.text);
    rest.strip_suffix(&format!(" continuing subagent {child}"))
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_child_continues_after_a_restart_over_the_same_data_directory() {
    let data = tempfile::tempdir().unwrap();
    let child = {
        let world = World::open(data.path());
        let me = world.parent();
        let (child, task) = world.start(&me, "first").await;
        assert_eq!(
            world.output(&me, &task).await,
            "answer to first after 0 earlier answers\n[status: completed]"
        );
        child
    }; // Every service, registry and agent of the first process is gone.

    let world = World::open(data.path());
    let me = world.parent();
    let task = started_task(&world.send(&me, &child, "second").await, &child);
    assert_eq!(task, "subagent-1", "a new process numbers its own tasks");
    assert_eq!(
        world.output(&me, &task).await,
        "answer to second after 1 earlier answers\n[status: completed]"
    );
    let transcript = read_transcript(&transcript_path(data.path(), &AgentId::new(child.as_str()))).unwrap();
    let headers = transcript
        .entries
        .iter()
        .filter(|e| matches!(e, TranscriptEntry::Header { .. }))
        .count();
    let descriptors: Vec<&Value> = transcript
        .entries
        .iter()
        .filter_map(|e| match e {
            TranscriptEntry::Descriptor { descriptor } => Some(descriptor),
            _ => None,
        })
        .collect();
    assert_eq!(headers, 1, "a resume appends to the same transcript");
    assert_eq!(
        descriptors,
        [&json!({"version": 1, "provider": "spawn", "label": "research"})]
    );
    assert!(
        matches!(transcript.entries[1], TranscriptEntry::Descriptor { .. }),
        "before the first turn"
    );
}

#[tokio::test]
async fn a_torn_transcript_still_lists_and_resumes_with_a_diagnostic() {
    let data = tempfile::tempdir().unwrap();
    // A crash during the next run: its prompt was written, then a line tore.
    let torn = r#"{"type":"message","message":{"role":"assistant","content":"half"#;
    let (child, path) = crashed_after_first_answer(data.path(), torn).await;

    let world = World::open(data.path());
    let me = world.parent();
    let listed = world.store.children_of(me.id()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, child);
    let diagnostic = listed[0].diagnostic.clone().unwrap();
    assert!(diagnostic.contains("torn line"), "{diagnostic}");
    assert!(listed[0].descriptor.is_some());

    let task = started_task(&world.send(&me, &child, "second").await, &child);
    assert_eq!(
        world.output(&me, &task).await,
        "answer to second after 1 earlier answers\n[status: completed]",
        "the first turn is intact; the interrupted one goes on with the message"
    );
    let repaired = read_transcript(&path).unwrap();
    assert_eq!(repaired.diagnostic, None, "the torn bytes were cut off, not glued onto");
    let repair = repaired
        .entries
        .iter()
        .find_map(|e| match e {
            TranscriptEntry::Repair { diagnostic, torn } => Some((diagnostic.clone(), torn.clone())),
            _ => None,
        })
        .expect("the repair is recorded");
    assert_eq!(repair.1, torn, "the torn bytes are kept, not silently dropped");
    assert!(repair.0.contains("torn line"));
    let history: Vec<String> = repaired
        .committed_messages()
        .iter()
        .map(|m| match m {
            Message::User { content } => format!("user: {content}"),
            Message::Assistant { content, .. } => format!("assistant: {content}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        history,
        [
            "user: first",
            "assistant: answer to first after 0 earlier answers",
            "user: interrupted",
            "user: second",
            "assistant: answer to second after 1 earlier answers",
        ]
    );
    // A third activation reads the repaired file cleanly.
    let task = started_task(&world.send(&me, &child, "third").await, &child);
    assert_eq!(
        world.output(&me, &task).await,
        "answer to third after 2 earlier answers\n[status: completed]"
    );
}

#[tokio::test]
async fn a_run_interrupted_between_two_lines_goes_on_with_the_next_message() {
    let data = tempfile::tempdir().unwrap();
    // A crash after a complete line: no torn bytes, but no turn end either.
    let (child, path) = crashed_after_first_answer(data.path(), "").await;
    let world = World::open(data.path());
    let me = world.parent();

    for (n, message) in ["second", "third"].into_iter().enumerate() {
        let task = started_task(&world.send(&me, &child, message).await, &child);
        assert_eq!(
            world.output(&me, &task).await,
            format!(
                "answer to {message} after {} earlier answers\n[status: completed]",
                n + 1
            )
        );
    }
    let transcript = read_transcript(&path).unwrap();
    let users = user_prompts(&transcript.committed_messages());
    assert_eq!(
        users,
        ["first", "interrupted", "second", "third"],
        "the interrupted prompt stays in the history: the next message joins its turn"
    );
    assert!(
        !transcript
            .entries
            .iter()
            .any(|e| matches!(e, TranscriptEntry::Repair { .. })),
        "nothing was torn, so nothing was repaired"
    );
}

#[tokio::test]
async fn a_fork_child_keeps_its_inherited_turns_across_activations_and_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let world = World::open(data.path());
    let parent = Agent::builder(world.runtime.clone())
        .id("parent")
        .system_prompt("You are the parent.")
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    parent.run("Remember: the secret is 42.", &cancel).await;
    let me = parent.agent_ref();
    let mut request = dsh_subagent_api::StartRequest::text("What is the secret?", me.clone(), cancel.clone());
    request.label = Some("recall".into());
    let started = world
        .control
        .start_continuable("fork", "recall".into(), request)
        .unwrap();
    // The inherited turns: the parent's prompt and its answer.
    assert_eq!(
        world.output(&me, &started.task_id).await,
        "answer to What is the secret? after 1 earlier answers\n[status: completed]"
    );
    let restarted = World::open(data.path());
    let task = started_task(
        &restarted.send(&me, &started.child_id, "And again?").await,
        &started.child_id,
    );
    assert_eq!(
        restarted.output(&me, &task).await,
        "answer to And again? after 2 earlier answers\n[status: completed]"
    );
    let transcript = read_transcript(&transcript_path(data.path(), &AgentId::new(started.child_id.as_str()))).unwrap();
    let users = user_prompts(&transcript.messages());
    assert_eq!(
        users,
        ["Remember: the secret is 42.", "What is the secret?", "And again?"]
    );
    let descriptor = transcript.entries.iter().find_map(|entry| match entry {
        TranscriptEntry::Descriptor { descriptor } => Some(descriptor.clone()),
        _ => None,
    });
    assert_eq!(
        descriptor,
        Some(json!({"version": 1, "provider": "fork", "label": "recall"}))
    );
}

/// A child that answered "first" in a process that then crashed during its
/// next run: that run's prompt and then `tail` were written to the child's
/// transcript, and nothing more. Returns the child and its transcript path.
async fn crashed_after_first_answer(data: &Path, tail: &str) -> (String, std::path::PathBuf) {
    let world = World::open(data);
    let me = world.parent();
    let (child, task) = world.start(&me, "first").await;
    world.output(&me, &task).await;
    let path = transcript_path(data, &AgentId::new(child.as_str()));
    let interrupted = serde_json::to_string(&TranscriptEntry::message(Message::user("interrupted"))).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(format!("{interrupted}\n{tail}").as_bytes());
    std::fs::write(&path, bytes).unwrap();
    (child, path)
}

/// The user messages among `messages`, in order.
fn user_prompts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| matches!(m, Message::User { .. }))
        .map(|m| m.content().to_owned())
        .collect()
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[derive(Debug)]
enum Fate {
    Steered(String),
    Started(String),
    Refused(String),
}

/// Sends, settlements and kills race; afterwards every message must be
/// exactly one of: steered into a running task (recorded exactly once, and
/// answered before that turn ended if the task completed), started as a task
/// (and, if that task completed, recorded exactly once and answered), or
/// refused with "not delivered" (and never recorded). None is lost, none
/// duplicated.
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
async fn race(iterations: usize) {
    let data = tempfile::tempdir().unwrap();
    let world = Arc::new(World::open(data.path()));
    // Every task's fate is read back at the end: keep them all, however many
    // finish (the registry forgets all but an owner's most recent by default).
    let _ = world.tasks.clone().keep_finished(std::num::NonZeroUsize::MAX);
    // Children take their parent's turn limit; steering keeps turns going.
    let me = world.parent_with_turns(100_000);
    let mut children = Vec::new();
    for i in 0..3 {
        children.push(world.start(&me, &format!("seed-{i}")).await.0);
    }
    let senders = 3;
    let mut handles = Vec::new();
    for sender in 0..senders {
        let world = world.clone();
        let me = me.clone();
        let children = children.clone();
        handles.push(tokio::spawn(async move {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (sender as u64 + 1));
            let mut fates = Vec::new();
            for n in 0..iterations / senders {
                let child = &children[rng.below(children.len() as u64) as usize];
                let message = format!("m-{sender}-{n}");
                let result = world.send(&me, child, &message).await;
                let fate = if result.is_error {
                    assert!(
                        result.text.ends_with(
                            "the message was not delivered — retry after it settles to start the next activation"
                        ) || result.text.ends_with("the message was not delivered"),
                        "{}",
                        result.text
                    );
                    Fate::Refused(result.text)
                } else {
                    let (task, fate) = match result.text.strip_prefix("message delivered to running task ") {
                        Some(task) => (task.to_owned(), Fate::Steered(task.to_owned())),
                        None => {
                            let task = started_task(&result, child);
                            (task.clone(), Fate::Started(task))
                        }
                    };
                    // A task carries every message steered into it: kill few.
                    if rng.below(30) == 0 {
                        let _ = world.tasks.kill(&task, me.id(), None);
                    }
                    fate
                };
                fates.push((child.clone(), message, fate));
                // Mostly back to back (messages join running turns), sometimes
                // long enough for a turn to end (the next one starts a task).
                match rng.below(5) {
                    0 => tokio::task::yield_now().await,
                    1 => tokio::time::sleep(std::time::Duration::from_micros(rng.below(800))).await,
                    2 | 3 => tokio::time::sleep(std::time::Duration::from_micros(rng.below(20_000))).await,
                    _ => {}
                }
            }
            fates
        }));
    }
    let mut fates = Vec::new();
    for handle in handles {
        fates.extend(handle.await.unwrap());
    }
    // Let every activation settle.
    for task in world.tasks.list(me.id()) {
        world.tasks.wait(&task.id, me.id(), None).await.unwrap();
    }
    let mut recorded: HashMap<(String, String), usize> = HashMap::new();
    // Steered messages a completed turn ended without answering (must stay empty).
    let mut unanswered: Vec<String> = Vec::new();
    let mut transcripts = HashMap::new();
    for child in &children {
        let transcript = read_transcript(&transcript_path(data.path(), &AgentId::new(child.as_str()))).unwrap();
        transcripts.insert(child.clone(), transcript.clone());
        assert_eq!(transcript.diagnostic, None);
        // Activations never overlapped: each answer saw every earlier answer.
        let mut answers = 0;
        for entry in &transcript.entries {
            if let TranscriptEntry::Message {
                message: Message::Assistant { content, .. },
                ..
            } = entry
            {
                let seen: usize = content
                    .rsplit(" after ")
                    .next()
                    .and_then(|rest| rest.strip_suffix(" earlier answers"))
                    .and_then(|n| n.parse().ok())
                    .expect(content);
                assert_eq!(
                    seen, answers,
                    "an activation of {child} missed earlier turns: {content}"
                );
                answers += 1;
            }
        }
        for entry in &transcript.entries {
            if let TranscriptEntry::Message {
                message: Message::User { content },
                ..
            } = entry
            {
                *recorded.entry((child.clone(), content.clone())).or_default() += 1;
            }
        }
    }
    let (mut started, mut refused, mut completed, mut steered, mut steered_completed) = (0, 0, 0, 0, 0);
    for (child, message, fate) in &fates {
        let count = recorded.remove(&(child.clone(), message.clone())).unwrap_or(0);
        match fate {
            Fate::Steered(task) => {
                steered += 1;
                assert_eq!(count, 1, "steered {message} into {task} was recorded {count} times");
                let status = world.tasks.get(task, me.id()).unwrap().status;
                match status {
                    TaskStatus::Completed => {
                        steered_completed += 1;
                        if !answered_in_its_turn(&transcripts[child], message) {
                            unanswered.push(message.clone());
                        }
                    }
                    TaskStatus::Killed => {}
                    status => panic!("{message}: task {task} ended {status}"),
                }
            }
            Fate::Refused(text) => {
                refused += 1;
                assert_eq!(count, 0, "refused {message} was recorded: {text}");
            }
            Fate::Started(task) => {
                started += 1;
                let snapshot = world.tasks.get(task, me.id()).unwrap();
                match snapshot.status {
                    TaskStatus::Completed => {
                        completed += 1;
                        assert_eq!(count, 1, "{message} completed in {task} but was recorded {count} times");
                        // Its answer, or one to a message steered in after it.
                        let output = snapshot.output.read().await.unwrap();
                        assert!(output.starts_with("answer to m-"), "{snapshot:?}: {output}");
                        if !answered_in_its_turn(&transcripts[child], message) {
                            unanswered.push(message.clone());
                        }
                    }
                    TaskStatus::Killed => assert!(count <= 1, "{message} recorded {count} times"),
                    status => panic!("{message}: task {task} ended {status}: {:?}", snapshot.detail),
                }
            }
        }
    }
    // Nothing was recorded that was not sent (besides each child's first prompt).
    recorded.retain(|(_, content), _| !content.starts_with("seed-"));
    assert!(recorded.is_empty(), "recorded but never sent: {recorded:?}");
    assert!(
        unanswered.is_empty(),
        "completed turns ended before answering: {unanswered:?}"
    );
    assert_eq!(steered + started + refused, fates.len());
    eprintln!(
        "{} messages: {steered} steered ({steered_completed} completed, {} killed), {started} started ({completed} completed, {} killed), {refused} refused",
        fates.len(),
        steered - steered_completed,
        started - completed
    );
    assert!(
        completed > 0 && refused > 0 && steered_completed > 0,
        "the race exercised every route: {steered} steered, {completed} completed, {refused} refused"
    );
}

/// Whether the child answered `message` before the turn it joined ended.
fn answered_in_its_turn(transcript: &dsh_agent::transcript::Transcript, message: &str) -> bool {
    let entries = &transcript.entries;
    let Some(at) = entries.iter().position(
        |entry| matches!(entry, TranscriptEntry::Message { message: Message::User { content }, .. } if content == message),
    ) else {
        return false;
    };
    entries[at + 1..]
        .iter()
        .take_while(|entry| !matches!(entry, TranscriptEntry::TurnEnd { .. }))
        .any(|entry| {
            matches!(
                entry,
                TranscriptEntry::Message {
                    message: Message::Assistant { .. },
                    ..
                }
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_sends_settles_and_kills_never_lose_or_duplicate_a_message() {
    race(600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: cargo test -p dsh-e2e --release --test continuation -- --ignored"]
async fn racing_sends_settles_and_kills_at_scale() {
    race(5_000).await;
}
