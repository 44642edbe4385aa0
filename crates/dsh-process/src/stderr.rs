//! The last bytes a child wrote to stderr, and how they read as text.

/// The last bytes a child wrote to stderr: at most the spec's bound
/// ([`ChildSpec::stderr_tail_bytes`](crate::ChildSpec::stderr_tail_bytes)),
/// with a count of everything written so a cut tail says so.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StderrTail {
    bytes: Vec<u8>,
    total: u64,
}

impl StderrTail {
    /// Appends `chunk`, keeping only the last `bound` bytes.
    pub(crate) fn push(&mut self, chunk: &[u8], bound: usize) {
        self.total += chunk.len() as u64;
        self.bytes.extend_from_slice(chunk);
        let cut = self.bytes.len().saturating_sub(bound);
        self.bytes.drain(..cut);
    }

    /// The tail as text: lossy UTF-8, terminal escape sequences (colours,
    /// cursor moves, titles) removed, other control characters than newline
    /// and tab replaced, trimmed, and led by `…` when earlier bytes were
    /// cut; `None` when the child wrote nothing but blanks.
    pub fn text(&self) -> Option<String> {
        let text: String = strip_escapes(&String::from_utf8_lossy(&self.bytes))
            .chars()
            .map(|c| {
                if c.is_control() && c != '\n' && c != '\t' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let cut = self.total > self.bytes.len() as u64;
        Some(if cut { format!("…{text}") } else { text.to_owned() })
    }

    /// The last line that is not blank, trimmed, with every control
    /// character replaced by a space: one line to append to a one-line error.
    pub fn last_line(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.bytes);
        let line = text.lines().map(str::trim).rfind(|line| !line.is_empty())?;
        Some(line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect())
    }
}

/// `text` without ANSI/VT escape sequences: CSI (`ESC [ … final`), OSC
/// (`ESC ] … BEL` or `ESC ] … ESC \`) and two-character escapes. A sequence
/// cut off at the end is dropped.
pub fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameter and intermediate bytes, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or the string terminator ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_stripped() {
        assert_eq!(
            strip_escapes("\u{1b}[2m12:00\u{1b}[0m \u{1b}[1;31mERROR\u{1b}[0m boom"),
            "12:00 ERROR boom"
        );
        assert_eq!(
            strip_escapes("\u{1b}]0;title\u{7}text\u{1b}]8;;x\u{1b}\\link"),
            "textlink"
        );
        assert_eq!(strip_escapes("a\u{1b}=b\u{1b}[3"), "ab");
        assert_eq!(strip_escapes("plain\ttext"), "plain\ttext");
    }

    #[test]
    fn the_tail_is_bounded_and_printable() {
        const BOUND: usize = 1024;
        let mut tail = StderrTail::default();
        assert_eq!(tail.text(), None);
        tail.push(b"first\x1b[31m line\x1b[0m\x07\n", BOUND);
        assert_eq!(tail.text().as_deref(), Some("first line"));
        tail.push(&vec![b'x'; BOUND * 3], BOUND);
        let text = tail.text().unwrap_or_default();
        assert!(text.starts_with('…') && text.len() <= BOUND + '…'.len_utf8());
    }

    #[test]
    fn the_last_line_is_the_last_one_not_blank() {
        let mut tail = StderrTail::default();
        assert_eq!(tail.last_line(), None);
        tail.push(b"starting\n  refusing\tto start \n\n  \n", 512);
        assert_eq!(tail.last_line().as_deref(), Some("refusing to start"));
        tail.push(&vec![b'y'; 600], 512);
        assert_eq!(tail.last_line().map(|line| line.len()), Some(512), "cut at the bound");
    }
}
