//! How a stream ended before the model said it had finished.

/// How a stream ended before the model reported that it had finished
/// ([`LlmError::StreamEnded`](crate::LlmError::StreamEnded)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamCut {
    /// `data: [DONE]` arrived, and no finish reason before it.
    Done,
    /// The server ended its answer (closed the stream, or sent a whole
    /// answer) without a finish reason.
    Closed,
    /// The connection failed mid-stream; the transport's error.
    Broken(String),
}
