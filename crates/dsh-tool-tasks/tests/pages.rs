//! `task_output` within its result budget: a long output reads as its head
//! and tail with a notice, `offset` pages through all of it, an offset past
//! the end and an output no longer kept get their own clear answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::exec;
use dsh_tasks::{Recorded, TaskOutcome, TaskRegistry, TaskSpec, TextStore};
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::budget::Shown;
use dsh_tools::{AgentId, ResultLimit, ToolRegistry, ToolResult};
use serde_json::{Value, json};

/// A registry, and the task tools over it within `budget` tokens.
struct Pages {
    tasks: TaskRegistry,
    tools: ToolRegistry,
    _plugin: TaskToolsPlugin,
}

impl Pages {
    fn new(tasks: TaskRegistry, budget: u64) -> Self {
        let tools = ToolRegistry::new();
        let plugin = TaskToolsPlugin::apply_within(&tasks, &tools, ResultLimit::new(budget).unwrap()).unwrap();
        Self {
            tasks,
            tools,
            _plugin: plugin,
        }
    }

    /// A finished task of `parent` whose output is `text`.
    async fn finished(&self, text: &str) -> String {
        let text = text.to_owned();
        let id = self
            .tasks
            .spawn(
                TaskSpec::new("subagent", "long", AgentId::from("parent")),
                |_| async move { TaskOutcome::Completed { output: text.into() } },
            )
            .unwrap();
        self.tasks.wait(&id, &AgentId::from("parent"), None).await.unwrap();
        id
    }

    async fn read(&self, args: Value) -> ToolResult {
        self.tools.call("task_output", args, exec()).await
    }
}

/// A text of `n` characters, one and two and three bytes long in turn.
fn mixed(n: usize) -> String {
    (0..n)
        .map(|i| match i % 3 {
            0 => 'a',
            1 => 'é',
            _ => '語',
        })
        .collect()
}

const STATUS: &str = "\n[status: completed]";

/// The offset the notice at the end of `text` says to read on from.
fn next_offset(text: &str) -> Option<u64> {
    let (_, rest) = text.rsplit_once(r#""offset": "#)?;
    rest.split_once('}')?.0.parse().ok()
}

#[tokio::test]
async fn an_output_over_the_budget_shows_its_head_and_tail_and_the_call_that_reads_on() {
    let pages = Pages::new(TaskRegistry::new(), 8_000);
    let text = mixed(1_000_000);
    let id = pages.finished(&text).await;
    let result = pages.read(json!({"task_id": id})).await;
    assert!(!result.is_error);
    assert!(result.text.len() <= 32_000, "{}", result.text.len());
    assert!(result.text.ends_with(STATUS), "the status line stays last");
    let cut = result.cut.as_deref().unwrap();
    let Shown::HeadTail { head, tail } = cut.shown else {
        panic!("a head and a tail")
    };
    assert_eq!(cut.full.chars, 1_000_000);
    assert_eq!(cut.full.bytes as usize, text.len());
    let chars: Vec<char> = text.chars().collect();
    let head_text: String = chars[..head.chars as usize].iter().collect();
    let tail_text: String = chars[chars.len() - tail.chars as usize..].iter().collect();
    assert!(result.text.starts_with(&head_text));
    assert!(result.text.ends_with(&format!("{tail_text}{STATUS}")));
    let call = format!(r#"task_output {{"task_id": "{id}", "offset": {}}}"#, head.chars);
    assert!(
        result.text.contains(&call),
        "{}",
        &result.text[head.bytes as usize..][..300]
    );
}

#[tokio::test]
async fn walking_the_pages_reads_back_exactly_the_whole_output() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let text = mixed(20_000);
    let id = pages.finished(&text).await;
    let first = pages.read(json!({"task_id": id})).await;
    let mut offset = next_offset(&first.text).unwrap();
    // The head the first read showed, then every page from its offset on.
    let Shown::HeadTail { head, .. } = first.cut.as_deref().unwrap().shown else {
        panic!("a head and a tail")
    };
    assert_eq!(offset, head.chars);
    let mut read_back: String = text.chars().take(head.chars as usize).collect();
    let mut calls = 0;
    loop {
        let page = pages.read(json!({"task_id": id, "offset": offset})).await;
        assert!(!page.is_error, "{}", page.text);
        assert!(page.text.len() <= 1_024, "{}", page.text.len());
        assert!(page.text.ends_with(STATUS));
        let Shown::Page { start, page: shown } = page.cut.as_deref().unwrap().shown else {
            panic!("a page")
        };
        assert_eq!(start, offset);
        read_back.push_str(&page.text[..shown.bytes as usize]);
        calls += 1;
        match next_offset(&page.text) {
            Some(next) => {
                assert_eq!(next, offset + shown.chars, "the notice reads on right after the page");
                offset = next;
            }
            None => {
                assert_eq!(offset + shown.chars, 20_000);
                break;
            }
        }
    }
    assert_eq!(read_back, text, "every character once, in order");
    assert!(calls > 20, "{calls} pages");
}

#[tokio::test]
async fn an_output_within_the_budget_reads_as_it_always_did_and_one_byte_more_is_cut() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let fits = "f".repeat(1_024 - STATUS.len());
    let id = pages.finished(&fits).await;
    let result = pages.read(json!({"task_id": id})).await;
    assert_eq!(result.text, format!("{fits}{STATUS}"));
    assert_eq!(result.cut, None);
    // Offset 0 of a text that fits is the text itself.
    assert_eq!(pages.read(json!({"task_id": id, "offset": 0})).await.text, result.text);
    let over = "o".repeat(1_025 - STATUS.len());
    let id = pages.finished(&over).await;
    let result = pages.read(json!({"task_id": id})).await;
    assert!(result.cut.is_some());
    assert!(result.text.len() <= 1_024);
}

#[tokio::test]
async fn an_offset_past_the_end_is_refused_and_the_end_itself_reads_no_new_output() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let id = pages.finished("twelve chars").await;
    let past = pages.read(json!({"task_id": id, "offset": 13})).await;
    assert!(past.is_error);
    assert_eq!(past.error.as_ref().unwrap().code(), Some("INVALID_ARGUMENTS"));
    insta::assert_snapshot!("offset_past_end", past.text);
    let end = pages.read(json!({"task_id": id, "offset": 12})).await;
    assert_eq!(end.text, format!("(no new output){STATUS}"));
    let tail = pages.read(json!({"task_id": id, "offset": 7})).await;
    assert_eq!(tail.text, format!("chars{STATUS}"));
}

#[tokio::test]
async fn an_evicted_output_says_it_is_no_longer_kept_and_how_large_it_was() {
    // A store of 3,000 bytes: the second output of 2,000 evicts the first.
    let pages = Pages::new(TaskRegistry::new().kept_in(TextStore::new(3_000)), 256);
    let first = pages.finished(&"1".repeat(2_000)).await;
    let second = pages.finished(&"2".repeat(2_000)).await;
    let gone = pages.read(json!({"task_id": first})).await;
    assert!(!gone.is_error, "not a failure: the task completed");
    insta::assert_snapshot!("output_no_longer_kept", gone.text);
    let paged = pages.read(json!({"task_id": first, "offset": 10})).await;
    assert_eq!(paged.text, gone.text, "no page of it either");
    let kept = pages.read(json!({"task_id": second, "offset": 1_990})).await;
    assert_eq!(kept.text, format!("{}{STATUS}", "2".repeat(10)));
    // An output larger than the whole store is never kept, and evicts nothing.
    let huge = pages.finished(&"3".repeat(3_001)).await;
    let never = pages.read(json!({"task_id": huge})).await;
    assert!(!never.is_error);
    assert!(never.text.starts_with(&format!(
        "(the output of task {huge}, 3001 characters, is no longer kept."
    )));
    assert_eq!(pages.tasks.texts().held(), 2_000);
    let still = pages.read(json!({"task_id": second, "offset": 1_990})).await;
    assert_eq!(still.text, kept.text);
}

#[tokio::test]
async fn a_cut_output_reads_as_pinned() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let id = pages
        .finished(&format!("{}{}", "h".repeat(3_000), "t".repeat(3_000)))
        .await;
    let whole = pages.read(json!({"task_id": id})).await;
    let page = pages.read(json!({"task_id": id, "offset": 100})).await;
    // The notice, and the status line after the text.
    let notice = |text: &str| {
        let body = text.strip_suffix(STATUS).unwrap();
        format!("{}{STATUS}", body.trim_matches(|c| c == 'h' || c == 't'))
    };
    insta::assert_snapshot!("cut_output", notice(&whole.text));
    insta::assert_snapshot!("page_output", notice(&page.text));
}

#[tokio::test]
async fn a_recorded_result_is_a_finished_task_that_queues_no_notice() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let owner = AgentId::from("parent");
    let recorded = pages
        .tasks
        .record(
            TaskSpec::new("subagent", "read the docs", owner.clone()),
            Recorded::Completed("x".repeat(5_000).into()),
        )
        .unwrap();
    let id = recorded.id;
    assert_eq!(id, "subagent-1");
    assert_eq!(recorded.output.size().chars, 5_000);
    assert!(pages.tasks.take_notices(&owner).is_empty());
    let listed = pages.tools.call("task_list", json!({}), exec()).await;
    assert_eq!(listed.text, "subagent-1 [status: completed] (subagent: read the docs)");
    let page = pages.read(json!({"task_id": id, "offset": 4_990})).await;
    assert_eq!(page.text, format!("{}{STATUS}", "x".repeat(10)));
    // The next background task is numbered after it (and notices its end).
    assert_eq!(pages.finished("y").await, "subagent-2");
    assert_eq!(pages.tasks.take_notices(&owner).len(), 1);
    // A recorded failure shows the text its owner read, and its status.
    let failed = pages
        .tasks
        .record(
            TaskSpec::new("subagent", "broke", owner.clone()),
            Recorded::Failed {
                detail: "subagent run failed".into(),
                output: "partial ".repeat(500).into(),
            },
        )
        .unwrap();
    let page = pages.read(json!({"task_id": failed.id, "offset": 3_992})).await;
    assert_eq!(page.text, "partial \n[status: failed, subagent run failed]");
    assert!(pages.tasks.take_notices(&owner).is_empty());
}

/// A failed task of `parent` whose detail is `detail` and whose output is `text`.
fn failed(pages: &Pages, detail: &str, text: &str) -> String {
    pages
        .tasks
        .record(
            TaskSpec::new("subagent", "broke", AgentId::from("parent")),
            Recorded::Failed {
                detail: detail.to_owned(),
                output: text.to_owned().into(),
            },
        )
        .unwrap()
        .id
}

#[tokio::test]
async fn a_long_diagnostic_counts_within_the_budget() {
    let pages = Pages::new(TaskRegistry::new(), 256);
    let budget = ResultLimit::new(256).unwrap().bytes();
    // A failed run's diagnostic, as long as a provider may give (4 KB).
    let detail = format!("error: {}", "stderr line\n".repeat(340));
    for output in ["", "short partial output", &"p".repeat(10_000)] {
        let id = failed(&pages, &detail, output);
        let offset = output.len().min(3);
        for args in [json!({"task_id": id}), json!({"task_id": id, "offset": offset})] {
            let result = pages.read(args).await;
            assert!(!result.is_error);
            assert!(result.text.len() <= budget, "{} > {budget}", result.text.len());
            let status = &result.text[result.text.rfind("\n[status: failed, error: ").unwrap()..];
            assert!(status.len() <= budget / 2, "{}", status.len());
            assert!(status.ends_with(" more characters not shown)]"), "{status}");
        }
    }
    let id = failed(&pages, &detail, "");
    let result = pages.read(json!({"task_id": id})).await;
    insta::assert_snapshot!("long_detail_cut", result.text.replace("stderr line\n", "L"));
    // A short detail is shown whole, as before.
    let id = failed(&pages, "subagent run failed", "");
    let result = pages.read(json!({"task_id": id})).await;
    assert_eq!(result.text, "(no new output)\n[status: failed, subagent run failed]");
}

/// Reads `id` from `offset` on with `task_output`, following each notice
/// the model reads, until a page without one: the characters read, in
/// order. Every answer is within `budget` bytes.
async fn follow(pages: &Pages, id: &str, mut offset: u64, budget: usize) -> String {
    let mut read_back = String::new();
    for _ in 0..100_000 {
        let result = pages.read(json!({"task_id": id, "offset": offset})).await;
        assert!(!result.is_error, "{}", result.text);
        assert!(result.text.len() <= budget, "{} > {budget}", result.text.len());
        let body = &result.text[..result.text.rfind("\n[status: ").unwrap()];
        let (page, next) = match result.cut.as_deref().map(|cut| cut.shown) {
            Some(Shown::Page { start, page }) => {
                assert_eq!(start, offset);
                let next = next_offset(body);
                if let Some(next) = next {
                    assert_eq!(next, offset + page.chars, "the notice reads on where the page ends");
                }
                (&body[..usize::try_from(page.bytes).unwrap()], next)
            }
            // The rest fits whole (or nothing is left): no notice.
            None if body == "(no new output)" => ("", None),
            None => (body, None),
            Some(other) => panic!("a page: {other:?}"),
        };
        read_back.push_str(page);
        match next {
            Some(next) => {
                assert!(next > offset, "a page always moves on");
                offset = next;
            }
            None => return read_back,
        }
    }
    panic!("the notices never ended");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn following_task_output_notices_reads_every_character_once_and_ends(
        text in "[a-zé語🦀 \n]{1,6000}",
        tokens in 256u64..1_200,
        start in 0usize..6_000,
        long_detail in proptest::prelude::any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let pages = Pages::new(TaskRegistry::new(), tokens);
            let detail = if long_detail { "d".repeat(4_096) } else { "run failed".to_owned() };
            let id = failed(&pages, &detail, &text);
            let chars: Vec<char> = text.chars().collect();
            let start = start.min(chars.len());
            let budget = ResultLimit::new(tokens).unwrap().bytes();
            let read_back = follow(&pages, &id, start as u64, budget).await;
            let expected: String = chars[start..].iter().collect();
            assert_eq!(read_back, expected);
        });
    }
}
