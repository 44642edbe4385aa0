//! Diagnostics: the protocol faults we catch, JSON-RPC errors the child
//! replied with, and the one text that puts them together with how the child
//! exited (worded by `dsh-process`).

use std::fmt::Display;

/// A stdout line that is not JSON.
pub(crate) const NOT_JSON: &str = "the child wrote a line to stdout that is not JSON";

/// A request for a method we do not serve (`method` is already cut and cleaned).
pub(crate) fn unknown_method(method: &str) -> String {
    format!("the child called an unsupported method \"{method}\"")
}

/// A stdout line over the line bound.
pub(crate) fn line_too_long(limit: usize) -> String {
    format!("the child wrote a protocol line longer than {limit} bytes")
}

/// More answer text than the output bound.
pub(crate) fn output_too_long(limit: usize) -> String {
    format!("the child streamed more than {limit} bytes of answer text")
}

/// Reading the child's stdout failed.
pub(crate) fn read_failed(error: &str) -> String {
    format!("reading the child's stdout failed: {error}")
}

/// A diagnostic: the stage and what happened, then how the child exited and
/// the tail of its stderr when known.
pub(crate) fn diagnostic(stage: &dyn Display, what: &str, exit: Option<&dyn Display>, stderr: Option<&str>) -> String {
    let mut text = format!("ACP stage {stage}: {what}");
    if let Some(exit) = exit {
        text.push_str(&format!(" (child process: {exit})"));
    }
    if let Some(stderr) = stderr {
        text.push_str(&format!("\nchild stderr (tail):\n{stderr}"));
    }
    text
}

/// A JSON-RPC error the child replied with: its code, then its message and
/// data when present and printable.
pub(crate) fn rpc_failure<'a>(code: i32, parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut text = format!("error {code}");
    for part in parts {
        text.push_str(&format!(": {part}"));
    }
    text
}
