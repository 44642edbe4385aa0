//! Every text of the transcript format: the errors of reading one and of
//! locking a tree, how a recorded stop reads, and why a run stopped at its
//! context window.

/// A transcript file that could not be read.
pub(crate) fn transcript_unreadable(path: &std::path::Path, error: &dyn std::fmt::Display) -> String {
    format!("cannot read transcript {}: {error}", path.display())
}

/// A complete transcript line that is not an entry.
pub(crate) fn transcript_corrupt(path: &std::path::Path, line: usize, message: &str) -> String {
    format!("transcript {} line {line} is corrupt: {message}", path.display())
}

/// A transcript whose last line was cut off mid-write.
pub(crate) fn transcript_torn(path: &std::path::Path, line: usize, bytes: usize, intact: usize) -> String {
    format!(
        "transcript {} ends with a torn line {line} ({bytes} bytes, likely a crash mid-write); the {intact} entries before it are intact",
        path.display()
    )
}

/// How [`AgentStop`](crate::AgentStop) reads, as progress lines, transcripts and errors show it.
pub(crate) mod stop {
    /// The model gave its final answer.
    pub(crate) const COMPLETED: &str = "completed";
    /// The model hit its output limit.
    pub(crate) const MAX_TOKENS: &str = "max-tokens";
    /// The model refused.
    pub(crate) const REFUSAL: &str = "refusal";
    /// The run was cancelled.
    pub(crate) const CANCELLED: &str = "cancelled";
    /// The run was stopped resumably (its process is stopping): its turn
    /// stays open, to be resumed.
    pub(crate) const INTERRUPTED: &str = "interrupted";
    /// The agent was interrupted and can no longer be resumed.
    pub(crate) const DISCONNECTED: &str = "disconnected";

    /// The run used up its model calls.
    pub(crate) fn max_turns(limit: u32) -> String {
        format!("max-turns ({limit})")
    }

    /// A model call failed.
    pub(crate) fn error(message: &str) -> String {
        format!("error: {message}")
    }

    /// The model's answer was cut off (the model client's error says how).
    pub(crate) fn answer_cut(message: &str) -> String {
        format!("{}: {message}", super::ANSWER_CUT_STOP)
    }

    /// A token budget was spent before the next model call.
    pub(crate) fn token_budget(limit: u64) -> String {
        format!("token budget of {limit} tokens spent")
    }

    /// The tree's money budget was spent before the next model call.
    pub(crate) fn cost_budget(limit: u64) -> String {
        let limit = dsh_subagent_api::money::amount_text(limit);
        format!("cost budget of {limit} spent")
    }

    /// No request fits the context window: the stop reason, then the line.
    pub(crate) fn context_window(line: &str) -> String {
        format!("{}: {line}", super::CONTEXT_WINDOW_STOP)
    }
}

/// The stop reason of a run whose model's answer was cut off before it
/// finished: what every progress line shows.
pub const ANSWER_CUT_STOP: &str = "answer-cut";

/// The stop reason of a run that found no request fitting its model's
/// context window: what a child's result reads (`subagent run ended
/// abnormally (context-window)`) and what every progress line shows.
pub const CONTEXT_WINDOW_STOP: &str = "context-window";

/// Why a run stopped at its context window, when the loop's estimate of
/// the next request (`request` tokens) exceeds what the `window` holds with
/// `reserve` kept for the answer.
pub(crate) fn context_over(request: u64, window: u64, reserve: u64) -> String {
    format!(
        "the next request needs about {request} tokens, more than the {} that the model's context window of {window} tokens holds once {reserve} are kept for the answer; {CONTEXT_KEPT}",
        window.saturating_sub(reserve)
    )
}

/// Why a run stopped at its context window, when the server refused a
/// request of `size` ([`context_size_counted`] or
/// [`context_size_estimated`]) for its `window` the first time it was sent.
pub(crate) fn context_refused(size: &str, window: u64, reserve: u64) -> String {
    format!(
        "the model's server refused a request of {size} for its context window of {window} tokens ({reserve} kept for the answer); {CONTEXT_KEPT}"
    )
}

/// Why a run stopped at its context window, when the server refused a
/// request of `size` for its `window` again after it had been fitted once
/// more.
pub(crate) fn context_refused_twice(size: &str, window: u64, reserve: u64) -> String {
    format!(
        "the model's server refused a request of {size} for its context window of {window} tokens ({reserve} kept for the answer) a second time, after the request had been fitted to it once more; {CONTEXT_KEPT}"
    )
}

/// Why a run stopped at its context window, when the server refused a
/// request of `size` for its length and named no window.
pub(crate) fn context_refused_unnamed(size: &str) -> String {
    format!(
        "the model's server refused a request of {size} for its length without naming its context window (configure the window, and requests are fitted before they are sent); {CONTEXT_KEPT}"
    )
}

/// A refused request's size by the server's own count.
pub(crate) fn context_size_counted(tokens: u64) -> String {
    format!("{tokens} tokens (the server's count)")
}

/// A refused request's size by the loop's estimate.
pub(crate) fn context_size_estimated(tokens: u64) -> String {
    format!("about {tokens} tokens (estimated)")
}

/// How every context stop's line ends.
const CONTEXT_KEPT: &str = "the run stopped and its transcript is kept";

/// A transcript written by a newer version of the format.
pub(crate) fn transcript_version(path: &std::path::Path, found: u32, known: u32) -> String {
    format!(
        "transcript {} is of format version {found}, and this dsh reads versions up to {known}: it was written by a newer dsh",
        path.display()
    )
}

/// A delegation tree another process runs now.
pub(crate) fn tree_busy(path: &std::path::Path) -> String {
    format!(
        "the delegation tree is busy: another dsh runs it now (it holds {}); wait for it to end, or stop it first",
        path.display()
    )
}

/// A tree's lock file that could not be made or locked.
pub(crate) fn tree_lock_failed(path: &std::path::Path, error: &dyn std::fmt::Display) -> String {
    format!("cannot lock the delegation tree at {}: {error}", path.display())
}
