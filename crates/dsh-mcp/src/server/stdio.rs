//! MCP over a byte stream (stdio): newline-delimited JSON-RPC, read and
//! written by us, handed to rmcp as a stream of messages and a sink of
//! answers.
//!
//! Reading it ourselves is what lets every message be screened
//! ([`screen`]): a line longer than [`MAX_LINE_BYTES`] is answered with a
//! JSON-RPC error naming the limit (its `id` when that could be read from
//! the part before the limit), logged, and skipped; serving goes on. JSON
//! that is not a message, or an `initialize` whose params are wrong, is
//! answered with its `id`. A line that is not JSON at all is only logged,
//! as MCP's SDKs do (answering it can start an error storm with a peer that
//! echoes). The end of input cancels the session's calls at once (left to
//! itself, rmcp first waits a few seconds for their responses).
//!
//! One writer task owns the output, so an answer of ours never lands in
//! the middle of one of rmcp's.

use std::pin::Pin;

use futures::{Sink, Stream};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::server::screen::{self, Kind, Refusal};
use crate::wording;

/// The longest line read: 16 MiB (what rmcp's own stdio transport takes,
/// and its HTTP client's largest event).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Lines waiting for the writer.
const OUTPUT_QUEUE: usize = 64;

/// The messages rmcp reads, the answers it writes, and the writer task
/// (done once every answer is written).
pub(crate) struct Transport {
    pub(crate) messages: Pin<Box<dyn Stream<Item = ClientJsonRpcMessage> + Send>>,
    pub(crate) answers: Pin<Box<dyn Sink<ServerJsonRpcMessage, Error = std::io::Error> + Send>>,
    pub(crate) writer: JoinHandle<()>,
}

/// The transport over `read` and `write`; `on_eof` is cancelled when the
/// input ends.
pub(crate) fn transport<R, W>(read: R, write: W, on_eof: CancellationToken) -> Transport
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (lines, queued) = mpsc::channel::<String>(OUTPUT_QUEUE);
    let writer = tokio::spawn(write_lines(write, queued));
    let reader = Reader {
        input: BufReader::new(read),
        replies: lines.clone(),
        on_eof,
        limit: MAX_LINE_BYTES,
    };
    let messages = futures::stream::unfold(reader, |mut reader| async move {
        let message = reader.next_message().await?;
        Some((message, reader))
    });
    let answers = futures::sink::unfold(lines, |lines, answer: ServerJsonRpcMessage| async move {
        let line = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
        lines
            .send(line)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok::<_, std::io::Error>(lines)
    });
    Transport {
        messages: Box::pin(messages),
        answers: Box::pin(answers),
        writer,
    }
}

/// Writes each line, then a newline, and flushes; stops when the output
/// fails (the client is gone) or every sender is dropped.
async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut queued: mpsc::Receiver<String>) {
    while let Some(line) = queued.recv().await {
        let written = async {
            write.write_all(line.as_bytes()).await?;
            write.write_all(b"\n").await?;
            write.flush().await
        };
        if let Err(error) = written.await {
            tracing::debug!("{}", wording::log_input_ended(&error));
            return;
        }
    }
}

/// One line of input.
enum Line {
    Whole(Vec<u8>),
    /// Longer than the limit: its first `limit` bytes (the rest was skipped).
    TooLong(Vec<u8>),
    End,
}

struct Reader<R> {
    input: BufReader<R>,
    replies: mpsc::Sender<String>,
    on_eof: CancellationToken,
    limit: usize,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    /// The next message to serve; answers what cannot be served on the way.
    async fn next_message(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = match self.read_line().await {
                Line::Whole(line) => line,
                Line::TooLong(prefix) => {
                    tracing::warn!("{}", wording::log_message_too_large(self.limit));
                    self.reply(&Refusal::too_large(&prefix, self.limit)).await;
                    continue;
                }
                Line::End => {
                    self.on_eof.cancel();
                    return None;
                }
            };
            let text = line.strip_suffix(b"\r").unwrap_or(&line);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match screen::screen(text) {
                Ok(message) => return Some(message),
                Err(refusal) if refusal.kind == Kind::NotJson => {
                    tracing::debug!("{}", wording::log_message_refused(&refusal.message));
                }
                Err(refusal) => {
                    tracing::debug!("{}", wording::log_message_refused(&refusal.message));
                    self.reply(&refusal).await;
                }
            }
        }
    }

    async fn reply(&mut self, refusal: &Refusal) {
        // The writer is gone only when the client is: nothing to tell.
        let _ = self.replies.send(refusal.body().to_string()).await;
    }

    /// One line, without its newline, holding at most `limit` bytes.
    async fn read_line(&mut self) -> Line {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::debug!("{}", wording::log_input_ended(&error));
                    return Line::End;
                }
            };
            if available.is_empty() {
                // A last line without its newline is served too.
                return match (too_long, line.is_empty()) {
                    (true, _) => Line::TooLong(line),
                    (false, true) => Line::End,
                    (false, false) => Line::Whole(line),
                };
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.unwrap_or(available.len());
            let room = self.limit - line.len();
            if take > room {
                too_long = true;
            }
            line.extend_from_slice(&available[..take.min(room)]);
            let consumed = newline.map_or(take, |at| at + 1);
            self.input.consume(consumed);
            if newline.is_some() {
                return if too_long {
                    Line::TooLong(line)
                } else {
                    Line::Whole(line)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

    use super::*;

    /// Feeds `input` to a reader whose lines are at most `limit` bytes;
    /// the messages it passes on, and what it answered by itself.
    async fn run(input: &[u8], limit: usize) -> (Vec<Value>, Vec<Value>) {
        let (replies, mut queued) = mpsc::channel::<String>(OUTPUT_QUEUE);
        let eof = CancellationToken::new();
        let mut reader = Reader {
            input: BufReader::new(std::io::Cursor::new(input.to_vec())),
            replies,
            on_eof: eof.clone(),
            limit,
        };
        let mut passed = Vec::new();
        while let Some(message) = reader.next_message().await {
            passed.push(serde_json::to_value(&message).unwrap());
        }
        assert!(eof.is_cancelled(), "the end of input cancels the session");
        drop(reader);
        let mut answered = Vec::new();
        while let Some(line) = queued.recv().await {
            answered.push(serde_json::from_str(&line).unwrap());
        }
        (passed, answered)
    }

    #[tokio::test]
    async fn a_line_past_the_limit_is_answered_with_its_id_and_serving_goes_on() {
        let long = format!(
            "{{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {{\"name\": \"x\", \"arguments\": {{\"text\": \"{}\"}}}}}}\n",
            "a".repeat(200)
        );
        let input = [
            long.as_str(),
            "{\"jsonrpc\": \"2.0\", \"id\": 8, \"method\": \"ping\"}\n",
            "not json\n",
            "\n",
            "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": 5}\r\n",
            "{\"jsonrpc\": \"2.0\", \"id\": 10, \"method\": \"tools/list\"}",
        ]
        .concat();
        let (passed, answered) = run(input.as_bytes(), 128).await;
        let ids: Vec<&Value> = passed.iter().map(|message| &message["id"]).collect();
        assert_eq!(ids, [&json!(8), &json!(10)]);
        assert_eq!(
            answered,
            [
                json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600,
                    "message": "Invalid Request: the message is larger than the limit of 128 bytes and was not read"}}),
                json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32600,
                    "message": answered[1]["error"]["message"].clone()}}),
            ]
        );
        assert!(
            answered[1]["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Invalid Request: not a JSON-RPC request, notification or response")
        );
    }
}
