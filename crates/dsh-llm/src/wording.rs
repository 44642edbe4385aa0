//! Every text this crate shows a person, in one place: its error messages,
//! what they quote, and its log lines.
//!
//! The rule: [`LlmError`](crate::LlmError)'s `#[error]` attributes and every
//! message built elsewhere in the crate call the items here. Names a program
//! matches stay beside the code: wire JSON keys, finish reasons, roles,
//! environment variable names, template placeholder names, provider names.

use std::fmt::Display;
use std::path::Path;
use std::time::Duration;

use crate::StreamCut;

// ---- LlmError ----

/// [`LlmError::Cancelled`](crate::LlmError::Cancelled).
pub(crate) const CANCELLED: &str = "the model call was cancelled";

/// [`LlmError::Config`](crate::LlmError::Config).
pub(crate) fn config(message: &str) -> String {
    format!("invalid model configuration: {message}")
}

/// [`LlmError::Http`](crate::LlmError::Http), on one line: a status that
/// is not `retried` says the server rejected the request and it was not sent
/// again, with a hint for the statuses a configuration mistake causes.
pub(crate) fn http(status: u16, url: &str, message: &str, retried: bool) -> String {
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let (rejection, hint) = match status {
        _ if retried => return format!("HTTP {status} from {url}: {message}"),
        401 | 403 => (REFUSED, " (check the API key, e.g. DSH_API_KEY)"),
        404 => (REFUSED, " (check the base URL, e.g. DSH_BASE_URL, and the model name)"),
        400..=499 => (MALFORMED, ""),
        _ => return format!("HTTP {status} from {url}: {message}"),
    };
    format!("HTTP {status} from {url}: {message}{hint}; {rejection}, so it was not retried")
}

/// [`LlmError::ContextLength`](crate::LlmError::ContextLength): the
/// server's refusal of a request too long for the model's context window
/// (`status` is `None` for a refusal in a stream's error event).
pub(crate) fn context_length(status: Option<u16>, url: &str, message: &str) -> String {
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let origin = match status {
        Some(status) => format!("HTTP {status} from {url}"),
        None => format!("an error event from {url}"),
    };
    format!("{origin}: {message}; the request does not fit the model's context window, so it was not retried")
}

/// A rejected request whose credentials or address are wrong.
const REFUSED: &str = "the server refused the request";

/// A rejected request the server could not take as it was sent.
const MALFORMED: &str = "the server rejected the request as malformed";

/// [`LlmError::Connection`](crate::LlmError::Connection).
pub(crate) fn connection(url: &str, message: &str) -> String {
    format!("could not reach {url}: {message}")
}

/// [`LlmError::Timeout`](crate::LlmError::Timeout): the limit, then what we waited for.
pub(crate) fn timeout(after: Duration, phase: &str) -> String {
    format!("timed out after {after:?} {phase}")
}

/// [`LlmError::MalformedEvent`](crate::LlmError::MalformedEvent).
pub(crate) fn malformed_event(message: &str, data: &str) -> String {
    format!("malformed stream event: {message}; data: {data}")
}

/// [`LlmError::StreamError`](crate::LlmError::StreamError).
pub(crate) fn stream_error(message: &str) -> String {
    format!("the server reported an error mid-stream: {message}")
}

/// [`LlmError::StreamEnded`](crate::LlmError::StreamEnded): how the
/// stream ended, and how many times the request had been sent (0: not
/// known, for a stream that is not a server's).
pub(crate) fn stream_ended(cut: &StreamCut, attempts: u32) -> String {
    let (why, cut) = match cut {
        StreamCut::Done => ("the server sent [DONE] without a finish reason".to_owned(), SERVER_CUT),
        StreamCut::Closed => (
            "the server ended its answer without a finish reason".to_owned(),
            SERVER_CUT,
        ),
        StreamCut::Broken(error) => (format!("the connection failed mid-stream: {error}"), CUT),
    };
    let sent = match attempts {
        0 => return format!("stream ended before the model finished ({why}): {CUT}"),
        1 => "once".to_owned(),
        _ => format!("{attempts} times"),
    };
    format!("stream ended before the model finished ({why}): {cut}; the request was sent {sent}")
}

/// A cut answer, when the server made the cut.
const SERVER_CUT: &str = "the server cut the answer off";

/// A cut answer, when who made it is not known.
const CUT: &str = "the answer was cut off";

/// [`LlmError::Script`](crate::LlmError::Script).
pub(crate) fn script(source_name: &str, path: &str, message: &str) -> String {
    format!("invalid model script {source_name} at {path}: {message}")
}

/// [`LlmError::NoRuleMatched`](crate::LlmError::NoRuleMatched).
pub(crate) fn no_rule_matched(last_message: &str) -> String {
    format!("no scripted rule matched the request (last message: {last_message})")
}

/// [`LlmError::Scripted`](crate::LlmError::Scripted).
pub(crate) fn scripted(message: &str) -> String {
    format!("scripted error: {message}")
}

/// [`LlmError::Replay`](crate::LlmError::Replay).
pub(crate) fn replay(message: &str) -> String {
    format!("no recorded answer: {message}")
}

// ---- The OpenAI-compatible client ----

/// A base URL that does not parse.
pub(crate) fn base_url_invalid(base: &str, error: &dyn Display) -> String {
    format!("base URL {base:?} is not a valid URL: {error}")
}

/// A base URL with another scheme than HTTP(S).
pub(crate) fn base_url_scheme(base: &str) -> String {
    format!("base URL {base:?} must start with http:// or https://")
}

/// The HTTP client could not be built.
pub(crate) fn client_build_failed(error: &str) -> String {
    format!("could not build the HTTP client: {error}")
}

/// Timeout phase: before the first byte of the response.
pub(crate) const WAITING_FOR_HEADERS: &str = "waiting for the response headers";

/// Timeout phase: while connecting.
pub(crate) const CONNECTING: &str = "connecting";

/// Timeout phase: between two chunks of the stream.
pub(crate) const WAITING_FOR_CHUNK: &str = "waiting for the next chunk of the stream";

/// Timeout phase: reading the body of a whole (not streamed) answer.
pub(crate) const WAITING_FOR_BODY: &str = "reading the whole answer";

/// The timeout phase a cassette names, as one of the phases above (a
/// phase no client names reads as the wait for the next chunk).
pub(crate) fn timeout_phase(phase: &str) -> &'static str {
    [WAITING_FOR_HEADERS, CONNECTING, WAITING_FOR_CHUNK, WAITING_FOR_BODY]
        .into_iter()
        .find(|known| *known == phase)
        .unwrap_or(WAITING_FOR_CHUNK)
}

/// An error status with an empty body and no canonical reason.
pub(crate) const NO_ERROR_MESSAGE: &str = "no error message";

/// Stream bytes that are not UTF-8.
pub(crate) fn stream_not_utf8(error: &dyn Display) -> String {
    format!("the stream is not valid UTF-8 ({error})")
}

/// A stream that is not server-sent events.
pub(crate) const STREAM_NOT_SSE: &str = "the stream is not valid server-sent events";

/// A `data:` payload that is not a chat-completion chunk.
pub(crate) fn chunk_not_json(error: &dyn Display) -> String {
    format!("chunk is not valid chat-completion JSON ({error})")
}

/// A streamed tool call that never got its function name.
pub(crate) fn tool_call_without_name(index: impl Display) -> String {
    format!("tool call at index {index} has no function name")
}

/// Log line: the server sent `[DONE]`.
pub(crate) const LOG_STREAM_DONE: &str = "chat stream done";

/// Log line: the stream failed (the error is a field).
pub(crate) const LOG_STREAM_FAILED: &str = "chat stream failed";

/// Log line: a request attempt is being sent.
pub(crate) const LOG_SENDING: &str = "sending chat request";

/// Log line: a retryable failure, retried after a delay.
pub(crate) const LOG_RETRYING: &str = "chat request failed; retrying";

/// Log line: a stream cut before anything of it reached the consumer, sent
/// again after a delay.
pub(crate) const LOG_CUT_RETRYING: &str = "chat stream cut off before the model finished; retrying";

/// Log line: a streamed request answered with no event at all, asked once
/// more without streaming to read the server's real answer.
pub(crate) const LOG_ASKING_WHOLE: &str = "chat stream ended without any event; asking once more without streaming";

/// Log line: a request sent without streaming and with `max_tokens` 1, so
/// that a server whose streams carry no usage counts its prompt.
pub(crate) const LOG_COUNTING: &str =
    "asking the server to count a request's prompt tokens (not streamed, max_tokens 1)";

/// Log line: a stream cut while another request to its model was in
/// flight (a server that interrupts a running stream when another request
/// arrives); from now on the model is sent one request at a time.
pub(crate) fn log_one_at_a_time(url: &str, model: &str) -> String {
    format!(
        "{url} cut a stream of model {model} while another request to it was in flight: it is sent one request at a time from now on, and the cut request waits for its turn"
    )
}

/// Log line: a stream cut beside another request is sent again once it
/// has its turn, instead of racing the other.
pub(crate) const LOG_CUT_QUEUED: &str =
    "chat stream cut while another request was in flight; sending it again in its turn";

/// Log line: a limit on the requests in flight, kept from an earlier run,
/// is in force.
pub(crate) const LOG_CONCURRENCY_KEPT: &str = "requests in flight limited as an earlier run learned";

/// The one refusal of a concurrency (`max_concurrent`), however it was
/// written.
pub(crate) fn concurrency_refused(written: &dyn Display) -> String {
    format!(
        "a concurrency must be a whole number of requests at once, at least 1 (leave it out for no limit); got {written}"
    )
}

/// What a concurrency is expected to be, when something else was written.
pub(crate) const EXPECTING_CONCURRENCY: &str = "a whole number of requests, at least 1";

// ---- Cassettes ----

/// What a secret is written as.
pub(crate) const REDACTED: &str = "[redacted]";

/// The URL a replayed client names when its cassette recorded none.
pub(crate) const REPLAY_URL: &str = "http://replay.invalid/chat/completions";

/// [`CassetteError::Unreadable`](crate::cassette::CassetteError::Unreadable).
pub(crate) fn cassette_unreadable(file: &Path, error: &dyn Display) -> String {
    format!("cannot read cassette {}: {error}", file.display())
}

/// [`CassetteError::NotACassette`](crate::cassette::CassetteError::NotACassette).
pub(crate) fn cassette_not_a_cassette(file: &Path) -> String {
    format!(
        "{}:1: not a dsh cassette (its first line is not a header with \"format\":\"dsh-cassette\")",
        file.display()
    )
}

/// [`CassetteError::Version`](crate::cassette::CassetteError::Version).
pub(crate) fn cassette_version(file: &Path, found: u64, version: u32) -> String {
    let what_to_do = if found > u64::from(version) {
        "replay it with the newer dsh that recorded it, or record it again with this one"
    } else {
        "record it again with this dsh"
    };
    format!(
        "{}:1: cassette version {found}, but this dsh reads version {version}: {what_to_do}",
        file.display()
    )
}

/// [`CassetteError::Torn`](crate::cassette::CassetteError::Torn).
pub(crate) fn cassette_torn(file: &Path, line: usize) -> String {
    format!(
        "{}:{line}: the cassette is torn (it ends in the middle of this line): record it again",
        file.display()
    )
}

/// [`CassetteError::Corrupt`](crate::cassette::CassetteError::Corrupt).
pub(crate) fn cassette_corrupt(file: &Path, line: usize, message: &str) -> String {
    format!("{}:{line}: corrupt cassette: {message}", file.display())
}

/// [`CassetteError::Unfinished`](crate::cassette::CassetteError::Unfinished).
pub(crate) fn cassette_unfinished(file: &Path, reason: &str) -> String {
    format!(
        "{}: the cassette is unfinished, so it is not replayed: {reason}; record it again",
        file.display()
    )
}

/// [`CassetteError::Busy`](crate::cassette::CassetteError::Busy).
pub(crate) fn cassette_busy(file: &Path, partial: &Path) -> String {
    format!(
        "cannot record into {}: {} exists, so another run is recording into it (if none is, one was stopped before it finished: delete {})",
        file.display(),
        partial.display(),
        partial.display()
    )
}

/// [`CassetteError::Unwritable`](crate::cassette::CassetteError::Unwritable).
pub(crate) fn cassette_unwritable(file: &Path, error: &dyn Display) -> String {
    format!(
        "cannot write the recording {}: {error}; the cassette is unfinished",
        file.display()
    )
}

/// [`CassetteError::MixedLevels`](crate::cassette::CassetteError::MixedLevels).
pub(crate) fn cassette_mixed_levels(file: &Path, recorded: &str, asked: &str) -> String {
    format!(
        "cannot record a model at the {asked} level into {}: it records the {recorded} level (use one cassette per level)",
        file.display()
    )
}

/// The reason of an unfinished cassette of which only the recording exists.
pub(crate) fn cassette_only_partial(partial: &Path) -> String {
    format!(
        "only {} exists: the run that recorded it did not finish",
        partial.display()
    )
}

/// The reason of an unfinished cassette without its closing line.
pub(crate) const CASSETTE_NO_FINISH: &str = "it has no closing line (the run that recorded it stopped before it ended)";

/// A cassette with every part number taken.
pub(crate) const CASSETTE_TOO_MANY_PARTS: &str = "every part number of the cassette is taken";

/// A cassette whose part cannot be read with it.
pub(crate) fn cassette_bad_part(file: &Path, reason: &str) -> String {
    format!("{}: {reason}", file.display())
}

/// A part a cassette lists that is not beside it.
pub(crate) fn cassette_part_missing(part: &Path) -> String {
    format!("its part {} is missing", part.display())
}

/// A part of the other level.
pub(crate) fn cassette_part_level(part: &Path, level: &str, whole: &str) -> String {
    format!(
        "its part {} is at the {level} level, the cassette at the {whole} level (the processes of one run record one level)",
        part.display()
    )
}

/// Why a cassette whose run was interrupted is not replayed.
pub(crate) fn cassette_interrupted(reason: &str, exchanges: usize) -> String {
    format!("the run that recorded it was interrupted ({reason}) after {exchanges} exchanges")
}

/// A line that does not read as JSON of a cassette line.
pub(crate) fn cassette_json_error(message: &str, column: usize) -> String {
    format!("{message} (column {column})")
}

/// A cassette that is not UTF-8.
pub(crate) const CASSETTE_NOT_UTF8: &str = "not UTF-8 text";

/// A line after the closing one.
pub(crate) const CASSETTE_AFTER_FINISH: &str = "a line after the closing line";

/// A second header.
pub(crate) const CASSETTE_SECOND_HEADER: &str = "a second header: two recordings were written into one file";

/// A chunk with neither or both of `text` and `hex`.
pub(crate) const CASSETTE_CHUNK_SHAPE: &str = "a chunk needs exactly one of `text` and `hex`";

/// A chunk whose `hex` is not hex.
pub(crate) const CASSETTE_BAD_HEX: &str = "the chunk's `hex` is not hexadecimal";

/// A line of an exchange that has not begun or has ended.
pub(crate) fn cassette_no_request(id: u64) -> String {
    format!("exchange {id} has no open request before this line")
}

/// Two requests with one id.
pub(crate) fn cassette_duplicate_id(id: u64) -> String {
    format!("exchange {id} begins twice: two recordings were written into one file")
}

/// A line of the other level.
pub(crate) fn cassette_wrong_level(kind: &str, level: &str) -> String {
    format!("a `{kind}` line in a cassette of the {level} level")
}

/// The closing line while an exchange is still open.
pub(crate) fn cassette_open_exchange(id: u64) -> String {
    format!("the closing line comes before exchange {id} ended")
}

/// The closing line's count differs from the exchanges read.
pub(crate) fn cassette_count(said: u64, found: usize) -> String {
    format!("the closing line counts {said} exchanges, but the file holds {found}")
}

/// A request asked more often than it was recorded.
pub(crate) fn replay_used_up(file: &Path, recorded: usize) -> String {
    format!(
        "{} recorded this request {recorded} time(s), and every recorded answer has been used",
        file.display()
    )
}

/// A request asked of an empty cassette.
pub(crate) fn replay_empty(file: &Path) -> String {
    format!("{} holds no exchange", file.display())
}

/// A request with no recorded answer: the closest one (agent, request) and
/// where it differs: the field, the character offset of the first
/// difference in it (`None` when one side holds nothing), and a little
/// text around it from each side.
pub(crate) fn replay_miss(
    file: &Path,
    (part, line): (Option<&Path>, usize),
    (agent, request): (usize, usize),
    (path, offset): (&str, Option<usize>),
    recorded: Option<&str>,
    asked: Option<&str>,
) -> String {
    let show = |value: Option<&str>| value.unwrap_or("nothing").to_owned();
    let place = match part {
        None => format!("line {line}"),
        Some(part) => format!("{} line {line}", part.display()),
    };
    let at = match offset {
        Some(offset) => format!("{path}, at character offset {offset}"),
        None => path.to_owned(),
    };
    format!(
        "{} holds no such request; the closest is agent {agent}'s request {request} ({place}), which differs first at {at}: recorded {}, asked {}",
        file.display(),
        show(recorded),
        show(asked)
    )
}

/// `dsh cassette show`: what a cassette holds, in numbers.
pub(crate) fn cassette_totals(
    exchanges: usize,
    agents: usize,
    tokens: (u64, u64),
    errors: usize,
    cut_streams: usize,
    dropped: usize,
) -> String {
    format!(
        "{exchanges} exchanges, {agents} agents; tokens: {} prompt, {} completion; errors: {errors}; cut streams: {cut_streams}; dropped: {dropped}",
        tokens.0, tokens.1
    )
}

/// `dsh cassette show`: one agent.
pub(crate) fn cassette_agent(number: usize, requests: usize, task: &str) -> String {
    format!("\n  agent {number}: requests: {requests}; task: {task:?}")
}

/// `dsh cassette diff`: two requests that differ at a field.
pub(crate) fn divergence_request(
    agent: usize,
    request: usize,
    field: &str,
    first: Option<&str>,
    second: Option<&str>,
) -> String {
    format!(
        "agent {agent}, request {request}: the requests differ first at {field}: {} in the first, {} in the second",
        first.unwrap_or("nothing"),
        second.unwrap_or("nothing")
    )
}

/// `dsh cassette diff`: one request answered differently.
pub(crate) fn divergence_answer(agent: usize, request: usize, first: &str, second: &str) -> String {
    format!(
        "agent {agent}, request {request}: the same request, answered {first:?} in the first and {second:?} in the second"
    )
}

/// `dsh cassette diff`: a request in one recording only.
pub(crate) fn divergence_missing(agent: usize, request: usize, in_first: bool, task: &str) -> String {
    let (has, lacks) = if in_first {
        ("first", "second")
    } else {
        ("second", "first")
    };
    format!("agent {agent}, request {request} (task {task:?}) is in the {has} recording only, not in the {lacks}")
}

/// An answer in short: an HTTP error status.
pub(crate) fn answer_status(status: u16) -> String {
    format!("[HTTP {status}] ")
}

/// An answer in short: a tool call.
pub(crate) fn answer_tool_call(name: &str, arguments: &str) -> String {
    format!("[call {name}{arguments}]")
}

/// An answer in short: its finish reason.
pub(crate) fn answer_finish(reason: &str) -> String {
    format!(" [finish: {reason}]")
}

/// An answer in short: a cut stream.
pub(crate) fn answer_cut(error: &str) -> String {
    format!(" [cut: {error}]")
}

/// An answer in short: why a stream counts as cut when `[DONE]` came first.
pub(crate) const ANSWER_CUT_BY_DONE: &str = "[DONE] before a finish reason";

/// An answer in short: why a stream counts as cut when the body ended first.
pub(crate) const ANSWER_CUT_BY_END: &str = "the body ended before a finish reason";

/// An answer in short: no answer, or an error.
pub(crate) const ANSWER_FAILED: &str = " [failed]";

/// An answer in short: the client stopped reading.
pub(crate) const ANSWER_DROPPED: &str = " [dropped]";

/// Log: a cassette line could not be written.
pub(crate) const LOG_CASSETTE_WRITE_FAILED: &str = "cannot write the cassette; the recording is unfinished";

/// Log: the recording stopped, its writer too far behind the model.
pub(crate) const LOG_CASSETTE_FELL_BEHIND: &str =
    "the cassette writer fell too far behind the model; recording stopped, the cassette is unfinished";

/// Why a recording stopped: its writer fell `limit` bytes behind the model.
pub(crate) fn cassette_fell_behind(limit: usize) -> String {
    let limit = if limit >= 1 << 20 {
        format!("{} MB", limit >> 20)
    } else {
        format!("{} KB", limit.div_ceil(1 << 10))
    };
    format!(
        "the disk fell more than {limit} behind the model, so recording stopped rather than block the run or hold more memory"
    )
}

/// The writer thread stopped by a panic.
pub(crate) const CASSETTE_WRITER_PANICKED: &str = "the cassette writer stopped unexpectedly";

// ---- The scripted model ----

/// The source name of a script built in code.
pub(crate) const SCRIPT_SOURCE: &str = "<script>";

/// The source name of a script given as a string.
pub(crate) const INLINE_SOURCE: &str = "<inline>";

/// The JSON path of the script as a whole.
pub(crate) const SCRIPT_ROOT: &str = ".";

/// A script file that could not be read.
pub(crate) fn script_unreadable(error: &dyn Display) -> String {
    format!("could not read the file: {error}")
}

/// A script without rules.
pub(crate) const NO_RULES: &str = "a script needs at least one rule";

/// An error reply that also answers.
pub(crate) const ERROR_REPLY_WITH_ANSWER: &str = "an `error` reply cannot also have `text` or `tool_calls`";

/// A reply with nothing in it.
pub(crate) const EMPTY_REPLY: &str = "a reply needs `text`, `tool_calls` or `error`";

/// A scripted tool call without a name.
pub(crate) const TOOL_CALL_WITHOUT_NAME: &str = "a tool call needs a name";

/// A placeholder the templates do not know, with those they do.
pub(crate) fn unknown_template(name: &str, known: &[&str]) -> String {
    format!("unknown template {{{{{name}}}}}; known: {}", known.join(", "))
}

/// A request with no message to describe.
pub(crate) const NO_MESSAGES: &str = "none: the request has no messages";

/// The last message of an unmatched request: role and content, then its tool
/// calls or the call it answers.
pub(crate) fn last_message(role: &dyn Display, content: &str, tool_calls: &[&str], answering: Option<&str>) -> String {
    let mut text = format!("{role}: {content:?}");
    if !tool_calls.is_empty() {
        text.push_str(&format!(" with tool calls {tool_calls:?}"));
    }
    if let Some(id) = answering {
        text.push_str(&format!(" (answering {id})"));
    }
    text
}

/// Log line: the built-in script failed to load (the error is a field).
pub(crate) const LOG_BUILTIN_INVALID: &str = "the built-in script is invalid";

/// Log line: a rule matched (its index and name are fields).
pub(crate) const LOG_RULE_MATCHED: &str = "scripted rule matched";

// ---- Price ----

/// [`PriceError`](crate::PriceError): a price that is not a number, or is negative.
pub(crate) fn bad_price(key: &str, value: f64) -> String {
    format!("the {key} price must be a number, zero or more, per million tokens (got {value})")
}
