use proptest::prelude::*;

use super::*;
use crate::{ToolError, ToolOutput, ToolResult};

fn read() -> PagedRead {
    PagedRead::new("task_output", "subagent-7")
}

/// A text of `n` characters, each a multi-byte one where `i % 3 == 0`, so
/// that cuts have boundaries to respect.
fn mixed(n: usize) -> String {
    (0..n)
        .map(|i| match i % 3 {
            0 => 'é',
            1 => 'x',
            _ => '語',
        })
        .collect()
}

#[test]
fn a_text_within_its_allowance_is_not_cut() {
    assert_eq!(head_and_tail("short", 5, Some(read())), None);
    assert_eq!(ToolOutput::within("short".into(), 5, None), ToolOutput::text("short"));
    assert_eq!(recut("short", None, 5), None);
}

#[test]
fn a_cut_keeps_the_head_and_the_tail_within_the_allowance() {
    let text = format!("{}{}", "a".repeat(50_000), "z".repeat(50_000));
    let excerpt = head_and_tail(&text, 2_000, Some(read())).unwrap();
    assert!(excerpt.text.len() <= 2_000, "{}", excerpt.text.len());
    let Shown::HeadTail { head, tail } = excerpt.cut.shown else {
        panic!("a head and a tail");
    };
    assert!(excerpt.text.starts_with(&"a".repeat(head.chars as usize)));
    assert!(excerpt.text.ends_with(&"z".repeat(tail.chars as usize)));
    assert!(head.chars > 800 && tail.chars > 800, "{head:?} {tail:?}");
    assert_eq!(
        excerpt.cut.full,
        TextSize {
            bytes: 100_000,
            chars: 100_000
        }
    );
    let call = format!(r#"task_output {{"task_id": "subagent-7", "offset": {}}}"#, head.chars);
    assert!(excerpt.text.contains(&call), "{}", excerpt.text);
}

#[test]
fn cuts_fall_on_character_boundaries_and_count_characters() {
    let text = mixed(30_000);
    for allowance in [1_000, 1_001, 1_002, 4_097, 10_003] {
        let excerpt = head_and_tail(&text, allowance, Some(read())).unwrap();
        assert!(excerpt.text.len() <= allowance);
        let Shown::HeadTail { head, tail } = excerpt.cut.shown else {
            panic!("a head and a tail");
        };
        let chars: Vec<char> = text.chars().collect();
        let head_text: String = chars[..head.chars as usize].iter().collect();
        let tail_text: String = chars[chars.len() - tail.chars as usize..].iter().collect();
        assert_eq!(head.bytes as usize, head_text.len());
        assert!(excerpt.text.starts_with(&head_text));
        assert!(excerpt.text.ends_with(&tail_text));
        assert_eq!(excerpt.cut.full.chars, 30_000);
    }
}

#[test]
fn pages_read_exactly_the_text_at_their_offset() {
    let text = mixed(10_000);
    let chars: Vec<char> = text.chars().collect();
    let mut offset = 0;
    let mut read_back = String::new();
    let mut pages = 0;
    loop {
        let excerpt = page(&text, offset, 1_500, read()).unwrap();
        assert!(excerpt.text.len() <= 1_500);
        let Shown::Page { start, page } = excerpt.cut.shown else {
            panic!("a page");
        };
        assert_eq!(start, offset);
        let expected: String = chars[offset as usize..(offset + page.chars) as usize].iter().collect();
        assert!(excerpt.text.starts_with(&expected));
        read_back.push_str(&expected);
        offset += page.chars;
        pages += 1;
        if offset == 10_000 {
            assert_eq!(excerpt.text, expected, "the last page has no notice");
            break;
        }
        let call = format!(r#"task_output {{"task_id": "subagent-7", "offset": {offset}}}"#);
        assert!(excerpt.text.ends_with(&format!("{call}]")), "{}", excerpt.text);
    }
    assert_eq!(read_back, text);
    assert!(pages > 5);
    assert_eq!(page(&text, 10_000, 1_500, read()).unwrap().text, "");
    assert_eq!(page(&text, 10_001, 1_500, read()), None);
}

#[test]
fn a_recut_keeps_the_prefix_the_ends_and_the_paged_read() {
    let text = format!("{}{}", "a".repeat(50_000), "z".repeat(50_000));
    let error = ToolError::excerpt(head_and_tail(&text, 8_000, Some(read())).unwrap());
    let mut result = ToolResult::from_outcome(Err(error));
    assert!(result.text.starts_with("Error: aaa"));
    assert!(result.cut_to(1_000));
    assert!(result.text.len() <= 1_000);
    assert!(result.text.starts_with("Error: aaa"), "{}", result.text);
    assert!(result.text.ends_with("zzz"));
    let cut = *result.cut.clone().unwrap();
    let Shown::HeadTail { head, .. } = cut.shown else {
        panic!("a head and a tail");
    };
    assert_eq!(cut.full.chars, 100_000);
    assert_eq!(cut.read, Some(read()));
    let call = format!(r#"task_output {{"task_id": "subagent-7", "offset": {}}}"#, head.chars);
    assert!(result.text.contains(&call), "{}", result.text);
    assert!(!result.cut_to(1_000), "it fits now");
}

#[test]
fn a_recut_page_stays_a_page_of_the_same_text() {
    let text = "p".repeat(20_000);
    let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(page(&text, 4_000, 8_000, read()).unwrap())));
    assert!(result.cut_to(600));
    let cut = *result.cut.clone().unwrap();
    let Shown::Page { start, page } = cut.shown else {
        panic!("a page");
    };
    assert_eq!(start, 4_000);
    let call = format!(
        r#"task_output {{"task_id": "subagent-7", "offset": {}}}"#,
        4_000 + page.chars
    );
    assert!(result.text.ends_with(&format!("{call}]")), "{}", result.text);
    assert!(result.text.len() <= 600);
}

#[test]
fn a_result_no_tool_cut_is_cut_without_a_paged_read() {
    let mut result = ToolResult::from_outcome(Ok(ToolOutput::text("m".repeat(5_000))));
    assert!(result.cut_to(500));
    assert!(result.text.len() <= 500);
    assert_eq!(result.cut.as_ref().unwrap().read, None);
    assert!(result.text.contains("not kept"), "{}", result.text);
}

#[test]
fn budgets_are_tokens_at_four_bytes_each() {
    assert_eq!(tokens_in(0), 0);
    assert_eq!(tokens_in(1), 1);
    assert_eq!(tokens_in(8), 2);
    assert_eq!(tokens_in(9), 3);
    assert_eq!(ResultLimit::new(1_000).unwrap().bytes(), 4_000);
    assert_eq!(ResultLimit::default(), ResultLimit::DEFAULT);
    assert!(ResultLimit::new(0).is_err());
    assert!(ResultLimit::new(255).is_err());
    assert_eq!(ResultLimit::new(256), Ok(ResultLimit::MIN));
    assert_eq!(" 256 ".parse::<ResultLimit>(), Ok(ResultLimit::MIN));
    assert_eq!(
        serde_json::from_value::<ResultLimit>(serde_json::json!(256)).ok(),
        Some(ResultLimit::MIN)
    );
    assert_eq!(
        serde_json::to_value(ResultLimit::DEFAULT).ok(),
        Some(serde_json::json!(8000))
    );
}

#[test]
fn every_reader_refuses_a_result_limit_in_one_wording() {
    let json = |value: serde_json::Value| serde_json::from_value::<ResultLimit>(value).unwrap_err().to_string();
    let refusals = [
        ResultLimit::new(12).unwrap_err().to_string(),
        "0".parse::<ResultLimit>().unwrap_err().to_string(),
        "8k".parse::<ResultLimit>().unwrap_err().to_string(),
        json(serde_json::json!(255)),
        json(serde_json::json!(-1)),
        json(serde_json::json!(300.5)),
        json(serde_json::json!("8000")),
        json(serde_json::json!({"tokens": 8000})),
    ];
    insta::assert_snapshot!("result_limit_refused", refusals.join("\n"));
}

#[test]
fn the_notices_read_as_pinned() {
    let text = format!("{}{}", "a".repeat(2_000_000), "z".repeat(2_000_000));
    let budget = ResultLimit::DEFAULT.bytes();
    let cut = head_and_tail(&text, budget, Some(read())).unwrap();
    let uncut = head_and_tail(&text, budget, None).unwrap();
    let paged = page(&text, 15_907, budget, read()).unwrap();
    let notice = |excerpt: &Excerpt| excerpt.text.trim_matches(|c| c == 'a' || c == 'z').to_owned();
    insta::assert_snapshot!("cut_notice_with_paged_read", notice(&cut));
    insta::assert_snapshot!("cut_notice_not_kept", notice(&uncut));
    insta::assert_snapshot!("page_notice", notice(&paged));
    assert!(
        cut.text.len() <= budget && cut.text.len() > budget - 16,
        "{}",
        cut.text.len()
    );
}

#[test]
fn task_ids_are_quoted_as_json() {
    assert_eq!(
        PagedRead::new("task_output", "odd \"id\"").call(3),
        r#"task_output {"task_id": "odd \"id\"", "offset": 3}"#
    );
}

#[test]
fn fit_keeps_whole_what_fits_and_water_fills_the_rest() {
    assert_eq!(fit(100, 10, 20, &[10, 20, 30]), [10, 20, 30]);
    assert_eq!(fit(100, 10, 20, &[]), Vec::<u64>::new());
    assert_eq!(fit(100, 0, 0, &[10, 200, 200]), [10, 45, 45]);
    assert_eq!(fit(100, 0, 0, &[200, 10, 201]), [45, 10, 45]);
    // The rounding's spare token goes to the first cut result.
    assert_eq!(fit(100, 0, 0, &[500, 500, 500]), [34, 33, 33]);
    assert_eq!(fit(10, 20, 0, &[5, 5]), [0, 0], "no room at all");
}

#[test]
fn four_children_of_two_megabytes_fit_a_24000_token_window() {
    let sizes = [tokens_in(2_000_000); 4];
    let allowances = fit(24_000, 4_096, 3_000, &sizes);
    assert_eq!(allowances.iter().sum::<u64>(), 24_000 - 4_096 - 3_000);
    assert!(
        allowances
            .iter()
            .all(|allowance| *allowance >= (24_000 - 4_096 - 3_000) / 4)
    );
}

proptest! {
    #[test]
    fn fit_shares_the_room_fairly(
        window in 0u64..2_000_000,
        reserve in 0u64..100_000,
        estimate in 0u64..1_000_000,
        sizes in proptest::collection::vec(0u64..600_000, 0..40),
    ) {
        let allowances = fit(window, reserve, estimate, &sizes);
        let room = window.saturating_sub(reserve).saturating_sub(estimate);
        prop_assert_eq!(allowances.len(), sizes.len());
        let total: u64 = allowances.iter().sum();
        prop_assert!(total <= room.max(sizes.iter().sum()));
        if sizes.iter().sum::<u64>() > room {
            prop_assert!(total <= room, "{} > {}", total, room);
        }
        let fair = if sizes.is_empty() { 0 } else { room / sizes.len() as u64 };
        for (allowance, size) in allowances.iter().zip(&sizes) {
            // Order kept: each allowance belongs to the result at its index.
            prop_assert!(allowance <= size);
            prop_assert!(*allowance >= (*size).min(fair), "{} < min({}, {})", allowance, size, fair);
        }
        // Water-filling: a result cut short is never given less than one
        // that is larger, nor a smaller result left cut while room is spare.
        for (a, size_a) in allowances.iter().zip(&sizes) {
            for (b, size_b) in allowances.iter().zip(&sizes) {
                if a < size_a && size_b > size_a {
                    prop_assert!(b + 1 >= *a, "larger result got less: {} < {}", b, a);
                }
            }
        }
    }

    #[test]
    fn any_cut_fits_its_allowance_on_character_boundaries(
        text in "[a-zé語🦀 ]{0,3000}",
        allowance in 400usize..4_000,
        with_read in any::<bool>(),
    ) {
        let read = with_read.then(read);
        match head_and_tail(&text, allowance, read) {
            None => prop_assert!(text.len() <= allowance),
            Some(excerpt) => {
                prop_assert!(excerpt.text.len() <= allowance);
                let Shown::HeadTail { head, tail } = excerpt.cut.shown else {
                    panic!("a head and a tail");
                };
                let head_text: String = text.chars().take(head.chars as usize).collect();
                let tail_text: String = text.chars().skip((excerpt.cut.full.chars - tail.chars) as usize).collect();
                prop_assert!(excerpt.text.starts_with(&head_text));
                prop_assert!(excerpt.text.ends_with(&tail_text));
                prop_assert!(head.chars + tail.chars < excerpt.cut.full.chars);
            }
        }
    }
}

#[test]
fn a_recut_keeps_a_suffix_whole_and_its_numbers_exact() {
    let text = format!("{}{}", "a".repeat(50_000), "z".repeat(50_000));
    let status = "\n[status: completed]";
    let excerpt = head_and_tail(&text, 8_000, Some(read())).unwrap().followed_by(status);
    assert!(excerpt.text.ends_with(&format!("zzz{status}")));
    let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(excerpt)));
    assert!(result.cut_to(1_000));
    assert!(result.text.len() <= 1_000, "{}", result.text.len());
    assert!(result.text.ends_with(&format!("zzz{status}")), "{}", result.text);
    let cut = *result.cut.clone().unwrap();
    let Shown::HeadTail { head, tail } = cut.shown else {
        panic!("a head and a tail");
    };
    // The tail counted is all `z`: the status line is not part of it.
    let body = result.text.strip_suffix(status).unwrap();
    assert!(body.ends_with(&"z".repeat(tail.chars as usize)));
    assert!(!body.ends_with(&"z".repeat(tail.chars as usize + 1)));
    assert!(body.starts_with(&"a".repeat(head.chars as usize)));

    let paged = page(&text, 100, 4_000, read()).unwrap().followed_by(status);
    let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(paged)));
    assert!(result.cut_to(700));
    assert!(result.text.len() <= 700);
    let cut = *result.cut.clone().unwrap();
    let Shown::Page { start, page } = cut.shown else {
        panic!("a page");
    };
    assert_eq!(start, 100);
    let call = format!(
        r#"task_output {{"task_id": "subagent-7", "offset": {}}}"#,
        100 + page.chars
    );
    assert!(result.text.ends_with(&format!("{call}]{status}")), "{}", result.text);
}

#[test]
fn a_cut_summarizes_its_sizes_and_its_task() {
    let text = "ab".repeat(3_000);
    let kept = head_and_tail(&text, 1_000, Some(read())).unwrap();
    let summary = kept.cut.summary();
    assert_eq!(summary["fullBytes"], 6_000);
    assert_eq!(summary["fullChars"], 6_000);
    assert_eq!(summary["shownBytes"], kept.cut.shown.size().bytes);
    assert_eq!(summary["taskId"], "subagent-7");
    let not_kept = head_and_tail(&text, 1_000, None).unwrap();
    assert!(not_kept.cut.summary().get("taskId").is_none());
}

/// The offset the notice at the end of `text` tells the model to read
/// from, parsed from the text itself: what a model following it does.
fn next_offset(text: &str) -> Option<u64> {
    let at = text.rfind(r#""offset": "#)? + r#""offset": "#.len();
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Follows the notices from `offset` with pages of `allowance` bytes, each
/// cut again to `recut` bytes when that is smaller (as a context fit
/// does): the characters read, in order, and how many reads it took.
fn follow(text: &str, mut offset: u64, allowance: usize, recut: Option<usize>) -> (String, usize) {
    let mut read_back = String::new();
    let mut reads = 0;
    loop {
        reads += 1;
        let excerpt = page(text, offset, allowance, read()).unwrap();
        let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(excerpt)));
        if let Some(recut) = recut {
            let before = result.text.len();
            result.cut_to(recut);
            assert!(result.text.len() <= before, "a cut never grows a result");
        }
        let cut = result.cut.as_deref().unwrap();
        let shown = match cut.shown {
            Shown::Page { start, page } => {
                assert_eq!(start, offset);
                page
            }
            // Dropped to fit: nothing of it was read; the notice says to read
            // from the same offset, which the next read (at the tool's own
            // allowance, not cut again) does.
            Shown::Dropped { start, .. } => {
                assert_eq!(start, offset);
                assert_eq!(next_offset(&result.text), Some(offset));
                let excerpt = page(text, offset, allowance, read()).unwrap();
                result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(excerpt)));
                reads += 1;
                result.cut.as_deref().unwrap().shown.size()
            }
            Shown::HeadTail { .. } => panic!("a page stays a page"),
        };
        let from = byte_of_char(text, offset);
        let to = byte_of_char(text, offset + shown.chars);
        assert!(result.text.starts_with(&text[from..to]));
        read_back.push_str(&text[from..to]);
        match next_offset(&result.text[to - from..]) {
            None => {
                assert_eq!(
                    offset + shown.chars,
                    TextSize::of(text).chars,
                    "no notice only at the end"
                );
                return (read_back, reads);
            }
            Some(next) => {
                assert_eq!(next, offset + shown.chars, "the notice reads on where the page ends");
                assert!(next > offset, "a page always moves on");
                offset = next;
            }
        }
    }
}

proptest! {
    #[test]
    fn following_the_notices_reads_every_character_once_and_ends(
        text in "[a-zé語🦀 ]{0,2500}",
        allowance in 0usize..3_000,
        start in 0usize..2_600,
        recut in proptest::option::of(0usize..3_000),
    ) {
        let chars = TextSize::of(&text).chars;
        let start = (start as u64).min(chars);
        let (read_back, reads) = follow(&text, start, allowance, recut);
        let from = byte_of_char(&text, start);
        prop_assert_eq!(read_back.as_str(), &text[from..]);
        // Every read but a re-read after a drop shows at least a character.
        prop_assert!(reads as u64 <= 2 * (chars - start + 1));
    }

    #[test]
    fn a_cut_never_grows_a_text(
        text in "[a-zé語🦀 ]{0,1500}",
        allowance in 0usize..2_000,
        recut in 0usize..2_000,
        with_read in any::<bool>(),
    ) {
        let read = with_read.then(read);
        let Some(excerpt) = head_and_tail(&text, allowance, read) else {
            return Ok(());
        };
        prop_assert!(excerpt.text.len() < text.len());
        match excerpt.cut.shown {
            Shown::Dropped { start, end } => {
                prop_assert_eq!((start, end), (0, excerpt.cut.full.chars));
                prop_assert!(excerpt.text.starts_with("[output dropped: "));
            }
            shown => prop_assert!(excerpt.text.len() <= allowance, "{:?}", shown),
        }
        let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(excerpt)));
        let before = result.text.len();
        result.cut_to(recut);
        prop_assert!(result.text.len() <= before);
    }
}

#[test]
fn a_cut_smaller_than_its_notice_drops_the_text_to_the_notice_alone() {
    let text = "q".repeat(5_000);
    let excerpt = head_and_tail(&text, 90, Some(read())).unwrap();
    assert_eq!(excerpt.cut.shown, Shown::Dropped { start: 0, end: 5_000 });
    assert_eq!(
        excerpt.text,
        r#"[output dropped: characters 0 to 5000 of 5000 did not fit the room left; to read them, call task_output {"task_id": "subagent-7", "offset": 0}]"#
    );
    // A text shorter than any notice is never replaced by a longer one.
    assert_eq!(head_and_tail(&"q".repeat(80), 70, None), None);
    let mut short = ToolResult::from_outcome(Ok(ToolOutput::text("q".repeat(80))));
    assert!(!short.cut_to(10));
    assert_eq!(short.text.len(), 80);
    // A dropped text is not cut again.
    let mut dropped = ToolResult::from_outcome(Ok(ToolOutput::excerpt(excerpt)));
    assert!(!dropped.cut_to(10));
}

#[test]
fn a_page_cut_below_its_notice_is_dropped_and_says_where_to_read_it() {
    let text = "p".repeat(20_000);
    let mut result = ToolResult::from_outcome(Ok(ToolOutput::excerpt(page(&text, 5_000, 8_000, read()).unwrap())));
    assert!(result.cut_to(90));
    let cut = result.cut.as_deref().unwrap();
    let Shown::Dropped { start, end } = cut.shown else {
        panic!("dropped, not an empty page: {}", result.text);
    };
    assert_eq!(start, 5_000);
    assert!(end > start);
    assert!(!result.text.contains("characters 5000 to 5000"), "{}", result.text);
    assert!(
        result
            .text
            .ends_with(r#"to read them, call task_output {"task_id": "subagent-7", "offset": 5000}]"#),
        "{}",
        result.text
    );
    // Read at a page's own allowance, however small, a page moves on.
    let tiny = page(&text, 5_000, 10, read()).unwrap();
    assert_eq!(tiny.cut.shown.size().chars, 1);
    assert_eq!(next_offset(&tiny.text), Some(5_001));
}

#[test]
fn the_dropped_notices_read_as_pinned() {
    let text = "d".repeat(30_000);
    let kept = head_and_tail(&text, 100, Some(read())).unwrap();
    let not_kept = head_and_tail(&text, 100, None).unwrap();
    let mut page_dropped =
        ToolResult::from_outcome(Ok(ToolOutput::excerpt(page(&text, 15_907, 8_000, read()).unwrap())));
    assert!(page_dropped.cut_to(100));
    insta::assert_snapshot!("dropped_notice_with_paged_read", kept.text);
    insta::assert_snapshot!("dropped_notice_not_kept", not_kept.text);
    insta::assert_snapshot!("dropped_page_notice", page_dropped.text);
}
