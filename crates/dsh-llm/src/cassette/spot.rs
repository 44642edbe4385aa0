//! Where two values of one field first differ, shown in a few words: the
//! character offset, and a little text on each side of it from each value.
//!
//! A miss may differ deep inside a long text (one task id in a 5 KB tool
//! result): the start of both texts would read the same, and only the text
//! around the first difference tells them apart.

use serde_json::Value;

/// How many characters are shown on each side of the first difference.
pub(crate) const AROUND: usize = 40;

/// The first difference of two values, as a miss shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spot {
    /// The offset, in characters, of the first character that differs:
    /// in the text itself when both values are strings, else in their
    /// JSON. `None` when one side holds nothing.
    pub(crate) offset: Option<usize>,
    /// The recorded value around it (`None`: nothing): a string's text
    /// quoted as JSON, with `…` outside the quotes where text is left out.
    pub(crate) recorded: Option<String>,
    /// The asked value around it.
    pub(crate) asked: Option<String>,
}

/// Where `recorded` and `asked` first differ.
pub(crate) fn spot(recorded: Option<&Value>, asked: Option<&Value>) -> Spot {
    let (Some(first), Some(second)) = (recorded, asked) else {
        // One side holds nothing: the other shows from its start.
        let show = |value: Option<&Value>| value.map(|value| Text::of(value, false).around(0));
        return Spot {
            offset: None,
            recorded: show(recorded),
            asked: show(asked),
        };
    };
    let strings = first.is_string() && second.is_string();
    let (first, second) = (Text::of(first, strings), Text::of(second, strings));
    let offset = first
        .chars
        .iter()
        .zip(&second.chars)
        .take_while(|(a, b)| a == b)
        .count();
    Spot {
        offset: Some(offset),
        recorded: Some(first.around(offset)),
        asked: Some(second.around(offset)),
    }
}

/// A value as compared: a string's characters, or its JSON's.
struct Text {
    chars: Vec<char>,
    quoted: bool,
}

impl Text {
    fn of(value: &Value, strings: bool) -> Self {
        match value {
            Value::String(text) if strings => Self {
                chars: text.chars().collect(),
                quoted: true,
            },
            other => Self {
                chars: other.to_string().chars().collect(),
                quoted: false,
            },
        }
    }

    /// The text from [`AROUND`] characters before `offset` to as many
    /// after it, with `…` where text is left out.
    fn around(&self, offset: usize) -> String {
        let start = offset.saturating_sub(AROUND).min(self.chars.len());
        let end = offset.saturating_add(AROUND).min(self.chars.len());
        let shown: String = self.chars[start..end].iter().collect();
        let shown = if self.quoted {
            Value::String(shown).to_string()
        } else {
            shown
        };
        let before = if start > 0 { "…" } else { "" };
        let after = if end < self.chars.len() { "…" } else { "" };
        format!("{before}{shown}{after}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_difference_deep_in_a_long_text_shows_the_text_around_it() {
        let text = |id: &str| {
            json!(format!(
                "{}kept as task {id}; read it with task_output{}",
                "a".repeat(4_000),
                "z".repeat(600)
            ))
        };
        let found = spot(Some(&text("subagent-2")), Some(&text("subagent-1")));
        assert_eq!(found.offset, Some(4_022));
        assert_eq!(
            found.recorded.as_deref(),
            Some(r#"…"aaaaaaaaaaaaaaaaaakept as task subagent-2; read it with task_outputzzzzzzzzzzzzz"…"#)
        );
        assert_eq!(
            found.asked.as_deref(),
            Some(r#"…"aaaaaaaaaaaaaaaaaakept as task subagent-1; read it with task_outputzzzzzzzzzzzzz"…"#)
        );
    }

    #[test]
    fn short_values_show_whole_and_other_values_compare_as_json() {
        let found = spot(Some(&json!("second task")), Some(&json!("second tusk")));
        assert_eq!(
            (found.offset, found.recorded.as_deref(), found.asked.as_deref()),
            (Some(8), Some(r#""second task""#), Some(r#""second tusk""#))
        );
        let found = spot(Some(&json!(0.2)), Some(&json!("0.2")));
        assert_eq!(
            (found.offset, found.recorded.as_deref(), found.asked.as_deref()),
            (Some(0), Some("0.2"), Some(r#""0.2""#))
        );
        let found = spot(Some(&json!({"a": 1})), None);
        assert_eq!(
            (found.offset, found.recorded.as_deref(), found.asked),
            (None, Some(r#"{"a":1}"#), None)
        );
        let shorter = spot(Some(&json!("abc")), Some(&json!("abcdef")));
        assert_eq!(
            (shorter.offset, shorter.asked.as_deref()),
            (Some(3), Some(r#""abcdef""#))
        );
    }

    #[test]
    fn offsets_count_characters_and_newlines_read_escaped() {
        let found = spot(Some(&json!("ééé\nx")), Some(&json!("ééé\ny")));
        assert_eq!(
            (found.offset, found.recorded.as_deref()),
            (Some(4), Some(r#""ééé\nx""#))
        );
    }
}
