//! A server's refusal of a request for its length, recognised in the error
//! bodies the common OpenAI-compatible servers send.
//!
//! A request longer than the model's context window is refused, not
//! answered, and each server says so its own way:
//!
//! - OpenAI and llama-cpp-python: HTTP 400, `"code": "context_length_exceeded"`,
//!   and a message `This model's maximum context length is N tokens. …`;
//! - vLLM: HTTP 400, `"type": "BadRequestError"`, and a message with
//!   `maximum context length is N tokens` (or, in later releases,
//!   `the model's context length is only N tokens`);
//! - llama.cpp's server: HTTP 400, `"type": "exceed_context_size_error"`,
//!   with the window as `n_ctx` and the prompt's tokens as `n_prompt_tokens`.
//!
//! [`ContextRefusal::recognise`] reads any of these (in an error response's
//! body, or in an error event of a stream), with the window when the server
//! names it and the prompt's size when it counts it, so that an agent loop
//! can learn its window and fit the next request into it.

use serde_json::Value;

use crate::error::{ContextRefusal, truncate};

/// How much of the server's message a refusal keeps.
const MESSAGE_LIMIT: usize = 600;

/// The `code` OpenAI and llama-cpp-python give a request that is too long.
const CODE_CONTEXT_LENGTH: &str = "context_length_exceeded";

/// The `type` llama.cpp's server gives a request that is too long.
const TYPE_EXCEED_CONTEXT: &str = "exceed_context_size_error";

/// Phrases that name the window, each followed by its number of tokens.
const WINDOW_PHRASES: [&str; 3] = [
    // OpenAI, llama-cpp-python, vLLM, DeepSeek.
    "maximum context length is ",
    // vLLM's later input-length check.
    "context length is only ",
    // llama.cpp's message, in case a proxy dropped its fields.
    "exceeds the available context size (",
];

/// Phrases that give the prompt's size, each followed by its number of tokens.
const PROMPT_PHRASES: [&str; 5] = [
    // OpenAI: "However, your messages resulted in N tokens."
    "resulted in ",
    // vLLM: "your prompt contains at least N input tokens", "your request has
    // N input tokens", "You passed N input tokens".
    "contains at least ",
    "request has ",
    "you passed ",
    // llama.cpp: "request (N tokens) exceeds the available context size".
    "request (",
];

/// What follows the prompt's size in llama-cpp-python's and early vLLM's
/// messages: "(N in the messages, M in the completion)", and vLLM's for a
/// request without `max_tokens`: "you requested N tokens in the messages,".
const IN_THE_MESSAGES: [&str; 2] = [" in the messages", " tokens in the messages"];

impl ContextRefusal {
    /// Reads an error body (a response's, with its `status`; or a stream's
    /// error event, `None`) as a refusal for length: the body's `code` is
    /// `context_length_exceeded`, its `type` `exceed_context_size_error`, or
    /// its message names the window (`maximum context length is N tokens`).
    /// `None` for any other error, and for a success or server-error status.
    ///
    /// ```
    /// use dsh_llm::ContextRefusal;
    /// let body = r#"{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}"#;
    /// let refusal = ContextRefusal::recognise(Some(400), body).expect("a refusal for length");
    /// assert_eq!((refusal.window, refusal.prompt_tokens), (Some(8192), Some(13392)));
    /// assert!(ContextRefusal::recognise(Some(400), r#"{"error":{"message":"unknown role"}}"#).is_none());
    /// ```
    pub fn recognise(status: Option<u16>, body: &str) -> Option<Self> {
        if status.is_some_and(|status| !(400..500).contains(&status)) {
            return None;
        }
        let value: Value = serde_json::from_str(body.trim()).ok()?;
        Self::from_value(status, &value)
    }

    /// [`ContextRefusal::recognise`] over a body already parsed.
    pub(crate) fn from_value(status: Option<u16>, value: &Value) -> Option<Self> {
        // `{"error": {...}}` (OpenAI, llama.cpp, recent vLLM), or the error
        // object at the top (early vLLM: `{"object": "error", ...}`).
        let error = match value.get("error") {
            Some(error @ Value::Object(_)) => error,
            Some(Value::String(message)) => return Self::from_message(status, message, None, None, Stated::Not),
            _ => value,
        };
        let text = |key: &str| error.get(key).and_then(Value::as_str);
        let count = |key: &str| error.get(key).and_then(Value::as_u64).filter(|tokens| *tokens > 0);
        let stated = if text("code") == Some(CODE_CONTEXT_LENGTH) || text("type") == Some(TYPE_EXCEED_CONTEXT) {
            Stated::ContextLength
        } else {
            Stated::Not
        };
        let message = text("message").unwrap_or_default();
        Self::from_message(status, message, count("n_ctx"), count("n_prompt_tokens"), stated)
    }

    fn from_message(
        status: Option<u16>,
        message: &str,
        window: Option<u64>,
        prompt_tokens: Option<u64>,
        stated: Stated,
    ) -> Option<Self> {
        let window = window.or_else(|| first_count(message, &WINDOW_PHRASES));
        if stated == Stated::Not && window.is_none() {
            return None;
        }
        Some(Self {
            status,
            message: truncate(message.trim(), MESSAGE_LIMIT),
            window,
            prompt_tokens: prompt_tokens
                .or_else(|| first_count(message, &PROMPT_PHRASES))
                .or_else(|| IN_THE_MESSAGES.iter().find_map(|suffix| count_before(message, suffix))),
        })
    }
}

/// Whether an error object states, by its code or its type, that it is a
/// context-length refusal. One that does not is one only when its message
/// names the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stated {
    /// Its `code` or `type` says so.
    ContextLength,
    /// Neither does (or it has none: a bare message).
    Not,
}

/// The number right after the first of `phrases` found in `message` (case
/// ignored), when a number follows it.
fn first_count(message: &str, phrases: &[&str]) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    phrases.iter().find_map(|phrase| {
        lower
            .match_indices(&phrase.to_ascii_lowercase())
            .find_map(|(at, found)| {
                let rest = &lower[at + found.len()..];
                let digits: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == ',')
                    .filter(char::is_ascii_digit)
                    .collect();
                digits.parse().ok().filter(|tokens| *tokens > 0)
            })
    })
}

/// The number right before `suffix` in `message`, when there is one.
fn count_before(message: &str, suffix: &str) -> Option<u64> {
    let before = &message[..message.find(suffix)?];
    let digits = before.len() - before.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    before[before.len() - digits..]
        .parse()
        .ok()
        .filter(|tokens| *tokens > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenAI's body for a chat request over the window.
    const OPENAI: &str = r#"{"error":{"message":"This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

    /// OpenAI's body when it does not name the window.
    const OPENAI_UNNAMED: &str = r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#;

    /// DeepSeek's: OpenAI's message, with another code.
    const DEEPSEEK: &str = r#"{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

    /// llama-cpp-python's server (its `context_length_exceeded` formatter).
    const LLAMA_CPP_PYTHON: &str = r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 2300 tokens (2044 in the messages, 256 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;

    /// Early vLLM: the error object at the top.
    const VLLM_EARLY: &str = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 6379 tokens (6029 in the messages, 350 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#;

    /// Early vLLM, for a request without `max_tokens` whose prompt
    /// alone fills the window.
    const VLLM_NO_MAX_TOKENS: &str = r#"{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9110 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}"#;

    /// vLLM, when `max_tokens` does not fit beside the prompt.
    const VLLM_MAX_TOKENS: &str = r#"{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None","type":"BadRequestError","param":null,"code":400}}"#;

    /// vLLM's later input-length check.
    const VLLM_INPUT: &str = r#"{"error":{"message":"You passed 9000 input tokens and requested 1024 output tokens. However, the model's context length is only 8192 tokens, resulting in a maximum input length of 7168 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=9000)","type":"BadRequestError","param":"input_tokens","code":400}}"#;

    /// llama.cpp's server.
    const LLAMA_CPP: &str = r#"{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}"#;

    fn read(body: &str) -> Option<(Option<u64>, Option<u64>)> {
        ContextRefusal::recognise(Some(400), body).map(|refusal| (refusal.window, refusal.prompt_tokens))
    }

    #[test]
    fn each_servers_refusal_is_recognised_with_its_window_and_prompt() {
        assert_eq!(read(OPENAI), Some((Some(4097), Some(4294))));
        assert_eq!(read(DEEPSEEK), Some((Some(131_072), Some(122_942))));
        assert_eq!(read(LLAMA_CPP_PYTHON), Some((Some(2048), Some(2044))));
        assert_eq!(read(VLLM_EARLY), Some((Some(4096), Some(6029))));
        assert_eq!(read(VLLM_NO_MAX_TOKENS), Some((Some(8192), Some(9110))));
        assert_eq!(read(VLLM_MAX_TOKENS), Some((Some(4096), Some(2778))));
        assert_eq!(read(VLLM_INPUT), Some((Some(8192), Some(9000))));
        assert_eq!(read(LLAMA_CPP), Some((Some(8192), Some(13392))));
    }

    #[test]
    fn a_refusal_that_names_no_window_is_still_one() {
        assert_eq!(read(OPENAI_UNNAMED), Some((None, None)));
        let refusal = ContextRefusal::recognise(Some(400), OPENAI_UNNAMED).unwrap();
        assert_eq!(
            refusal.message,
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        );
        // llama.cpp's type alone is enough.
        assert_eq!(
            read(r#"{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}"#),
            Some((None, None))
        );
    }

    #[test]
    fn other_errors_are_not_refusals_for_length() {
        for body in [
            r#"{"error":{"message":"Invalid 'messages[1].role': unknown role","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","code":400}}"#,
            r#"{"error":"nope"}"#,
            "<html>bad gateway</html>",
            "",
        ] {
            assert_eq!(read(body), None, "{body}");
        }
        // A refusal's body with a status that is no refusal of the request.
        assert!(ContextRefusal::recognise(Some(500), OPENAI).is_none());
        assert!(ContextRefusal::recognise(Some(200), OPENAI).is_none());
    }

    #[test]
    fn a_stream_error_event_is_read_the_same_way() {
        let refusal = ContextRefusal::recognise(None, LLAMA_CPP).unwrap();
        assert_eq!((refusal.status, refusal.window), (None, Some(8192)));
        let event = r#"{"error":"This model's maximum context length is 8192 tokens."}"#;
        assert_eq!(
            ContextRefusal::recognise(None, event).and_then(|r| r.window),
            Some(8192)
        );
    }

    #[test]
    fn numbers_with_separators_and_no_numbers_are_read_safely() {
        assert_eq!(
            first_count("maximum context length is 131,072 tokens", &WINDOW_PHRASES),
            Some(131_072)
        );
        assert_eq!(first_count("maximum context length is unknown", &WINDOW_PHRASES), None);
        assert_eq!(first_count("maximum context length is 0 tokens", &WINDOW_PHRASES), None);
        assert_eq!(
            first_count(
                "maximum context length is 99999999999999999999999 tokens",
                &WINDOW_PHRASES
            ),
            None
        );
    }
}
