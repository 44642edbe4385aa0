//! Long answers, and reading a kept one back page by page: the fixtures of
//! the suites that check a result budget end to end.

use dsh_tools::budget::{PagedRead, Shown};
use dsh_tools::{ResultLimit, ToolExecution, ToolRegistry};
use serde_json::json;

/// An answer of `chars` characters between two marks: characters of one to
/// four bytes (`a`, `é`, `語`, `🦀` and `mark`, in turn), after
/// `<mark start>` and before `<mark end>`, so that a cut or a page that
/// splits a character, loses an end or mixes two answers shows.
pub fn marked_answer(mark: char, chars: usize) -> String {
    let body: String = (0..chars)
        .map(|i| match i % 5 {
            0 => 'a',
            1 => 'é',
            2 => '語',
            3 => '🦀',
            _ => mark,
        })
        .collect();
    format!("<{mark} start>{body}<{mark} end>")
}

/// The id of the task that keeps the rest of a cut result, read from its
/// notice, which names the call reading on with `tool` (`… call
/// task_output {"task_id": "<id>", …`). Panics when `text` names none.
pub fn noticed_task_id(text: &str, tool: &str) -> String {
    let Some((_, rest)) = text.split_once(&format!(r#"{tool} {{"task_id": ""#)) else {
        panic!("no task named in: {text}")
    };
    let Some((id, _)) = rest.split_once('"') else {
        panic!("an unterminated task id in: {text}")
    };
    id.to_owned()
}

/// Reads the kept text `read` names back whole, calling its tool in
/// `tools` as `exec`'s agent, page by page from the start: every page
/// within `budget`, each starting where the one before ended, the last one
/// the page that names no next offset. Panics on a read that fails or
/// breaks one of these.
pub async fn read_back(tools: &ToolRegistry, read: &PagedRead, exec: &ToolExecution, budget: ResultLimit) -> String {
    let status_line = |text: &str| {
        let Some(at) = text.rfind("\n[status: ") else {
            panic!("a page without its status line: {text}")
        };
        at
    };
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let args = json!({"task_id": read.task_id(), "offset": offset});
        let page = tools.call(read.tool(), args, exec.clone()).await;
        assert!(!page.is_error, "{}", page.text);
        assert!(page.text.len() <= budget.bytes(), "a page of {} bytes", page.text.len());
        match page.cut.as_deref().map(|cut| cut.shown) {
            Some(Shown::Page { start, page: shown }) => {
                assert_eq!(start, offset);
                text.push_str(&page.text[..shown.bytes as usize]);
                offset += shown.chars;
                // The notice ends naming the call that reads on.
                let next = format!("{}]", read.call(offset));
                if !page.text[..status_line(&page.text)].ends_with(&next) {
                    return text;
                }
            }
            // The last page of a text that fit from the start.
            _ => {
                text.push_str(&page.text[..status_line(&page.text)]);
                return text;
            }
        }
    }
}
