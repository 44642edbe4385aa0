//! The one error type of this crate.

use std::time::Duration;

use crate::stream_cut::StreamCut;
use crate::wording;

/// Everything that can go wrong when talking to a chat model (real or scripted).
///
/// Messages are written for a human reading an agent's log: they name the
/// HTTP status, the server's own message, the file and JSON path of a bad
/// script, and so on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The caller's cancellation token fired; the request was dropped.
    #[error("{}", wording::CANCELLED)]
    Cancelled,

    /// Invalid configuration (bad base URL, bad header value, HTTP client setup).
    #[error("{}", wording::config(.0))]
    Config(String),

    /// The server answered with a non-success HTTP status.
    ///
    /// `message` is the server's `{"error":{"message":...}}` text when present,
    /// else the start of the raw body.
    #[error("{}", wording::http(*status, url, message, retried_status(*status)))]
    Http {
        /// HTTP status code.
        status: u16,
        /// Request URL (never contains the API key).
        url: String,
        /// The server's error message, or a bounded prefix of the body.
        message: String,
    },

    /// The server refused the request because it does not fit the model's
    /// context window: an HTTP 400 whose body says so in one of the shapes
    /// [`ContextRefusal::recognise`] reads, or the same in a stream's error
    /// event. Sent again it fails the same way, so it is never retried here:
    /// the caller shortens the request (with the window, when the refusal
    /// names it) or stops.
    #[error("{}", wording::context_length(refusal.status, url, &refusal.message))]
    ContextLength {
        /// Request URL (never contains the API key).
        url: String,
        /// What the server said: its message, and the window and the
        /// prompt's size when it named them.
        refusal: ContextRefusal,
    },

    /// The connection could not be made or broke before the response started.
    #[error("{}", wording::connection(url, message))]
    Connection {
        /// Request URL.
        url: String,
        /// Underlying transport error, flattened to text.
        message: String,
    },

    /// A timeout elapsed (`phase` says which one).
    #[error("{}", wording::timeout(*after, phase))]
    Timeout {
        /// What we were waiting for, e.g. "waiting for the response headers".
        phase: &'static str,
        /// The configured limit that elapsed.
        after: Duration,
    },

    /// A streamed event could not be understood (bad JSON, wrong shape).
    #[error("{}", wording::malformed_event(message, data))]
    MalformedEvent {
        /// What was wrong.
        message: String,
        /// The offending event data, truncated to a few hundred bytes.
        data: String,
    },

    /// The server sent an error object inside the event stream.
    #[error("{}", wording::stream_error(.0))]
    StreamError(String),

    /// The stream stopped before the model reported that it had finished:
    /// the server sent `[DONE]` or closed the stream without a finish reason
    /// (llama-cpp-python does so to a stream when another request arrives),
    /// or the connection broke. The answer was cut off, so it is an error,
    /// never an answer: `partial` keeps the text that had streamed.
    ///
    /// [`OpenAiChatModel`](crate::OpenAiChatModel) sends the request again,
    /// as its retry policy allows, while nothing of the stream has reached
    /// the consumer; once something has, the cut is returned.
    #[error("{}", wording::stream_ended(cut, *attempts))]
    StreamEnded {
        /// How the stream ended.
        cut: StreamCut,
        /// How many times the request was sent; 0 when not known (a
        /// [`ChatStream`](crate::ChatStream) that ended without a finish
        /// reason, as [`collect_response`](crate::collect_response) reads it).
        attempts: u32,
        /// The answer's text that had streamed before the cut (empty when
        /// none had). A [`ChatStream`](crate::ChatStream) leaves it empty,
        /// since its consumer already holds every delta;
        /// [`collect_response`](crate::collect_response) fills it in with the
        /// text it collected.
        partial: String,
    },

    /// A scripted-model file could not be loaded.
    #[error("{}", wording::script(source_name, path, message))]
    Script {
        /// File path, or `<inline>` for a string.
        source_name: String,
        /// JSON path inside the script (e.g. `rules[2].when`), `.` for the root.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// No rule of a scripted model matched the request.
    #[error("{}", wording::no_rule_matched(last_message))]
    NoRuleMatched {
        /// A short rendering of the request's last message.
        last_message: String,
    },

    /// A scripted rule asked for an error reply (to test error handling).
    #[error("{}", wording::scripted(.0))]
    Scripted(String),

    /// A replayed cassette holds no answer for this request: the message
    /// names the closest recorded request and the first field where the
    /// two differ. Never retried, never answered from anything else.
    #[error("{}", wording::replay(.0))]
    Replay(String),
}

impl LlmError {
    /// Whether retrying the same request later might succeed: 408, 409, 429
    /// and 5xx statuses, connection failures and first-byte timeouts.
    ///
    /// Any other 4xx is the server rejecting this very request (malformed,
    /// unauthorized, unknown model, …): sent again it fails the same way, so
    /// it is not retried, and its message says so.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => retried_status(*status),
            LlmError::Connection { .. } | LlmError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// A request the server refused because it does not fit the model's
/// context window ([`LlmError::ContextLength`](crate::LlmError::ContextLength)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContextRefusal {
    /// The HTTP status; `None` when the refusal came as an error event of
    /// a stream that had started.
    pub status: Option<u16>,
    /// The server's own message (bounded).
    pub message: String,
    /// The model's context window in tokens, when the server named it.
    pub window: Option<u64>,
    /// The tokens the server counted in the request's prompt, when it said.
    pub prompt_tokens: Option<u64>,
}

/// The HTTP statuses worth retrying, as the OpenAI SDKs choose them: a
/// request timeout (408), a conflict with a lock on the server (409), a rate
/// limit (429), and any server error (5xx).
fn retried_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// Truncates `text` to at most `max` bytes on a char boundary, adding `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate("ééé", 3), "é…");
        assert_eq!(truncate("abcdef", 3), "abc…");
    }

    #[test]
    fn retryable_classification() {
        let http = |status| LlmError::Http {
            status,
            url: String::new(),
            message: String::new(),
        };
        assert!(http(429).is_retryable());
        assert!(http(503).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(!http(401).is_retryable());
        assert!(!LlmError::Cancelled.is_retryable());
        for status in [408, 409, 429, 500, 502, 599] {
            assert!(http(status).is_retryable(), "{status}");
            assert!(!http(status).to_string().contains("not retried"), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422, 499] {
            assert!(!http(status).is_retryable(), "{status}");
            assert!(http(status).to_string().contains("so it was not retried"), "{status}");
        }
    }
}
