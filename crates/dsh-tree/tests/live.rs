//! A tree built from the service's live events: children appear, wait,
//! run and end, under the agent that started them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_subagent::{Limits, SubagentEvent, SubagentService};
use dsh_subagent_api::{AgentRef, CancellationToken, ChildCount, StartRequest, StopReason};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tree::{Cost, Ending, LiveTree, Tokens};

fn follow(service: &SubagentService, tree: &Arc<LiveTree>) -> dsh_subagent::Subscription {
    let tree = tree.clone();
    service.subscribe(Arc::new(move |event: &SubagentEvent| {
        tree.event(event);
        Ok(())
    }))
}

fn request(parent: &AgentRef, label: &str) -> StartRequest {
    let mut request = StartRequest::text("task", parent.clone(), CancellationToken::new());
    request.label = Some(label.to_owned());
    request
}

#[tokio::test]
async fn children_appear_wait_run_and_end_under_their_parent() {
    let service = SubagentService::with_limits(Limits::none().with_max_concurrent(ChildCount::MIN));
    let _local = service
        .register_provider(ScriptedProvider::builder("local").build())
        .unwrap();
    let _failing = service
        .register_provider(
            ScriptedProvider::builder("failing")
                .stop_reason(StopReason::Error)
                .diagnostic("boom")
                .build(),
        )
        .unwrap();
    let tree = Arc::new(LiveTree::new("parent", Some("dsh run".into()), Some("m".into())));
    let _subscription = follow(&service, &tree);
    let lineage = service.open_tree();
    let parent = AgentRef::new("parent").with_lineage(lineage.lineage());

    // The one slot is held until the first child's result is taken: the
    // second waits in the queue meanwhile.
    let mut first = service.start("local", request(&parent, "first")).await.unwrap();
    let second = tokio::spawn({
        let (service, request) = (service.clone(), request(&parent, "second"));
        async move {
            let mut run = service.start("failing", request).await.unwrap();
            run.result().await.unwrap();
            run.dispose().await.unwrap();
        }
    });
    let queued = async {
        loop {
            let snapshot = tree.snapshot();
            if snapshot.root.children.len() == 2 {
                return snapshot;
            }
            tokio::task::yield_now().await;
        }
    };
    let snapshot = tokio::time::timeout(std::time::Duration::from_secs(10), queued)
        .await
        .unwrap();
    assert_eq!(snapshot.root.children[1].ending(), Some(&Ending::Queued));
    assert_eq!(snapshot.root.children[1].label.as_deref(), Some("second"));
    tree.model_call(
        "scripted-subagent:local:parent",
        1,
        Some(Tokens::reported(10, 2)),
        Some(Cost::from_nanos(500_000_000)),
    );
    first.result().await.unwrap();
    first.dispose().await.unwrap();
    second.await.unwrap();
    tree.root_ended("completed");

    let snapshot = tree.snapshot();
    let root = &snapshot.root;
    assert_eq!(root.ending(), Some(&Ending::Completed));
    let children: Vec<(&str, Option<&Ending>)> = root
        .children
        .iter()
        .map(|child| (child.name(), child.ending()))
        .collect();
    assert_eq!(
        children,
        [
            ("first", Some(&Ending::Completed)),
            (
                "second",
                Some(&Ending::Stopped {
                    reason: "error".into(),
                    detail: Some("boom".into())
                })
            ),
        ]
    );
    let second = &root.children[1];
    assert!(second.turns[0].queued_ms.is_some(), "it waited");
    assert_eq!(second.provider.as_deref(), Some("failing"));
    assert_eq!(root.children[0].tokens, Some(Tokens::reported(10, 2)));
    assert_eq!(root.subtree_tokens, Some(Tokens::reported(10, 2)));
    assert_eq!(root.children[0].cost, Some(Cost::from_nanos(500_000_000)));
    // The second child spent nothing, so the subtree's cost is known.
    assert_eq!(root.subtree_cost, Some(Cost::from_nanos(500_000_000)));
}

#[tokio::test]
async fn an_acp_childs_announced_sessions_appear_under_it_and_end() {
    let service = SubagentService::new();
    let _remote = service
        .register_provider(ScriptedProvider::builder("remote").build())
        .unwrap();
    let tree = Arc::new(LiveTree::new("parent", None, None));
    let _subscription = follow(&service, &tree);
    let mut run = service
        .start("remote", request(&AgentRef::new("parent"), "ask it"))
        .await
        .unwrap();
    let child = run.id().to_owned();
    tree.announced(&child, "s-a", None, Some("reader".into()), Some("read it".into()));
    tree.announced(&child, "s-a1", Some("s-a"), Some("helper".into()), None);
    tree.announced_ended(&child, "s-a1", "cancelled");
    let snapshot = tree.snapshot();
    let acp = &snapshot.root.children[0];
    let reader = &acp.children[0];
    assert_eq!((reader.id.as_str(), reader.depth), ("s-a", 2));
    assert_eq!(reader.task.as_deref(), Some("read it"));
    assert_eq!(reader.ending(), Some(&Ending::Running));
    assert_eq!(reader.children[0].label.as_deref(), Some("helper"));
    assert_eq!(reader.children[0].ending(), Some(&Ending::from_stop("cancelled")));
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["root"]["children"][0]["children"][0]["task"], "read it");
    assert!(json["root"].get("task").is_none(), "only a subagent session has a task");
    run.result().await.unwrap();
    run.dispose().await.unwrap();
}
