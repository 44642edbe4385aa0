//! The registry's bound: running tasks are always kept, each owner keeps
//! only its most recently finished ones, and a forgotten id reads "no
//! longer kept", not unknown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;

use dsh_tasks::{DEFAULT_KEEP_FINISHED, TaskError, TaskOutcome, TaskRegistry, TaskSpec, TaskStatus, wording};
use dsh_tools::AgentId;

fn agent(name: &str) -> AgentId {
    AgentId::from(name)
}

fn keep(count: usize) -> NonZeroUsize {
    NonZeroUsize::new(count).unwrap()
}

/// Starts a task of `owner` that completes with `output`, and waits for it.
async fn finished(tasks: &TaskRegistry, owner: &AgentId, output: &str) -> String {
    let output = output.to_owned();
    let id = tasks
        .spawn(TaskSpec::new("subagent", "quick", owner.clone()), |_| async move {
            TaskOutcome::Completed { output: output.into() }
        })
        .unwrap();
    tasks.wait(&id, owner, None).await.unwrap();
    id
}

/// Starts a task of `owner` that runs until killed.
fn running(tasks: &TaskRegistry, owner: &AgentId) -> String {
    tasks
        .spawn(TaskSpec::new("subagent", "slow", owner.clone()), |control| async move {
            control.token().cancelled().await;
            TaskOutcome::Killed
        })
        .unwrap()
}

fn ids(tasks: &TaskRegistry, owner: &AgentId) -> Vec<String> {
    tasks.list(owner).into_iter().map(|task| task.id).collect()
}

#[tokio::test]
async fn the_default_bound_is_documented_and_configurable() {
    assert_eq!(TaskRegistry::new().kept_finished(), DEFAULT_KEEP_FINISHED);
    assert_eq!(DEFAULT_KEEP_FINISHED.get(), 100);
    assert_eq!(TaskRegistry::new().keep_finished(keep(7)).kept_finished().get(), 7);
}

#[tokio::test]
async fn the_task_that_finished_longest_ago_is_forgotten_and_reads_no_longer_kept() {
    let tasks = TaskRegistry::new().keep_finished(keep(2));
    let owner = agent("parent");
    let first = finished(&tasks, &owner, "one").await;
    let second = finished(&tasks, &owner, "two").await;
    assert_eq!(ids(&tasks, &owner), [first.as_str(), second.as_str()]);
    let third = finished(&tasks, &owner, "three").await;
    assert_eq!(ids(&tasks, &owner), [second.as_str(), third.as_str()]);

    let forgotten = tasks.get(&first, &owner).unwrap_err();
    assert_eq!(
        forgotten,
        TaskError::Forgotten {
            id: first.clone(),
            kept: 2
        }
    );
    assert_eq!(forgotten.code(), "FORGOTTEN_TASK");
    insta::assert_snapshot!(
        forgotten,
        @r#"task "subagent-1" has finished and is no longer kept: each agent keeps only its 2 most recently finished tasks; task_list shows your tasks"#
    );
    assert_eq!(tasks.kill(&first, &owner, None).unwrap_err(), forgotten);
    assert_eq!(tasks.wait(&first, &owner, None).await.unwrap_err(), forgotten);
    assert_eq!(
        tasks.get(&second, &owner).unwrap().output.kept().unwrap().as_str(),
        "two"
    );
}

#[tokio::test]
async fn only_ids_as_issued_read_forgotten_and_every_other_id_is_unknown() {
    let tasks = TaskRegistry::new().keep_finished(keep(1));
    let owner = agent("parent");
    for _ in 0..3 {
        finished(&tasks, &owner, "done").await;
    }
    let stranger = agent("stranger");
    for id in ["subagent-1", "subagent-2"] {
        assert!(
            matches!(tasks.get(id, &owner), Err(TaskError::Forgotten { .. })),
            "{id}"
        );
        // Ids are each owner's own: another agent never issued these, so
        // they read as unknown to it; it learns nothing, not even that the
        // number was issued.
        assert_eq!(
            tasks.get(id, &stranger).unwrap_err(),
            TaskError::Unknown { id: id.to_owned() },
            "{id}"
        );
    }
    assert!(matches!(
        tasks.get("subagent-3", &stranger),
        Err(TaskError::Foreign { .. })
    ));
    for id in [
        "subagent-4",
        "subagent-0",
        "subagent-01",
        "subagent-+1",
        "subagent- 1",
        "subagent-",
        "subagent",
        "shell-1",
        "-1",
        "sub-agent-1",
        "subagent-18446744073709551616",
    ] {
        assert_eq!(
            tasks.get(id, &owner).unwrap_err(),
            TaskError::Unknown { id: id.to_owned() },
            "{id}"
        );
    }
}

#[tokio::test]
async fn a_kind_with_a_dash_in_it_counts_its_own_ids() {
    let tasks = TaskRegistry::new().keep_finished(keep(1));
    let owner = agent("parent");
    for _ in 0..2 {
        let id = tasks
            .spawn(TaskSpec::new("sub-agent", "quick", owner.clone()), |_| async {
                TaskOutcome::Killed
            })
            .unwrap();
        tasks.wait(&id, &owner, None).await.unwrap();
    }
    assert!(matches!(
        tasks.get("sub-agent-1", &owner),
        Err(TaskError::Forgotten { .. })
    ));
    assert_eq!(tasks.get("sub-agent-2", &owner).unwrap().status, TaskStatus::Killed);
    assert!(matches!(
        tasks.get("sub-agent-3", &owner),
        Err(TaskError::Unknown { .. })
    ));
    assert!(matches!(tasks.get("agent-1", &owner), Err(TaskError::Unknown { .. })));
}

#[tokio::test]
async fn running_tasks_are_always_kept_and_each_owner_has_its_own_bound() {
    let tasks = TaskRegistry::new().keep_finished(keep(1));
    let owner = agent("parent");
    let other = agent("other");
    let slow = running(&tasks, &owner);
    let theirs = finished(&tasks, &other, "theirs").await;
    for _ in 0..5 {
        finished(&tasks, &owner, "mine").await;
    }
    let listed = tasks.list(&owner);
    assert_eq!(listed.len(), 2, "the running task and the last finished one");
    assert_eq!(listed[0].id, slow);
    assert_eq!(listed[0].status, TaskStatus::Running);
    // Ids count per owner: the other agent's task took none of these.
    assert_eq!(listed[1].id, "subagent-6");
    assert_eq!(
        tasks.get(&theirs, &other).unwrap().output.kept().unwrap().as_str(),
        "theirs"
    );

    tasks.kill(&slow, &owner, None).unwrap();
    tasks.wait(&slow, &owner, None).await.unwrap();
    // Finishing last, it is now the one kept.
    assert_eq!(ids(&tasks, &owner), [slow.as_str()]);
    assert!(matches!(
        tasks.get("subagent-6", &owner),
        Err(TaskError::Forgotten { .. })
    ));
}

#[tokio::test]
async fn a_notice_never_taken_goes_with_its_forgotten_task() {
    let tasks = TaskRegistry::new().keep_finished(keep(2));
    let owner = agent("parent");
    for _ in 0..5 {
        finished(&tasks, &owner, "done").await;
    }
    let notices = tasks.take_notices(&owner);
    assert_eq!(notices.len(), 2);
    assert!(notices[0].starts_with("background task subagent-4 "), "{notices:?}");
    assert!(notices[1].starts_with("background task subagent-5 "), "{notices:?}");

    // Taken notices are gone; forgetting their tasks later removes nothing else.
    finished(&tasks, &owner, "done").await;
    assert_eq!(tasks.take_notices(&owner).len(), 1);
}

#[tokio::test]
async fn lowering_the_bound_forgets_at_once() {
    let tasks = TaskRegistry::new();
    let owner = agent("parent");
    for _ in 0..4 {
        finished(&tasks, &owner, "done").await;
    }
    let tasks = tasks.keep_finished(keep(1));
    assert_eq!(ids(&tasks, &owner), ["subagent-4"]);
    assert_eq!(tasks.take_notices(&owner).len(), 1);
    assert!(format!("{tasks:?}").contains("tasks: 1"), "{tasks:?}");
}

#[tokio::test]
async fn a_listing_shows_every_running_task_and_the_most_recently_finished() {
    let tasks = TaskRegistry::new();
    let owner = agent("parent");
    finished(&tasks, &owner, "done").await; // subagent-1
    let slow = running(&tasks, &owner); // subagent-2
    for _ in 0..3 {
        finished(&tasks, &owner, "done").await; // subagent-3 to -5
    }
    let listing = tasks.listing(&owner, 2);
    let shown: Vec<_> = listing.tasks.iter().map(|task| task.id.as_str()).collect();
    assert_eq!(shown, ["subagent-2", "subagent-4", "subagent-5"]);
    assert_eq!(listing.older_finished, 2);
    insta::assert_snapshot!(wording::task_list(&listing), @r"
    subagent-2 [status: running] (subagent: slow)
    subagent-4 [status: completed] (subagent: quick)
    subagent-5 [status: completed] (subagent: quick)
    (2 older finished tasks not shown; task_output reads any of them by id)
    ");
    let listing = tasks.listing(&owner, 3);
    assert_eq!(listing.older_finished, 1);
    insta::assert_snapshot!(
        wording::older_finished_line(listing.older_finished),
        @"(1 older finished task not shown; task_output reads it by its id)"
    );
    assert_eq!(tasks.listing(&owner, 4).older_finished, 0);
    assert_eq!(tasks.listing(&agent("nobody"), 20).tasks.len(), 0);
    tasks.dispose_owner(&owner, "test over").await;
    assert_eq!(tasks.get(&slow, &owner).unwrap().status, TaskStatus::Killed);
}

/// The bookkeeping of one owner that starts 6,000 tasks stays at the bound:
/// what is kept, the notices pending, and what a listing holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_thousand_tasks_of_one_owner_keep_the_bound() {
    let tasks = TaskRegistry::new();
    let owner = agent("session");
    let mut last = String::new();
    for n in 0..6_000 {
        last = tasks
            .spawn(TaskSpec::new("subagent", "bulk", owner.clone()), move |_| async move {
                TaskOutcome::Completed {
                    output: format!("answer {n}").into(),
                }
            })
            .unwrap();
    }
    // Settled in any order; wait for every one still kept.
    for task in tasks.list(&owner) {
        let _ = tasks.wait(&task.id, &owner, None).await;
    }
    while tasks.list(&owner).iter().any(|task| task.status == TaskStatus::Running) {
        tokio::task::yield_now().await;
    }
    assert_eq!(last, "subagent-6000");
    assert_eq!(tasks.list(&owner).len(), 100);
    let listing = tasks.listing(&owner, 20);
    assert_eq!((listing.tasks.len(), listing.older_finished), (20, 80));
    assert!(wording::task_list(&listing).len() < 2_048);
    assert_eq!(tasks.take_notices(&owner).len(), 100);
    assert!(format!("{tasks:?}").contains("tasks: 100"), "{tasks:?}");
}
