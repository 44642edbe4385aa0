//! Task ids: counted per owner and per kind, reserved ahead in call order,
//! and given back to a task restored after a crash.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroU64;

use dsh_tasks::{Recorded, TaskError, TaskId, TaskOutcome, TaskRegistry, TaskSpec, TaskStatus};
use dsh_tools::AgentId;

fn agent(name: &str) -> AgentId {
    AgentId::from(name)
}

fn id(text: &str) -> TaskId {
    text.parse().unwrap()
}

fn ids(tasks: &TaskRegistry, owner: &AgentId) -> Vec<String> {
    tasks.list(owner).into_iter().map(|task| task.id).collect()
}

fn until_killed(tasks: &TaskRegistry, spec: TaskSpec) -> String {
    tasks
        .spawn(spec, |control| async move {
            control.token().cancelled().await;
            TaskOutcome::Killed
        })
        .unwrap()
}

#[tokio::test]
async fn each_owner_counts_its_own_ids_per_kind() {
    let tasks = TaskRegistry::new();
    let (parent, other) = (agent("parent"), agent("other"));
    let mine = until_killed(&tasks, TaskSpec::new("subagent", "mine", parent.clone()));
    // Another agent's tasks in between take none of the parent's numbers.
    let theirs = until_killed(&tasks, TaskSpec::new("subagent", "theirs", other.clone()));
    let next = until_killed(&tasks, TaskSpec::new("subagent", "next", parent.clone()));
    let kept = tasks.record(
        TaskSpec::new("mcp", "kept", parent.clone()),
        Recorded::Completed("x".into()),
    );
    assert_eq!([mine.as_str(), next.as_str()], ["subagent-1", "subagent-2"]);
    assert_eq!(kept.unwrap().id, "mcp-1");
    assert_eq!(theirs, "subagent-1");
    // Each reads its own `subagent-1`.
    assert_eq!(tasks.get("subagent-1", &parent).unwrap().label, "mine");
    assert_eq!(tasks.get("subagent-1", &other).unwrap().label, "theirs");
    // An id only another agent's task has reads as unknown, its code
    // telling the harness.
    let foreign = tasks.get("subagent-2", &other).unwrap_err();
    assert_eq!(
        foreign,
        TaskError::Foreign {
            id: "subagent-2".into()
        }
    );
    assert_eq!(
        foreign.to_string(),
        TaskError::Unknown {
            id: "subagent-2".into()
        }
        .to_string()
    );
    assert!(matches!(
        tasks.get("subagent-3", &other),
        Err(TaskError::Unknown { .. })
    ));
    // Once the other agent reserved its own `subagent-2`, that number is
    // its own: issued, never used, it reads as forgotten.
    drop(tasks.reserve(&other, "subagent").unwrap());
    assert!(matches!(
        tasks.get("subagent-2", &other),
        Err(TaskError::Forgotten { .. })
    ));
    tasks.dispose_owner(&parent, "test over").await;
    tasks.dispose_owner(&other, "test over").await;
}

#[tokio::test]
async fn reserved_ids_keep_the_order_of_their_reservations_whatever_order_tasks_come_in() {
    let tasks = TaskRegistry::new();
    let parent = agent("parent");
    let first = tasks.reserve(&parent, "subagent").unwrap();
    let second = tasks.reserve(&parent, "subagent").unwrap();
    let third = tasks.reserve(&parent, "subagent").unwrap();
    assert_eq!(
        [first.id(), second.id(), third.id()].map(ToString::to_string),
        ["subagent-1", "subagent-2", "subagent-3"]
    );
    assert_eq!(first.owner(), &parent);
    // The third is used first, the second never: a gap, nothing else.
    let late = tasks
        .record(TaskSpec::reserved(third, "third"), Recorded::Completed("3".into()))
        .unwrap();
    drop(second);
    let early = tasks
        .spawn(TaskSpec::reserved(first, "first"), |_| async {
            TaskOutcome::Completed { output: "1".into() }
        })
        .unwrap();
    assert_eq!((early.as_str(), late.id.as_str()), ("subagent-1", "subagent-3"));
    tasks.wait(&early, &parent, None).await.unwrap();
    // Listed in the order the ids were reserved, not the order tasks came.
    assert_eq!(ids(&tasks, &parent), ["subagent-1", "subagent-3"]);
    let unreserved = until_killed(&tasks, TaskSpec::new("subagent", "next", parent.clone()));
    assert_eq!(unreserved, "subagent-4");
    tasks.dispose_owner(&parent, "test over").await;
}

#[tokio::test]
async fn a_disposed_owner_reserves_nothing() {
    let tasks = TaskRegistry::new();
    let parent = agent("parent");
    let reserved = tasks.reserve(&parent, "subagent").unwrap();
    tasks.dispose_owner(&parent, "gone").await;
    let refused = tasks.reserve(&parent, "subagent").unwrap_err();
    assert_eq!(refused.code(), "OWNER_DISPOSED");
    // Nor does a reservation made before the disposal start anything.
    let late = tasks.record(TaskSpec::reserved(reserved, "late"), Recorded::Completed("x".into()));
    assert_eq!(late.unwrap_err().code(), "OWNER_DISPOSED");
}

#[tokio::test]
async fn a_task_restored_under_its_id_moves_its_owners_count_past_it() {
    let tasks = TaskRegistry::new();
    let parent = agent("parent");
    // A running task whose producer is given again.
    let running = until_killed(
        &tasks,
        TaskSpec::new("subagent", "resumed", parent.clone()).with_id(id("subagent-4")),
    );
    assert_eq!(running, "subagent-4");
    // A finished one whose notice no model call took, and one whose was.
    let unheard = tasks
        .record_with_notice(
            TaskSpec::new("subagent", "unheard", parent.clone()).with_id(id("subagent-2")),
            Recorded::Completed("two".into()),
        )
        .unwrap();
    let heard = tasks
        .record(
            TaskSpec::new("ignored kind", "heard", parent.clone()).with_id(id("mcp-7")),
            Recorded::Failed {
                detail: "broke".into(),
                output: "it broke".into(),
            },
        )
        .unwrap();
    assert_eq!(
        (unheard.id.as_str(), unheard.status),
        ("subagent-2", TaskStatus::Completed)
    );
    assert_eq!((heard.id.as_str(), heard.kind.as_str()), ("mcp-7", "mcp"));
    insta::assert_snapshot!(
        tasks.take_notices(&parent).join("\n"),
        @"background task subagent-2 (subagent: unheard) finished [status: completed]. Read its output with task_output."
    );
    // Later ids follow the highest given; a lower one never taken reads
    // as issued.
    let next = until_killed(&tasks, TaskSpec::new("subagent", "next", parent.clone()));
    assert_eq!(next, "subagent-5");
    assert_eq!(tasks.reserve(&parent, "mcp").unwrap().id().to_string(), "mcp-8");
    assert!(matches!(
        tasks.get("subagent-1", &parent),
        Err(TaskError::Forgotten { .. })
    ));
    // An id a kept task has is refused, and nothing starts.
    let mut ran = false;
    let taken = tasks
        .spawn(
            TaskSpec::new("subagent", "again", parent.clone()).with_id(id("subagent-4")),
            |_| {
                ran = true;
                async { TaskOutcome::Killed }
            },
        )
        .unwrap_err();
    assert!(!ran);
    assert_eq!(taken.code(), "TASK_ID_TAKEN");
    insta::assert_snapshot!(taken, @r#"task id "subagent-4" is taken: a task of the same owner already has it"#);
    // Another owner's count is its own.
    let other = agent("other");
    assert_eq!(
        tasks.reserve(&other, "subagent").unwrap().id().to_string(),
        "subagent-1"
    );
    tasks.dispose_owner(&parent, "test over").await;
}

#[test]
fn an_id_reads_only_as_the_registry_writes_it() {
    let read = id("sub-agent-12");
    assert_eq!((read.kind(), read.number().get()), ("sub-agent", 12));
    assert_eq!(TaskId::new("mcp", NonZeroU64::MIN).to_string(), "mcp-1");
    for bad in [
        "subagent-0",
        "subagent-01",
        "subagent-+1",
        "subagent-",
        "subagent",
        "-1",
        "subagent-1.5",
    ] {
        let error = bad.parse::<TaskId>();
        assert_eq!(error, Err(TaskError::InvalidId { id: bad.to_owned() }), "{bad}");
    }
    let error = "subagent-0".parse::<TaskId>().unwrap_err();
    assert_eq!(error.code(), "INVALID_TASK_ID");
    insta::assert_snapshot!(
        error,
        @r#"invalid task id "subagent-0": expected <kind>-<n>, a kind, a dash and a whole number from 1 without leading zeros (as in subagent-1)"#
    );
}
