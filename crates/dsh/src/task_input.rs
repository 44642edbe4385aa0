//! The task of `dsh run`: an argument, standard input (`-`) or a file
//! (`--task-file`), read whole and checked the same way wherever it came
//! from, before anything starts.

use std::fmt;
use std::io::Read;
use std::path::PathBuf;

use crate::wording;

/// The longest task, in bytes: 4 MiB. That is about a million tokens of 4
/// bytes, more than a model's context window holds, and the most `dsh mcp`
/// reads in one request. Reading stops there, so standard input that never
/// ends costs no more than this.
pub(crate) const MAX_TASK_BYTES: usize = 4 * 1024 * 1024;

/// Where the task comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TaskSource {
    /// The command line's own argument, as given.
    Argument(String),
    /// Standard input (the argument `-`), read to its end.
    Stdin,
    /// A file (`--task-file`), read whole.
    File(PathBuf),
}

impl TaskSource {
    /// The source `dsh run`'s arguments name: `-` reads standard input,
    /// `--task-file` a file, any other argument is the task itself. Clap
    /// requires exactly one of the two; with neither, the task is empty
    /// (and refused as such).
    pub(crate) fn new(argument: Option<String>, file: Option<PathBuf>) -> Self {
        match (argument, file) {
            (_, Some(path)) => Self::File(path),
            (Some(argument), None) if argument == "-" => Self::Stdin,
            (argument, None) => Self::Argument(argument.unwrap_or_default()),
        }
    }

    /// Reads the task (from `stdin` for [`TaskSource::Stdin`]) and checks
    /// it: UTF-8 text, not empty, at most [`MAX_TASK_BYTES`]. From standard
    /// input or a file, the trailing line endings go, as the shell's
    /// `"$(cat FILE)"` drops them. The error is the stderr line that names
    /// what was wrong.
    pub(crate) fn read(&self, stdin: impl Read) -> Result<String, String> {
        let bytes = match self {
            Self::Argument(text) => return checked(self, text.clone()),
            Self::Stdin => read_at_most(stdin),
            Self::File(path) => std::fs::File::open(path).and_then(read_at_most),
        }
        .map_err(|error| wording::task_unreadable(self, &error))?;
        if bytes.len() > MAX_TASK_BYTES {
            return Err(wording::task_too_large(self, MAX_TASK_BYTES));
        }
        let mut text =
            String::from_utf8(bytes).map_err(|error| wording::task_not_utf8(self, error.utf8_error().valid_up_to()))?;
        let kept = text.trim_end_matches(['\n', '\r']).len();
        text.truncate(kept);
        checked(self, text)
    }
}

impl fmt::Display for TaskSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Argument(_) => f.write_str("the task argument"),
            Self::Stdin => f.write_str("the task on standard input"),
            Self::File(path) => write!(f, "the task file {}", path.display()),
        }
    }
}

/// At most one byte more than a task may hold: enough to tell it is too
/// large without reading an endless input.
fn read_at_most(reader: impl Read) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.take(MAX_TASK_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The checks every source shares: not over the limit, not empty.
fn checked(source: &TaskSource, text: String) -> Result<String, String> {
    if text.len() > MAX_TASK_BYTES {
        return Err(wording::task_too_large(source, MAX_TASK_BYTES));
    }
    if text.trim().is_empty() {
        return Err(wording::task_empty(source));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn read(source: &TaskSource, stdin: &[u8]) -> Result<String, String> {
        source.read(stdin)
    }

    #[test]
    fn the_argument_dash_and_the_file_flag_name_the_source() {
        assert_eq!(TaskSource::new(Some("-".into()), None), TaskSource::Stdin);
        assert_eq!(
            TaskSource::new(Some("do it".into()), None),
            TaskSource::Argument("do it".into())
        );
        assert_eq!(
            TaskSource::new(None, Some("task.md".into())),
            TaskSource::File("task.md".into())
        );
        assert_eq!(TaskSource::new(None, None), TaskSource::Argument(String::new()));
    }

    #[test]
    fn every_source_gives_the_same_task() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.md");
        std::fs::write(&path, "Summarize the README.\n").unwrap();
        let argument = TaskSource::Argument("Summarize the README.".into());
        assert_eq!(read(&argument, b"ignored").unwrap(), "Summarize the README.");
        assert_eq!(
            read(&TaskSource::Stdin, b"Summarize the README.\r\n\n").unwrap(),
            "Summarize the README."
        );
        assert_eq!(read(&TaskSource::File(path), b"").unwrap(), "Summarize the README.");
        // Inner lines and leading space are the task's own.
        assert_eq!(
            read(&TaskSource::Stdin, b"  line one\n\nline two\n").unwrap(),
            "  line one\n\nline two"
        );
    }

    #[test]
    fn a_task_of_the_limit_is_read_and_one_byte_more_is_refused() {
        let at_limit = vec![b'a'; MAX_TASK_BYTES];
        assert_eq!(read(&TaskSource::Stdin, &at_limit).unwrap().len(), MAX_TASK_BYTES);
        let over = vec![b'a'; MAX_TASK_BYTES + 1];
        assert!(
            read(&TaskSource::Stdin, &over)
                .unwrap_err()
                .contains("larger than 4 MiB")
        );
        let argument = TaskSource::Argument("a".repeat(MAX_TASK_BYTES + 1));
        assert!(read(&argument, b"").unwrap_err().contains("larger than 4 MiB"));
    }

    #[test]
    fn an_endless_input_is_read_only_to_the_limit() {
        let endless = std::io::repeat(b'a');
        let error = TaskSource::Stdin.read(endless).unwrap_err();
        assert!(error.contains("larger than 4 MiB"), "{error}");
    }

    #[test]
    fn bad_input_is_refused_naming_what_was_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TaskSource::File(std::path::Path::new("/nonexistent/dsh/task.md").to_owned());
        let directory = TaskSource::File(dir.path().to_owned());
        let lines = [
            read(&TaskSource::Argument(String::new()), b"").unwrap_err(),
            read(&TaskSource::Argument(" \n ".into()), b"").unwrap_err(),
            read(&TaskSource::Stdin, b"").unwrap_err(),
            read(&TaskSource::Stdin, b"\n\n").unwrap_err(),
            read(&TaskSource::Stdin, b"caf\xe9 au lait").unwrap_err(),
            read(&TaskSource::Stdin, &vec![b'a'; MAX_TASK_BYTES + 1]).unwrap_err(),
            read(&TaskSource::Argument("a".repeat(MAX_TASK_BYTES + 1)), b"").unwrap_err(),
            read(&missing, b"").unwrap_err(),
        ];
        insta::assert_snapshot!(lines.join("\n"));
        // A directory opens but does not read; its path is a fresh one.
        let error = read(&directory, b"").unwrap_err();
        assert!(
            error.starts_with(&format!("dsh: cannot read the task file {}: ", dir.path().display())),
            "{error}"
        );
    }
}
