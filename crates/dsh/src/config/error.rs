//! A configuration file error: where (file, line, column, key) and what.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Why a configuration file was refused. Rendered as
/// `<file>:<line>:<column>: <key path>: <message>`; nothing starts after one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigFileError {
    path: PathBuf,
    /// 1-based line and column (in characters); absent when the file could not be read.
    position: Option<(usize, usize)>,
    /// The key path, e.g. `subagents[1].max_depth`; empty for the file as a whole.
    key: String,
    message: String,
}

impl ConfigFileError {
    /// An error at a byte range of `text`.
    pub(crate) fn at(path: &Path, text: &str, span: Option<Range<usize>>, key: String, message: String) -> Self {
        Self {
            path: path.to_owned(),
            position: Some(position(text, span.map_or(0, |span| span.start))),
            key,
            message,
        }
    }

    /// The file could not be read at all.
    pub(crate) fn unreadable(path: &Path, error: &std::io::Error) -> Self {
        Self {
            path: path.to_owned(),
            position: None,
            key: String::new(),
            message: crate::wording::config_unreadable(error),
        }
    }
}

/// The 1-based line and column (counted in characters) of a byte offset.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::wording::config_error(
            &self.path,
            self.position,
            &self.key,
            &self.message,
        ))
    }
}

impl std::error::Error for ConfigFileError {}

#[cfg(test)]
mod tests {
    use super::position;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(position(text, 0), (1, 1));
        assert_eq!(position(text, 6), (2, 1));
        assert_eq!(position(text, text.find('=').unwrap_or(0)), (1, 3));
        assert_eq!(position(text, text.rfind('=').unwrap_or(0)), (2, 4));
        assert_eq!(position(text, 1000), (3, 1));
    }
}
