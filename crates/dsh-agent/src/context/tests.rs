//! The context fit's estimate, density, learned facts and fit of results.

use super::*;
use dsh_llm::Message;
use dsh_tools::ToolOutput;

fn results(texts: &[String]) -> (Vec<ToolCall>, Vec<ToolResult>) {
    let calls = (0..texts.len())
        .map(|index| ToolCall::new(format!("call_{index}"), "t", "{}"))
        .collect();
    let results = texts
        .iter()
        .map(|text| ToolResult::from_outcome(Ok(ToolOutput::text(text.clone()))))
        .collect();
    (calls, results)
}

fn request_with(calls: &[ToolCall], results: &[ToolResult]) -> ChatRequest {
    let mut messages = vec![
        Message::system("be brief"),
        Message::user("do four things"),
        Message::assistant_with_tool_calls("", calls.to_vec()),
    ];
    messages.extend(
        calls
            .iter()
            .zip(results)
            .map(|(call, result)| Message::tool(call.id.clone(), result.text.clone())),
    );
    ChatRequest::new(messages)
}

#[test]
fn four_large_results_are_cut_to_fit_beside_a_small_one() {
    let big = |c: char| format!("HEAD-{c}{}TAIL-{c}", c.to_string().repeat(2_000_000));
    let texts = [big('a'), "small".to_owned(), big('b'), big('c')];
    let (calls, mut results) = results(&texts);
    let room = Room {
        window: 24_000,
        reserve: answer_reserve(24_000, None),
        density: Density::default(),
    };
    let base = ChatRequest::new(request_with(&calls, &[]).messages[..3].to_vec());
    let estimate = Estimate::of(None, "m", &base);
    assert_eq!(fit_results(room, estimate, &calls, &mut results), 3);
    assert_eq!(results[1].text, "small", "a small result stays whole");
    for (result, text) in results.iter().zip(&texts) {
        let ends = text.len().min(6);
        assert!(result.text.starts_with(&text[..ends]) && result.text.ends_with(&text[text.len() - ends..]));
    }
    let request = request_with(&calls, &results);
    let sent = request_bytes("m", &request);
    assert!(
        tokens_in(sent) + room.reserve <= room.window,
        "the request ({} tokens) fits 24,000 less the reserve",
        tokens_in(sent)
    );
    assert_eq!(room.check(Estimate::of(None, "m", &request)), Ok(()));
}

#[test]
fn text_that_escapes_is_cut_to_its_escaped_share() {
    let quotes = "\"\n".repeat(500_000);
    let (calls, mut results) = results(std::slice::from_ref(&quotes));
    let room = Room {
        window: 8_000,
        reserve: 1_000,
        density: Density::default(),
    };
    let base = ChatRequest::new(vec![
        Message::user("x"),
        Message::assistant_with_tool_calls("", calls.clone()),
    ]);
    assert_eq!(
        fit_results(room, Estimate::of(None, "m", &base), &calls, &mut results),
        1
    );
    let request = request_with(&calls, &results);
    assert_eq!(room.check(Estimate::of(None, "m", &request)), Ok(()));
}

#[test]
fn an_estimate_continues_from_the_servers_count() {
    let first = ChatRequest::new(vec![Message::user("hello")]);
    let anchor = Anchor::of(&first).counted(1_000).unwrap();
    let mut next = first.clone();
    next.messages.push(Message::assistant("x".repeat(400)));
    let estimate = Estimate::of(Some(anchor), "m", &next);
    assert_eq!(estimate.counted, 1_000);
    assert_eq!(estimate.bytes, message_bytes(&next.messages[1]));
    // A request that does not continue the anchored one is counted whole.
    let other = ChatRequest::new(vec![]);
    assert_eq!(Estimate::of(Some(anchor), "m", &other).counted, 0);
    // A count of zero anchors nothing: the whole body is estimated.
    assert_eq!(Anchor::of(&first).counted(0), None);
}

#[test]
fn the_density_follows_the_servers_counts_and_keeps_the_densest_of_the_latest() {
    let learned = Learned::default();
    let whole = Estimate {
        counted: 0,
        bytes: 40_000,
    };
    assert_eq!(whole.tokens(learned.density("m", whole)), 10_000 + ESTIMATE_SLACK);
    // The server counts half: one count is enough to follow it, with the
    // margin on top.
    learned.learn_count("m", 5_000, whole);
    assert_eq!(whole.tokens(learned.density("m", whole)), 5_150 + ESTIMATE_SLACK);
    // A denser count wins at once; a sparser one does not lower the
    // estimate until the denser has left the latest few.
    learned.learn_count("m", 12_000, whole);
    let dense = whole.tokens(learned.density("m", whole));
    assert_eq!(dense, 12_360 + ESTIMATE_SLACK);
    for _ in 1..SAMPLES {
        learned.learn_count("m", 5_000, whole);
        assert_eq!(whole.tokens(learned.density("m", whole)), dense);
    }
    learned.learn_count("m", 5_000, whole);
    assert_eq!(whole.tokens(learned.density("m", whole)), 5_150 + ESTIMATE_SLACK);
    // What was added since a count is learned apart from whole requests:
    // until it is, a sparser whole count does not lower its estimate, a
    // denser one raises it.
    let added = Estimate {
        counted: 2_000,
        bytes: 4_000,
    };
    assert_eq!(
        added.tokens(learned.density("m", added)),
        2_000 + 1_000 + ESTIMATE_SLACK
    );
    learned.learn_count("dense", 20_000, whole);
    assert_eq!(
        added.tokens(learned.density("dense", added)),
        2_000 + 2_060 + ESTIMATE_SLACK
    );
    learned.learn_count("m", 3_200, added);
    assert_eq!(
        added.tokens(learned.density("m", added)),
        2_000 + 1_236 + ESTIMATE_SLACK
    );
    // Another model, a tiny sample and an empty count teach nothing.
    assert_eq!(learned.density("other", whole), Density::default());
    let tiny = Estimate { counted: 0, bytes: 40 };
    learned.learn_count("other", 1_000, tiny);
    learned.learn_count("other", 0, whole);
    assert_eq!(learned.density("other", whole), Density::default());
    // A skewed count is held within eight times four bytes a token.
    learned.learn_count("skewed", 10_000_000, whole);
    assert_eq!(whole.tokens(learned.density("skewed", whole)), 80_000 + ESTIMATE_SLACK);
}

#[test]
fn a_refusal_that_counted_nothing_teaches_at_least_a_quarter_more() {
    let learned = Learned::default();
    let estimate = Estimate {
        counted: 0,
        bytes: 40_000,
    };
    // The server counted more than 12,000 where the loop said 10,000.
    learned.learn_at_least("m", 12_000, estimate);
    assert_eq!(learned.density("m", estimate).scale(10_000), 15_450);
    // A bound the estimate already met teaches nothing.
    learned.learn_at_least("n", 9_000, estimate);
    assert_eq!(learned.density("n", estimate), Density::default());
}

#[test]
fn a_server_is_asked_to_count_only_while_its_streams_do_not_and_it_counts_when_asked() {
    let learned = Learned::default();
    assert!(!learned.asks_to_count("m"), "no answer read yet");
    learned.answered("m", true);
    assert!(!learned.asks_to_count("m"), "its streams count");
    learned.answered("m", false);
    assert!(learned.asks_to_count("m"));
    assert!(!learned.asks_to_count("other"), "per model");
    learned.never_counts("m");
    learned.answered("m", false);
    assert!(!learned.asks_to_count("m"), "it gave no count when asked");
    learned.answered("m", true);
    assert!(!learned.asks_to_count("m"));
}

#[test]
fn the_latest_learned_window_is_kept_per_model() {
    let learned = Learned::default();
    assert_eq!(learned.learn_window("m", 8_192), WindowLearned::New);
    assert_eq!(learned.learn_window("m", 8_192), WindowLearned::Same, "known already");
    assert_eq!(
        learned.learn_window("m", 16_384),
        WindowLearned::New,
        "the server's latest word"
    );
    assert_eq!(learned.window("m").map(|window| window.tokens), Some(16_384));
    assert_eq!(learned.learn_window("other", 4_096), WindowLearned::New);
    assert_eq!(learned.window("m").map(|window| window.tokens), Some(16_384));
    assert_eq!(learned.window("third"), None);
}

#[test]
fn what_an_earlier_run_kept_starts_it_and_the_newest_answer_wins() {
    let learned = Learned::default();
    let kept = KeptModel {
        window: Some(4_096),
        concurrency: Some(dsh_llm::Concurrency::ONE),
        whole: vec![[5_150, 10_000], [1, 10_000]],
        added: Vec::new(),
    };
    learned.keep("m", &kept);
    assert_eq!(
        learned.window("m"),
        Some(Window {
            tokens: 4_096,
            kept: true
        })
    );
    let whole = Estimate {
        counted: 0,
        bytes: 40_000,
    };
    assert_eq!(
        whole.tokens(learned.density("m", whole)),
        5_150 + ESTIMATE_SLACK,
        "the bad count is dropped"
    );
    // Nothing changed yet: nothing to keep again.
    assert!(learned.to_keep(|_| Some(dsh_llm::Concurrency::ONE)).is_empty());
    // A refusal naming another window replaces the kept one.
    assert_eq!(learned.learn_window("m", 2_048), WindowLearned::InPlaceOfKept(4_096));
    let changed = learned.to_keep(|_| Some(dsh_llm::Concurrency::ONE));
    assert_eq!(changed["m"].window, Some(2_048));
    assert!(learned.to_keep(|_| Some(dsh_llm::Concurrency::ONE)).is_empty(), "kept");
    // A count beyond a kept window forgets it; one learned here stays.
    learned.keep(
        "k",
        &KeptModel {
            window: Some(2_048),
            ..KeptModel::default()
        },
    );
    learned.learn_count("k", 3_000, whole);
    assert_eq!(learned.window("k"), None);
    learned.learn_count("m", 3_000, whole);
    assert_eq!(learned.window("m").map(|window| window.tokens), Some(2_048));
    assert!(kept_sample([100, 64]) && !kept_sample([100, 63]) && !kept_sample([1_000, 100]));
}
