//! The events an exchange heard while it ran (events level), logged as
//! bytes one after another, so that logging a text delta, nearly every
//! event of a stream, is one copy into one buffer: no entry per event
//! beside it, and nothing a thread other than the stream's allocated.
//!
//! An entry starts with a tag byte:
//! - below [`LONG_TEXT`]: a text delta of that many bytes, which follow;
//! - [`LONG_TEXT`]: a text delta whose length (u64, little-endian)
//!   follows, then its bytes;
//! - [`OTHER`]: any other event, the next of the exchange's other events
//!   (the first `OTHER` is the first of them, and so on);
//! - [`TIME`]: a time (u64, milliseconds since the exchange began), which
//!   holds for the entries after it, until the next.
//!
//! The tape lives only in memory, between the stream and the writer; the
//! cassette's format is unchanged by it.

/// The tag of a text delta too long for its length to be its tag.
const LONG_TEXT: u8 = 0xFD;
/// The tag of an event that is not a text delta.
const OTHER: u8 = 0xFE;
/// The tag of a time.
const TIME: u8 = 0xFF;

/// One exchange's events, as they were heard. Its buffer is kept when it
/// is cleared, for the next exchange.
#[derive(Debug, Default)]
pub(crate) struct Tape {
    bytes: Vec<u8>,
    /// The time the entries now being logged were heard at (`None`: no
    /// time on the tape yet).
    at: Option<u64>,
}

/// An entry read back from a [`Tape`].
#[derive(Debug, PartialEq)]
pub(crate) enum Entry<'a> {
    /// A text delta, heard at the latest [`Entry::Time`] before it.
    Text(&'a str),
    /// Another event: its index among the exchange's other events.
    Other(usize),
    /// The time, in milliseconds since the exchange began, that the
    /// entries after it were heard at.
    Time(u64),
}

impl Tape {
    /// Logs a text delta heard `t_ms` after the exchange began.
    pub(crate) fn text(&mut self, t_ms: u64, text: &str) {
        self.time(t_ms);
        match u8::try_from(text.len()) {
            Ok(short) if short < LONG_TEXT => {
                self.bytes.reserve(1 + text.len());
                self.bytes.push(short);
            }
            _ => {
                self.bytes.push(LONG_TEXT);
                self.bytes.extend_from_slice(&(text.len() as u64).to_le_bytes());
            }
        }
        self.bytes.extend_from_slice(text.as_bytes());
    }

    /// Logs another event, heard `t_ms` after the exchange began: the next
    /// of the exchange's other events.
    pub(crate) fn other(&mut self, t_ms: u64) {
        self.time(t_ms);
        self.bytes.push(OTHER);
    }

    /// A time entry, where the time changed.
    fn time(&mut self, t_ms: u64) {
        if self.at != Some(t_ms) {
            self.at = Some(t_ms);
            self.bytes.push(TIME);
            self.bytes.extend_from_slice(&t_ms.to_le_bytes());
        }
    }

    /// The entries, in the order they were logged.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Entry<'_>> {
        let mut rest = self.bytes.as_slice();
        let mut others = 0..;
        std::iter::from_fn(move || {
            let (&tag, after) = rest.split_first()?;
            rest = after;
            match tag {
                TIME => number(&mut rest).map(Entry::Time),
                OTHER => others.next().map(Entry::Other),
                LONG_TEXT => {
                    let len = number(&mut rest)?;
                    text(&mut rest, usize::try_from(len).ok()?)
                }
                short => text(&mut rest, usize::from(short)),
            }
        })
    }

    /// Empties it, keeping its buffer.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.at = None;
    }

    /// The bytes its buffer holds.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

/// The first `len` bytes of `rest`, taken off it, as text (every text on a
/// tape was a whole `&str`).
fn text<'a>(rest: &mut &'a [u8], len: usize) -> Option<Entry<'a>> {
    let (text, after) = rest.split_at_checked(len)?;
    *rest = after;
    std::str::from_utf8(text).ok().map(Entry::Text)
}

/// The u64 at the start of `rest`, taken off it.
fn number(rest: &mut &[u8]) -> Option<u64> {
    let (number, after) = rest.split_first_chunk::<8>()?;
    *rest = after;
    Some(u64::from_le_bytes(*number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_as_they_were_logged() {
        let short = "x".repeat(usize::from(LONG_TEXT) - 1);
        let long = "y".repeat(usize::from(LONG_TEXT));
        let wide = "é".repeat(200);
        let mut tape = Tape::default();
        for round in 0..2 {
            tape.clear();
            tape.text(0, "");
            tape.text(0, &short);
            tape.other(0);
            tape.text(3, &long);
            tape.text(3, &wide);
            tape.other(9);
            tape.text(u64::MAX, "late");
            let entries: Vec<Entry<'_>> = tape.entries().collect();
            assert_eq!(
                entries,
                [
                    Entry::Time(0),
                    Entry::Text(""),
                    Entry::Text(&short),
                    Entry::Other(0),
                    Entry::Time(3),
                    Entry::Text(&long),
                    Entry::Text(&wide),
                    Entry::Time(9),
                    Entry::Other(1),
                    Entry::Time(u64::MAX),
                    Entry::Text("late"),
                ],
                "round {round}"
            );
        }
    }

    #[test]
    fn a_text_delta_costs_one_byte_beside_its_text() {
        let mut tape = Tape::default();
        tape.text(5, "hello ");
        let first = tape.bytes.len();
        tape.text(5, "world");
        assert_eq!(tape.bytes.len() - first, 1 + "world".len());
    }

    #[test]
    fn a_torn_tape_ends_its_entries_without_a_panic() {
        let mut tape = Tape::default();
        tape.text(1, "whole");
        tape.text(1, &"z".repeat(300));
        let whole: Vec<Entry<'_>> = tape.entries().collect();
        for cut in 0..tape.bytes.len() {
            let torn = Tape {
                bytes: tape.bytes[..cut].to_vec(),
                at: None,
            };
            let entries: Vec<Entry<'_>> = torn.entries().collect();
            assert!(entries.len() <= whole.len());
            assert_eq!(entries[..], whole[..entries.len()], "cut at {cut}");
        }
    }
}
