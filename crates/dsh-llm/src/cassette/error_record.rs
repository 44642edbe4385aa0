//! A model's error as a cassette keeps it (events level), so that replay
//! ends the stream with the very [`LlmError`] the model gave.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ContextRefusal, LlmError};
use crate::stream_cut::StreamCut;
use crate::wording;

/// [`LlmError`], variant by variant, in a form that reads and writes as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum RecordedError {
    Cancelled,
    Config(String),
    Http {
        status: u16,
        url: String,
        message: String,
    },
    ContextLength {
        url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_tokens: Option<u64>,
    },
    Connection {
        url: String,
        message: String,
    },
    Timeout {
        phase: String,
        after_ms: u64,
    },
    MalformedEvent {
        message: String,
        data: String,
    },
    StreamError(String),
    StreamEnded {
        cut: RecordedCut,
        attempts: u32,
        partial: String,
    },
    Script {
        source_name: String,
        path: String,
        message: String,
    },
    NoRuleMatched {
        last_message: String,
    },
    Scripted(String),
    Replay(String),
}

/// [`StreamCut`], as a cassette keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum RecordedCut {
    Done,
    Closed,
    Broken(String),
}

impl From<StreamCut> for RecordedCut {
    fn from(cut: StreamCut) -> Self {
        match cut {
            StreamCut::Done => Self::Done,
            StreamCut::Closed => Self::Closed,
            StreamCut::Broken(message) => Self::Broken(message),
        }
    }
}

impl From<RecordedCut> for StreamCut {
    fn from(cut: RecordedCut) -> Self {
        match cut {
            RecordedCut::Done => Self::Done,
            RecordedCut::Closed => Self::Closed,
            RecordedCut::Broken(message) => Self::Broken(message),
        }
    }
}

impl From<&LlmError> for RecordedError {
    fn from(error: &LlmError) -> Self {
        match error.clone() {
            LlmError::Cancelled => Self::Cancelled,
            LlmError::Config(message) => Self::Config(message),
            LlmError::Http { status, url, message } => Self::Http { status, url, message },
            LlmError::ContextLength { url, refusal } => Self::ContextLength {
                url,
                status: refusal.status,
                message: refusal.message,
                window: refusal.window,
                prompt_tokens: refusal.prompt_tokens,
            },
            LlmError::Connection { url, message } => Self::Connection { url, message },
            LlmError::Timeout { phase, after } => Self::Timeout {
                phase: phase.to_owned(),
                after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
            },
            LlmError::MalformedEvent { message, data } => Self::MalformedEvent { message, data },
            LlmError::StreamError(message) => Self::StreamError(message),
            LlmError::StreamEnded { cut, attempts, partial } => Self::StreamEnded {
                cut: cut.into(),
                attempts,
                partial,
            },
            LlmError::Script {
                source_name,
                path,
                message,
            } => Self::Script {
                source_name,
                path,
                message,
            },
            LlmError::NoRuleMatched { last_message } => Self::NoRuleMatched { last_message },
            LlmError::Scripted(message) => Self::Scripted(message),
            LlmError::Replay(message) => Self::Replay(message),
        }
    }
}

impl From<RecordedError> for LlmError {
    fn from(error: RecordedError) -> Self {
        match error {
            RecordedError::Cancelled => LlmError::Cancelled,
            RecordedError::Config(message) => LlmError::Config(message),
            RecordedError::Http { status, url, message } => LlmError::Http { status, url, message },
            RecordedError::ContextLength {
                url,
                status,
                message,
                window,
                prompt_tokens,
            } => LlmError::ContextLength {
                url,
                refusal: ContextRefusal {
                    status,
                    message,
                    window,
                    prompt_tokens,
                },
            },
            RecordedError::Connection { url, message } => LlmError::Connection { url, message },
            RecordedError::Timeout { phase, after_ms } => LlmError::Timeout {
                phase: wording::timeout_phase(&phase),
                after: Duration::from_millis(after_ms),
            },
            RecordedError::MalformedEvent { message, data } => LlmError::MalformedEvent { message, data },
            RecordedError::StreamError(message) => LlmError::StreamError(message),
            RecordedError::StreamEnded { cut, attempts, partial } => LlmError::StreamEnded {
                cut: cut.into(),
                attempts,
                partial,
            },
            RecordedError::Script {
                source_name,
                path,
                message,
            } => LlmError::Script {
                source_name,
                path,
                message,
            },
            RecordedError::NoRuleMatched { last_message } => LlmError::NoRuleMatched { last_message },
            RecordedError::Scripted(message) => LlmError::Scripted(message),
            RecordedError::Replay(message) => LlmError::Replay(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_comes_back_as_it_went() {
        let errors = vec![
            LlmError::Cancelled,
            LlmError::Http {
                status: 429,
                url: "u".into(),
                message: "slow down".into(),
            },
            LlmError::ContextLength {
                url: "u".into(),
                refusal: ContextRefusal {
                    status: Some(400),
                    message: "too long".into(),
                    window: Some(2048),
                    prompt_tokens: None,
                },
            },
            LlmError::Timeout {
                phase: wording::WAITING_FOR_CHUNK,
                after: Duration::from_millis(1500),
            },
            LlmError::StreamEnded {
                cut: StreamCut::Done,
                attempts: 2,
                partial: "half".into(),
            },
            LlmError::StreamEnded {
                cut: StreamCut::Broken("reset".into()),
                attempts: 1,
                partial: String::new(),
            },
            LlmError::Replay("miss".into()),
        ];
        for error in errors {
            let text = serde_json::to_string(&RecordedError::from(&error)).unwrap();
            let back: RecordedError = serde_json::from_str(&text).unwrap();
            assert_eq!(LlmError::from(back), error, "{text}");
        }
    }
}
