//! How much of a tool's text the model reads, and how a longer text is cut.
//!
//! Every delegation output has a *result budget* in tokens, estimated at
//! [`BYTES_PER_TOKEN`] bytes each. A text within its allowance reaches the
//! model unchanged. A longer one keeps its head and its tail (an answer's
//! conclusion is usually at its end) with one notice between them that says
//! how much was shown, of how much, and, when the full text is kept, the
//! exact call that reads the rest ([`PagedRead`]). Cuts fall on character
//! boundaries, and every number in a notice counts characters, which is what
//! a paged read's `offset` counts.
//!
//! A cut never makes a text longer, and the notice counts inside the
//! allowance. Below [`SMALLEST_USEFUL_SHARE`] bytes of text beside its
//! notice a cut shows the notice alone, which says that the output was
//! dropped and how to read it ([`Shown::Dropped`]). A page always shows at
//! least one character, so the notices of one page after another always
//! move on and reach the end.
//!
//! The same cut serves an agent loop that must fit one turn's results into
//! its context window: [`fit`] shares the room among them, and
//! [`ToolResult::cut_to`](crate::ToolResult::cut_to) cuts each to its share,
//! keeping what an earlier cut said about reading the rest.
//!
//! ```
//! use dsh_tools::budget::{self, PagedRead};
//!
//! let answer = "a".repeat(10_000) + &"z".repeat(10_000);
//! let read = PagedRead::new("task_output", "subagent-7");
//! let excerpt = budget::head_and_tail(&answer, 2_000, Some(read)).expect("over the allowance");
//! assert!(excerpt.text.len() <= 2_000);
//! assert!(excerpt.text.starts_with('a') && excerpt.text.ends_with('z'));
//! assert!(excerpt.text.contains(r#"task_output {"task_id": "subagent-7", "offset": "#));
//! assert_eq!(excerpt.cut.full.chars, 20_000);
//! ```

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::str::FromStr;

use dsh_subagent_api::setting::{self, Bounded, Written};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::wording;

/// How many bytes of text count as one token (the estimate Codex uses too):
/// what a budget in tokens allows, and how a request's size is estimated.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The tokens `bytes` bytes of text are estimated at, rounded up.
pub const fn tokens_in(bytes: u64) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN)
}

/// The bytes of text `tokens` tokens allow.
pub const fn bytes_in(tokens: u64) -> u64 {
    tokens.saturating_mul(BYTES_PER_TOKEN)
}

/// The fewest bytes of text a cut shows beside its notice. With less room a
/// cut shows its notice alone ([`Shown::Dropped`]): a few bytes of each end
/// are not worth the notice that frames them.
pub const SMALLEST_USEFUL_SHARE: usize = 128;

/// The most a delegation output shows the model, in tokens, at least
/// [`ResultLimit::MIN`].
///
/// It checks itself wherever it is read, so a budget travels whole from a
/// flag (`FromStr`), a configuration file or a tool's JSON configuration
/// (`Deserialize`, as a JSON number) to the cut; every refusal reads as
/// [`InvalidResultLimit`] says.
///
/// ```
/// use dsh_tools::ResultLimit;
/// assert_eq!(ResultLimit::DEFAULT.tokens(), 8_000);
/// assert_eq!(ResultLimit::DEFAULT.bytes(), 32_000);
/// assert!(ResultLimit::new(100).is_err()); // too small to hold a notice and any text
/// assert_eq!("2000".parse::<ResultLimit>().map(ResultLimit::tokens), Ok(2_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResultLimit(NonZeroU64);

impl ResultLimit {
    /// 8,000 tokens (32,000 bytes): a long answer, a small part of any
    /// current model's window.
    pub const DEFAULT: Self = Self(NonZeroU64::new(8_000).expect("8,000 is not zero"));

    /// The smallest budget: room for a notice and some text at each end.
    pub const MIN: Self = Self(NonZeroU64::new(256).expect("256 is not zero"));

    /// A budget of `tokens` tokens; refused below [`ResultLimit::MIN`].
    pub fn new(tokens: u64) -> Result<Self, InvalidResultLimit> {
        match NonZeroU64::new(tokens) {
            Some(tokens) if tokens.get() >= Self::MIN.0.get() => Ok(Self(tokens)),
            _ => Err(InvalidResultLimit(Written::as_is(tokens))),
        }
    }

    /// The budget in tokens.
    pub const fn tokens(self) -> u64 {
        self.0.get()
    }

    /// The budget in bytes of text ([`BYTES_PER_TOKEN`] per token).
    pub fn bytes(self) -> usize {
        usize::try_from(bytes_in(self.tokens())).unwrap_or(usize::MAX)
    }
}

impl Default for ResultLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A value that is no result budget: not a whole number of tokens, or
/// fewer than [`ResultLimit::MIN`]. Its text is the one refusal of a
/// result budget, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::result_limit_refused(&self.0, ResultLimit::MIN.tokens(), ResultLimit::DEFAULT.tokens()))]
pub struct InvalidResultLimit(Written);

impl Bounded for ResultLimit {
    type Error = InvalidResultLimit;

    fn from_whole(value: u64) -> Result<Self, InvalidResultLimit> {
        Self::new(value)
    }

    fn refuse(written: Written) -> InvalidResultLimit {
        InvalidResultLimit(written)
    }

    fn whole(&self) -> u64 {
        self.tokens()
    }
}

impl FromStr for ResultLimit {
    type Err = InvalidResultLimit;

    fn from_str(text: &str) -> Result<Self, InvalidResultLimit> {
        setting::parse(text)
    }
}

impl<'de> Deserialize<'de> for ResultLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        setting::deserialize(deserializer)
    }
}

impl Serialize for ResultLimit {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        setting::serialize(self, serializer)
    }
}

/// The size of a text: its UTF-8 bytes and its characters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TextSize {
    /// UTF-8 bytes.
    pub bytes: u64,
    /// Characters (Unicode scalar values): what offsets and notices count.
    pub chars: u64,
}

impl TextSize {
    /// The size of `text` (linear in its length).
    pub fn of(text: &str) -> Self {
        Self {
            bytes: text.len() as u64,
            chars: text.chars().count() as u64,
        }
    }

    fn plus(self, other: Self) -> Self {
        Self {
            bytes: self.bytes + other.bytes,
            chars: self.chars + other.chars,
        }
    }
}

/// Where the rest of a cut text can be read: the tool, and the task whose
/// kept text it pages through with an `offset` in characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PagedRead {
    tool: Cow<'static, str>,
    task_id: String,
}

impl PagedRead {
    /// Read with `tool` (`task_output`) on the task `task_id`.
    pub fn new(tool: impl Into<Cow<'static, str>>, task_id: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            task_id: task_id.into(),
        }
    }

    /// The tool that reads on.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The task whose text it reads.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The exact call that reads from `offset`, as a notice quotes it:
    /// `task_output {"task_id": "subagent-7", "offset": 16000}`.
    pub fn call(&self, offset: u64) -> String {
        wording::paged_read_call(&self.tool, &self.task_id, offset)
    }
}

/// Which parts of the full text a cut output shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Shown {
    /// The start and the end, with the notice between them.
    HeadTail {
        /// The start of the text that is shown.
        head: TextSize,
        /// The end of the text that is shown.
        tail: TextSize,
    },
    /// One page from a character offset, with a notice after it when more
    /// of the text follows.
    Page {
        /// The offset, in characters, the page starts at.
        start: u64,
        /// What the page shows.
        page: TextSize,
    },
    /// Nothing: the room was below [`SMALLEST_USEFUL_SHARE`], so the output
    /// is its notice alone, which names the characters dropped (from
    /// `start` to `end`) and, when the full text is kept, the call that
    /// reads them.
    Dropped {
        /// The offset, in characters, of the first character dropped.
        start: u64,
        /// The offset, in characters, after the last character dropped.
        end: u64,
    },
}

impl Shown {
    /// How much of the full text is shown.
    pub fn size(&self) -> TextSize {
        match *self {
            Self::HeadTail { head, tail } => head.plus(tail),
            Self::Page { page, .. } => page,
            Self::Dropped { .. } => TextSize::default(),
        }
    }
}

/// How an output was cut: the full text's size, what of it is shown, where
/// the rest can be read, and where the shown parts sit in the output's text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cut {
    /// The size of the full text.
    pub full: TextSize,
    /// What of it the output shows.
    pub shown: Shown,
    /// Where the rest can be read, when the full text is kept.
    pub read: Option<PagedRead>,
    layout: Layout,
}

/// Byte positions in the output's text: `text[..start]` is a fixed prefix
/// (an error's `Error: `, say), `text[start..notice]` the head or the page,
/// `text[notice..tail]` the notice, `text[tail..end]` the tail (empty for a
/// page), and `text[end..]` a fixed suffix (a task's status line, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Layout {
    start: usize,
    notice: usize,
    tail: usize,
    end: usize,
}

/// The key under which protocols that carry metadata (MCP results, ACP
/// tool call updates) describe a cut result ([`Cut::summary`]).
pub const CUT_META_KEY: &str = "dsh/resultCut";

impl Cut {
    /// The cut as protocol metadata: the full text's size and the size
    /// shown, in bytes and characters, and the task that keeps the rest:
    /// `{"fullBytes": …, "fullChars": …, "shownBytes": …, "shownChars": …, "taskId": "subagent-7"}`
    /// (`taskId` absent when the rest is not kept).
    pub fn summary(&self) -> serde_json::Value {
        let shown = self.shown.size();
        let mut summary = serde_json::json!({
            "fullBytes": self.full.bytes,
            "fullChars": self.full.chars,
            "shownBytes": shown.bytes,
            "shownChars": shown.chars,
        });
        if let (Some(read), Some(object)) = (&self.read, summary.as_object_mut()) {
            object.insert("taskId".to_owned(), read.task_id().into());
        }
        summary
    }

    /// The cut of a text that `prefix_bytes` bytes were put in front of.
    #[must_use]
    pub(crate) fn after_prefix(mut self, prefix_bytes: usize) -> Self {
        self.layout.start += prefix_bytes;
        self.layout.notice += prefix_bytes;
        self.layout.tail += prefix_bytes;
        self.layout.end += prefix_bytes;
        self
    }
}

/// A cut text: what the model reads, and how it was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// The text the model reads.
    pub text: String,
    /// How it was cut.
    pub cut: Cut,
}

impl Excerpt {
    /// The excerpt with `suffix` after it: a fixed line that is not part of
    /// the cut text (a task's status line, say). A later [`recut`] keeps it
    /// whole, so the notice's numbers still count the cut text alone.
    #[must_use]
    pub fn followed_by(mut self, suffix: &str) -> Self {
        self.text.push_str(suffix);
        self
    }
}

/// `text` cut to at most `allowance` bytes: its head, one notice, and its
/// tail. `None` when the whole text fits (it is then shown unchanged).
///
/// The notice is counted within the allowance, and head and tail share what
/// it leaves equally. When that is less than [`SMALLEST_USEFUL_SHARE`], the
/// output is a notice alone that says the whole text was dropped
/// ([`Shown::Dropped`]); it can then be longer than `allowance`, but never
/// longer than `text`: a text shorter than any notice that could replace
/// it is shown unchanged (`None`).
pub fn head_and_tail(text: &str, allowance: usize, read: Option<PagedRead>) -> Option<Excerpt> {
    if text.len() <= allowance {
        return None;
    }
    let excerpt = cut_ends("", Ends::Whole(text), TextSize::of(text), allowance, read);
    (excerpt.text.len() < text.len()).then_some(excerpt)
}

/// One page of `text`: from character `start`, at most `allowance` bytes
/// including the notice that follows when more remains.
///
/// `None` when `start` is past the end. A page that reaches the end has no
/// notice. A page that does not always shows at least one character, even
/// when its notice leaves no room for it, so that following the notices
/// always reaches the end.
pub fn page(text: &str, start: u64, allowance: usize, read: PagedRead) -> Option<Excerpt> {
    let full = TextSize::of(text);
    if start > full.chars {
        return None;
    }
    let from = byte_of_char(text, start);
    Some(page_of("", &text[from..], start, full, allowance, read, Paging::Read))
}

/// Whether a page is read (it must move on) or cut again to fit (it may be
/// dropped to its notice).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paging {
    /// A page read from its offset: it shows at least one character.
    Read,
    /// A page shown before, cut again: below [`SMALLEST_USEFUL_SHARE`] it
    /// is dropped to its notice.
    Recut,
}

/// The page of `rest` (the full text from character `start` on, or a page
/// of it shown before), `prefix` in front.
fn page_of(
    prefix: &str,
    rest: &str,
    start: u64,
    full: TextSize,
    allowance: usize,
    read: PagedRead,
    paging: Paging,
) -> Excerpt {
    let room = allowance.saturating_sub(prefix.len());
    let rest_chars = TextSize::of(rest).chars;
    let last = start + rest_chars == full.chars;
    let (shown, notice) = if rest.len() <= room && last {
        (rest, String::new())
    } else {
        // The longest notice this page can have: each of its three other
        // numbers (start, end, the offset) as long as the total.
        let notice_room = wording::page_notice(0, 0, full.chars, &read.call(0)).len() + 3 * longer_by(full.chars);
        let text_room = room.saturating_sub(notice_room);
        if paging == Paging::Recut && text_room < SMALLEST_USEFUL_SHARE {
            return dropped(prefix, full, start, start + rest_chars, Some(read));
        }
        // At least one character: a page always moves on.
        let first = rest.chars().next().map_or(0, char::len_utf8);
        let end = floor_char_boundary(rest, text_room).max(first);
        let shown = &rest[..end];
        let end = start + TextSize::of(shown).chars;
        (shown, wording::page_notice(start, end, full.chars, &read.call(end)))
    };
    let text = [prefix, shown, &notice].concat();
    let layout = Layout {
        start: prefix.len(),
        notice: prefix.len() + shown.len(),
        tail: text.len(),
        end: text.len(),
    };
    Excerpt {
        text,
        cut: Cut {
            full,
            shown: Shown::Page {
                start,
                page: TextSize::of(shown),
            },
            read: Some(read),
            layout,
        },
    }
}

/// The notice alone, `prefix` in front: characters `start` to `end` of a
/// text of size `full` were dropped, and where they can be read.
fn dropped(prefix: &str, full: TextSize, start: u64, end: u64, read: Option<PagedRead>) -> Excerpt {
    let call = read.as_ref().map(|read| read.call(start));
    let notice = wording::dropped_notice(start, end, full.chars, call.as_deref());
    let text = [prefix, &notice].concat();
    let layout = Layout {
        start: prefix.len(),
        notice: prefix.len(),
        tail: text.len(),
        end: text.len(),
    };
    Excerpt {
        text,
        cut: Cut {
            full,
            shown: Shown::Dropped { start, end },
            read,
            layout,
        },
    }
}

/// What a head-and-tail cut takes its two ends from.
#[derive(Clone, Copy)]
enum Ends<'a> {
    /// The whole text: a first cut.
    Whole(&'a str),
    /// The head and the tail an earlier cut showed.
    Parts { head: &'a str, tail: &'a str },
}

/// Cuts a text whose size is `full` to `allowance` bytes, `prefix` in
/// front: its head, the notice, its tail.
fn cut_ends(prefix: &str, ends: Ends<'_>, full: TextSize, allowance: usize, read: Option<PagedRead>) -> Excerpt {
    // The longest notice this cut can have: each of its four other numbers
    // (head, tail, shown, the offset) as long as the total.
    let call = |offset| read.as_ref().map(|read| read.call(offset));
    let notice_room = wording::cut_notice(0, 0, full.chars, call(0).as_deref()).len() + 4 * longer_by(full.chars);
    let room = allowance.saturating_sub(prefix.len() + notice_room);
    if room < SMALLEST_USEFUL_SHARE {
        return dropped(prefix, full, 0, full.chars, read);
    }
    let head_room = room / 2;
    let tail_room = room - head_room;
    let (head, tail) = match ends {
        Ends::Whole(text) => (text, text),
        Ends::Parts { head, tail } => (head, tail),
    };
    // Within the allowance, so the two ends of a whole text never overlap.
    let kept_head = &head[..floor_char_boundary(head, head_room)];
    let kept_tail = &tail[ceil_char_boundary(tail, tail.len().saturating_sub(tail_room))..];
    let head_size = TextSize::of(kept_head);
    let tail_size = TextSize::of(kept_tail);
    let notice = wording::cut_notice(
        head_size.chars,
        tail_size.chars,
        full.chars,
        call(head_size.chars).as_deref(),
    );
    let text = [prefix, kept_head, &notice, kept_tail].concat();
    let layout = Layout {
        start: prefix.len(),
        notice: prefix.len() + kept_head.len(),
        tail: prefix.len() + kept_head.len() + notice.len(),
        end: text.len(),
    };
    Excerpt {
        text,
        cut: Cut {
            full,
            shown: Shown::HeadTail {
                head: head_size,
                tail: tail_size,
            },
            read,
            layout,
        },
    }
}

/// `text` (an output, cut before or not) cut further to at most `allowance`
/// bytes. `None` when it fits as it is, or when no cut of it would be
/// shorter: a cut never makes a text longer.
///
/// A text cut before keeps its fixed prefix and suffix, shows a shorter head
/// and tail (or a shorter page) of the same full text, and keeps its paged
/// read, so its notice still says how to read everything left out. Below
/// [`SMALLEST_USEFUL_SHARE`] it is dropped to its notice alone
/// ([`Shown::Dropped`]), and a dropped text is not cut again. A text not
/// cut before is cut with [`head_and_tail`] and no paged read.
pub fn recut(text: &str, cut: Option<&Cut>, allowance: usize) -> Option<Excerpt> {
    if text.len() <= allowance {
        return None;
    }
    let Some(cut) = cut else {
        return head_and_tail(text, allowance, None);
    };
    let Layout {
        start,
        notice,
        tail,
        end,
    } = cut.layout;
    let (Some(prefix), Some(shown), Some(ends), Some(suffix)) = (
        text.get(..start),
        text.get(start..notice),
        text.get(tail..end),
        text.get(end..),
    ) else {
        // Not the text this cut describes: cut it as a new one.
        return head_and_tail(text, allowance, None);
    };
    let room = allowance.saturating_sub(suffix.len());
    let excerpt = match (cut.shown, cut.read.clone()) {
        (Shown::Page { start: offset, .. }, Some(read)) => {
            page_of(prefix, shown, offset, cut.full, room, read, Paging::Recut)
        }
        (Shown::HeadTail { .. }, read) => cut_ends(
            prefix,
            Ends::Parts {
                head: shown,
                tail: ends,
            },
            cut.full,
            room,
            read,
        ),
        // Nothing shorter says what was dropped.
        (Shown::Dropped { .. }, _) => return None,
        // A page always has a paged read; without one, cut what is there.
        (Shown::Page { .. }, None) => return head_and_tail(text, allowance, None),
    }
    .followed_by(suffix);
    (excerpt.text.len() < text.len()).then_some(excerpt)
}

/// How many more digits `number` has than `0`.
fn longer_by(number: u64) -> usize {
    number.checked_ilog10().unwrap_or(0) as usize
}

/// The byte index of character `chars` of `text` (its length past the end).
pub fn byte_of_char(text: &str, chars: u64) -> usize {
    usize::try_from(chars)
        .ok()
        .and_then(|chars| text.char_indices().nth(chars))
        .map_or(text.len(), |(index, _)| index)
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index.min(text.len())
}

/// How much of each of one turn's results fits: the allowance of each, in
/// tokens, in the results' order.
///
/// The room is the `window` less the `reserve` kept for the answer and the
/// `estimate` of the request without these results. When every result fits,
/// each keeps its size. Otherwise the room is shared by water-filling: small
/// results stay whole, and the large ones get an equal share of what the
/// small ones leave. No allowance is below the smaller of its result's size
/// and a fair share (the room over the number of results), and together they
/// never exceed the room.
///
/// ```
/// use dsh_tools::budget::fit;
/// // 10,000 tokens of room for four results: the small one stays whole,
/// // the three large ones share the rest equally.
/// assert_eq!(fit(20_000, 4_000, 6_000, &[1_000, 500_000, 500_000, 500_000]), [1_000, 3_000, 3_000, 3_000]);
/// ```
pub fn fit(window: u64, reserve: u64, estimate: u64, sizes: &[u64]) -> Vec<u64> {
    let room = window.saturating_sub(reserve).saturating_sub(estimate);
    let total = sizes.iter().fold(0u64, |sum, size| sum.saturating_add(*size));
    if total <= room {
        return sizes.to_vec();
    }
    // The level: the largest allowance such that the results, each cut to
    // it, fit the room. Walk the sizes from the smallest; each that fits
    // under an equal share of what is left stays whole.
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&index| sizes[index]);
    let mut left = room;
    let mut remaining = sizes.len() as u64;
    let mut level = 0;
    let mut whole = 0;
    for &index in &order {
        let share = left / remaining;
        if sizes[index] > share {
            level = share;
            break;
        }
        left -= sizes[index];
        remaining -= 1;
        whole += 1;
    }
    // What the level's rounding leaves goes, a token each, to the first
    // results cut to the level, in the results' own order.
    let cut = sizes.len() - whole;
    let mut spare = left - level * cut as u64;
    sizes
        .iter()
        .map(|&size| {
            if size <= level {
                size
            } else if spare > 0 {
                spare -= 1;
                level + 1
            } else {
                level
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
