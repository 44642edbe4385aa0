//! The lines of a cassette file (JSON Lines), as docs/cassettes.md
//! describes them: a header, then each exchange as a block of lines, then
//! one closing line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::ChatEvent;

/// What the header's `format` says.
pub(crate) const FORMAT: &str = "dsh-cassette";

/// The version this crate writes and reads.
pub const VERSION: u32 = 1;

/// Where a cassette's exchanges were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Level {
    /// At the HTTP exchange of the OpenAI-compatible client: the body as
    /// sent, the status, headers and streamed bytes as they came.
    Http,
    /// At the [`ChatModel`](crate::ChatModel) seam: the request and the
    /// events the model streamed (any model, the scripted one included).
    Events,
}

impl Level {
    /// The spelling in the file (`http`, `events`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Http => "http",
            Level::Events => "events",
        }
    }
}

/// One line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Line {
    /// The first line.
    Header {
        format: String,
        version: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<Level>,
        recorded_by: String,
    },
    /// An exchange begins: what was asked.
    Request {
        id: u64,
        /// Milliseconds since the recording began.
        at_ms: u64,
        /// The recorded model's default model name.
        model: String,
        /// The endpoint (HTTP level only), without credentials.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// The request body as sent (the OpenAI wire JSON).
        body: Value,
    },
    /// The response's head (HTTP level).
    Status {
        id: u64,
        /// Milliseconds since the request was sent.
        t_ms: u64,
        status: u16,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
    },
    /// A piece of the response body as it arrived (HTTP level): `text`
    /// when it is UTF-8, else `hex`.
    Chunk {
        id: u64,
        t_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hex: Option<String>,
    },
    /// An event the model streamed (events level).
    Event { id: u64, t_ms: u64, event: ChatEvent },
    /// How the exchange ended.
    End { id: u64, t_ms: u64, outcome: Outcome },
    /// The last line: the recording ended and is whole.
    Finish {
        exchanges: u64,
        /// The parts other processes of the run recorded beside it
        /// (`FILE.part-<n>`, by file name), read with it as one.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<String>,
    },
    /// The last line of a recording stopped before its run ended (a
    /// signal, or the harness gave up): what ended before is kept, and
    /// replay refuses it with the reason.
    Interrupted {
        exchanges: u64,
        reason: String,
        /// As [`Line::Finish`]'s.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<String>,
    },
}

/// How an exchange ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Outcome {
    /// The answer ended normally (the body, or the event stream, ended).
    Complete,
    /// The body stopped with this transport error (a cut stream).
    Cut(String),
    /// No answer came: the connection failed, or connecting timed out.
    Failed(Failure),
    /// The caller stopped reading (cancelled, or its own timeout fired).
    Dropped,
    /// The model's stream ended with this error (events level).
    Error(super::error_record::RecordedError),
}

/// Why no HTTP answer came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Failure {
    /// The connect timeout elapsed.
    ConnectTimeout,
    /// The connection failed (the transport's message).
    Connection(String),
}

/// The first line of a cassette of `level`.
pub(crate) fn header(level: Level) -> Line {
    Line::Header {
        format: FORMAT.to_owned(),
        version: VERSION,
        level: Some(level),
        recorded_by: concat!("dsh-llm ", env!("CARGO_PKG_VERSION")).to_owned(),
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The bytes of lowercase or uppercase hex; `None` if it is not hex.
pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let bytes = [0u8, 0xff, 0xc3, 0x10];
        assert_eq!(to_hex(&bytes), "00ffc310");
        assert_eq!(from_hex("00ffc310").unwrap(), bytes);
        assert_eq!(from_hex("0"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn lines_read_as_they_are_documented() {
        let line = Line::End {
            id: 3,
            t_ms: 12,
            outcome: Outcome::Cut("connection reset".into()),
        };
        let text = serde_json::to_string(&line).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"end","id":3,"t_ms":12,"outcome":{"cut":"connection reset"}}"#
        );
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), line);
        let done = serde_json::to_string(&Line::End {
            id: 1,
            t_ms: 0,
            outcome: Outcome::Complete,
        })
        .unwrap();
        assert_eq!(done, r#"{"kind":"end","id":1,"t_ms":0,"outcome":"complete"}"#);
    }
}
