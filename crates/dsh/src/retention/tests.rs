#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use dsh_subagent::{SubagentEvent, SubagentService};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, SubagentRun};
use dsh_subagent_testing::scripted::ScriptedProvider;
use dsh_tools::AgentId;

use super::*;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Writes the transcript of `id` with `bytes` bytes, last written `age` ago.
fn transcript(data_dir: &Path, id: &str, bytes: usize, age: Duration) {
    let path = data_dir.join("agents").join(format!("{id}.jsonl"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, vec![b'x'; bytes]).unwrap();
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

/// The transcripts left, sorted by id.
fn left(data_dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(data_dir.join("agents"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

fn policy(max_age: Option<Duration>, max_size: Option<u64>) -> DataPolicy {
    DataPolicy { max_age, max_size }
}

#[test]
fn transcripts_past_max_age_go_unless_held() {
    let dir = tempfile::tempdir().unwrap();
    transcript(dir.path(), "old", 10, 40 * DAY);
    transcript(dir.path(), "held", 10, 40 * DAY);
    transcript(dir.path(), "recent", 10, 2 * DAY);
    std::fs::write(dir.path().join("agents/notes.txt"), "not a transcript").unwrap();
    let swept = sweep(dir.path(), policy(Some(30 * DAY), None), SystemTime::now(), |id| {
        id == "held"
    })
    .unwrap();
    assert_eq!(swept, Swept { files: 1, bytes: 10 });
    assert_eq!(left(dir.path()), ["held.jsonl", "notes.txt", "recent.jsonl"]);
}

#[test]
fn past_max_size_the_least_recently_written_go_first_and_nothing_in_use() {
    let dir = tempfile::tempdir().unwrap();
    transcript(dir.path(), "a", 100, 5 * DAY);
    transcript(dir.path(), "b", 100, 4 * DAY);
    transcript(dir.path(), "c", 100, 3 * DAY);
    transcript(dir.path(), "d", 100, 2 * DAY);
    // Written a minute ago: in use by some dsh, never removed.
    transcript(dir.path(), "now", 300, Duration::from_secs(60));
    let swept = sweep(dir.path(), policy(None, Some(550)), SystemTime::now(), |_| false).unwrap();
    // 700 bytes: a and b go (500 left), the in-use one stays.
    assert_eq!(swept, Swept { files: 2, bytes: 200 });
    assert_eq!(left(dir.path()), ["c.jsonl", "d.jsonl", "now.jsonl"]);
    // Past the bound by what is in use alone, nothing more can go.
    let swept = sweep(dir.path(), policy(None, Some(100)), SystemTime::now(), |id| id != "now").unwrap();
    assert_eq!(swept, Swept::default());
}

#[test]
fn a_policy_turned_off_and_a_directory_not_there_remove_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        sweep(dir.path(), DataPolicy::default(), SystemTime::now(), |_| false).unwrap(),
        Swept::default()
    );
    transcript(dir.path(), "ancient", 10, 4000 * DAY);
    let swept = sweep(dir.path(), policy(None, None), SystemTime::now(), |_| false).unwrap();
    assert_eq!(swept, Swept::default());
    assert_eq!(left(dir.path()), ["ancient.jsonl"]);
}

/// A service whose run events `retention` hears, with a scripted provider.
fn service(retention: &Arc<Retention>) -> (SubagentService, impl Drop, impl Drop) {
    let service = SubagentService::new();
    let registration = service
        .register_provider(ScriptedProvider::builder("spawn").build())
        .unwrap();
    let heard = retention.clone();
    let subscription = service.subscribe(Arc::new(move |event: &SubagentEvent| {
        heard.child_event(event);
        Ok(())
    }));
    (service, registration, subscription)
}

/// Starts a child of `parent` and writes its transcript, old enough for
/// any bound.
async fn child(service: &SubagentService, data_dir: &Path, parent: &str) -> SubagentRun {
    let request = StartRequest::text("task", AgentRef::new(parent), CancellationToken::new());
    let run = service.start("spawn", request).await.unwrap();
    transcript(data_dir, run.id(), 10, 40 * DAY);
    run
}

async fn end(mut run: SubagentRun) -> String {
    run.result().await.unwrap();
    run.dispose().await.unwrap();
    run.id().to_owned()
}

#[tokio::test]
async fn a_running_child_and_a_held_session_are_kept_until_they_end() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Arc::new(Retention::new(dir.path().to_owned(), policy(Some(30 * DAY), None)));
    let (service, _registration, _subscription) = service(&retention);
    transcript(dir.path(), "session", 10, 40 * DAY);
    let hold = retention.hold(&AgentId::new("session"));
    let running = child(&service, dir.path(), "session").await;
    retention.sweep().await;
    assert_eq!(left(dir.path()).len(), 2, "both are in use");
    let ended = end(running).await;
    retention.sweep().await;
    assert_eq!(left(dir.path()), ["session.jsonl"], "{ended} ended and went");
    drop(hold);
    retention.sweep().await;
    assert!(left(dir.path()).is_empty());
}

#[tokio::test]
async fn an_ended_sessions_transcripts_go_with_it_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Arc::new(Retention::new(dir.path().to_owned(), policy(None, None)));
    retention.remove_with_sessions();
    let (service, _registration, _subscription) = service(&retention);
    for session in ["s1", "s2"] {
        transcript(dir.path(), session, 10, Duration::ZERO);
        retention.open_session(&AgentId::new(session));
    }
    let child = child(&service, dir.path(), "s1").await;
    let grandchild = self::child(&service, dir.path(), child.id()).await;
    let other = self::child(&service, dir.path(), "s2").await;
    let (child, grandchild, other) = (end(child).await, end(grandchild).await, end(other).await);
    // A child continued later is announced again (the scripted provider
    // names a run after its parent): still one member.
    let again = self::child(&service, dir.path(), "s1").await;
    assert_eq!(end(again).await, child);

    let removed = retention.end_session(&AgentId::new("s1")).unwrap();
    assert_eq!(removed.files, 3, "s1, its child and its grandchild");
    let mut kept = vec!["s2.jsonl".to_owned(), format!("{other}.jsonl")];
    kept.sort();
    assert_eq!(left(dir.path()), kept, "{child} and {grandchild} went with s1");
    assert_eq!(retention.end_session(&AgentId::new("s1")).unwrap(), Swept::default());
    assert_eq!(retention.end_session(&AgentId::new("s2")).unwrap().files, 2);
    assert!(left(dir.path()).is_empty());
}

#[tokio::test]
async fn without_removal_at_session_end_a_session_keeps_its_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Arc::new(Retention::new(dir.path().to_owned(), DataPolicy::default()));
    let (service, _registration, _subscription) = service(&retention);
    transcript(dir.path(), "s1", 10, Duration::ZERO);
    retention.open_session(&AgentId::new("s1"));
    let run = child(&service, dir.path(), "s1").await;
    end(run).await;
    assert_eq!(retention.end_session(&AgentId::new("s1")).unwrap(), Swept::default());
    assert_eq!(left(dir.path()).len(), 2);
}

#[test]
fn the_data_texts() {
    let data_dir = Path::new("/srv/dsh");
    insta::assert_snapshot!(
        "data_texts",
        [
            wording::data_swept(data_dir, 1, 2048),
            wording::data_swept(data_dir, 12, 1_048_576),
            wording::data_sweep_failed(data_dir, &"Permission denied (os error 13)"),
            wording::session_transcripts_not_removed(&"3f2a", &"Permission denied (os error 13)"),
            wording::config_bad_age("30 days"),
            wording::config_bad_size("1.5GiB"),
        ]
        .join("\n")
    );
}
