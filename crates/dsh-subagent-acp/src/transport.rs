//! The pipes between the SDK and the child, with guards: bounded lines, JSON
//! only, known methods only. A fault is recorded and ends the connection.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio_util::sync::CancellationToken;

use crate::diagnostic::{Fault, Stage};
use crate::subagents::Announced;
use crate::wording;

/// The methods a child may call on us. Everything else except `_`-prefixed
/// extension methods (which ACP lets a receiver decline) is a fault: we
/// advertise no file-system or terminal capability.
const CLIENT_METHODS: &[&str] = &["session/update", "session/request_permission"];

/// What the guards and handlers of one run have seen.
#[derive(Default)]
pub(crate) struct RunState {
    inner: Mutex<Seen>,
    /// The subagent sessions the child announced.
    subagents: Mutex<Announced>,
    /// Fires on the first fault.
    pub(crate) faulted: CancellationToken,
}

#[derive(Default)]
struct Seen {
    stage: Stage,
    fault: Option<Fault>,
    raw_stop_reason: Option<String>,
    auth_offers: Vec<AuthOffer>,
    output: String,
    session_id: Option<String>,
    opened: Option<Opened>,
}

/// The session a child opened, and where it keeps its own records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Opened {
    /// The session's id.
    pub(crate) session: String,
    /// The data directory the child named in its `session/new` answer's
    /// `_meta` ([`crate::DATA_DIR_META`]), when it named one.
    pub(crate) data_dir: Option<String>,
}

/// An authentication method the child listed in its `initialize` answer,
/// read from the raw JSON (the typed schema drops an `env_var` method's
/// variable). Every field is the child's choice, made printable and cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuthOffer {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    /// For `"type": "env_var"`: the variable it reads (`varName`, or the
    /// first of `vars[].name`).
    pub(crate) env_var: Option<String>,
}

/// The most offers kept; more are not listed.
const MAX_OFFERS: usize = 16;

impl AuthOffer {
    /// The list of `offers` as the errors name them; `None` when there are none.
    pub(crate) fn listed(offers: &[Self]) -> Option<String> {
        (!offers.is_empty()).then(|| {
            wording::offers_list(offers.iter().map(|offer| {
                (
                    offer.id.as_str(),
                    offer.name.as_str(),
                    offer.env_var.as_deref(),
                    offer.description.as_deref(),
                )
            }))
        })
    }

    fn parse(value: &Value) -> Option<Self> {
        let text = |key: &str| value.get(key).and_then(Value::as_str);
        let id = text("id").or_else(|| text("methodId"))?;
        let env_var = (text("type") == Some("env_var"))
            .then(|| text("varName").or_else(|| value.pointer("/vars/0/name").and_then(Value::as_str)))
            .flatten();
        let clean = |s: &str| crate::printable::printable(s, 200);
        Some(Self {
            id: clean(id),
            name: clean(text("name").unwrap_or_default()),
            description: text("description").map(clean).filter(|d| !d.is_empty()),
            env_var: env_var.map(clean),
        })
    }
}

impl RunState {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_stage(&self, stage: Stage) {
        self.seen().stage = stage;
    }

    pub(crate) fn stage(&self) -> Stage {
        self.seen().stage
    }

    /// Records a fault (the first one wins) and fires [`RunState::faulted`].
    pub(crate) fn fault(&self, fault: Fault) {
        let mut seen = self.seen();
        if seen.fault.is_none() {
            seen.fault = Some(fault);
        }
        drop(seen);
        self.faulted.cancel();
    }

    pub(crate) fn take_fault(&self) -> Option<Fault> {
        self.seen().fault.clone()
    }

    /// The authentication methods the child offered at `initialize`.
    pub(crate) fn auth_offers(&self) -> Vec<AuthOffer> {
        self.seen().auth_offers.clone()
    }

    pub(crate) fn raw_stop_reason(&self) -> Option<String> {
        self.seen().raw_stop_reason.clone()
    }

    pub(crate) fn set_session(&self, id: String) {
        self.subagents().set_own(&id);
        self.seen().session_id = Some(id);
    }

    /// Whether the child's session is published.
    pub(crate) fn has_session(&self) -> bool {
        self.seen().session_id.is_some()
    }

    /// The subagent sessions the child announced.
    pub(crate) fn subagents(&self) -> std::sync::MutexGuard<'_, Announced> {
        self.subagents.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the session the child opened (before it is published).
    pub(crate) fn set_opened(&self, opened: Opened) {
        self.seen().opened = Some(opened);
    }

    /// The session the child opened, once it has.
    pub(crate) fn opened(&self) -> Option<Opened> {
        self.seen().opened.clone()
    }

    pub(crate) fn is_session(&self, id: &str) -> bool {
        self.seen().session_id.as_deref() == Some(id)
    }

    /// Appends answer text, failing the run past `limit` bytes.
    pub(crate) fn push_output(&self, text: &str, limit: usize) {
        let mut seen = self.seen();
        if seen.fault.is_some() {
            return;
        }
        if seen.output.len() + text.len() > limit {
            drop(seen);
            self.fault(Fault::OutputTooLong { limit });
            return;
        }
        seen.output.push_str(text);
    }

    pub(crate) fn output(&self) -> String {
        self.seen().output.clone()
    }
}

/// The SDK's outgoing line sink.
pub(crate) type Outgoing = futures::sink::SinkMapErr<mpsc::UnboundedSender<String>, fn(mpsc::SendError) -> io::Error>;

fn broken_pipe(_: mpsc::SendError) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, crate::wording::STDIN_CLOSED)
}

/// Writes the SDK's lines to the child's stdin until the SDK is done or
/// `close` fires; then drops stdin, which the child reads as EOF.
pub(crate) fn writer(mut stdin: ChildStdin, close: CancellationToken) -> Outgoing {
    let (tx, mut rx) = mpsc::unbounded::<String>();
    tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                biased;
                () = close.cancelled() => break,
                line = rx.next() => line,
            };
            let Some(mut line) = line else { break };
            line.push('\n');
            let written = tokio::select! {
                biased;
                () = close.cancelled() => break,
                written = async {
                    stdin.write_all(line.as_bytes()).await?;
                    stdin.flush().await
                } => written,
            };
            if written.is_err() {
                break;
            }
        }
        drop(stdin);
    });
    tx.sink_map_err(broken_pipe as fn(mpsc::SendError) -> io::Error)
}

/// Reads the child's stdout line by line for the SDK, enforcing the guards.
pub(crate) fn reader(
    stdout: ChildStdout,
    state: Arc<RunState>,
    max_line_bytes: usize,
) -> mpsc::Receiver<io::Result<String>> {
    let (mut tx, rx) = mpsc::channel::<io::Result<String>>(16);
    tokio::spawn(async move {
        let mut stdout = BufReader::new(stdout);
        loop {
            let line = tokio::select! {
                biased;
                () = state.faulted.cancelled() => None,
                line = read_line(&mut stdout, max_line_bytes) => Some(line),
            };
            let verdict = match line {
                None => Err(None),
                Some(Ok(None)) => break,
                Some(Ok(Some(line))) => check(&line, &state).map(|()| line).map_err(Some),
                Some(Err(LineError::TooLong)) => Err(Some(Fault::LineTooLong { limit: max_line_bytes })),
                Some(Err(LineError::Io(error))) => Err(Some(Fault::ReadFailed(error.to_string()))),
            };
            match verdict {
                Ok(line) if line.trim().is_empty() => {}
                Ok(line) => {
                    if tx.send(Ok(line)).await.is_err() {
                        break;
                    }
                }
                Err(fault) => {
                    if let Some(fault) = fault {
                        state.fault(fault);
                    }
                    let _ = tx.send(Err(io::Error::other(crate::wording::PROTOCOL_FAULT))).await;
                    break;
                }
            }
        }
    });
    rx
}

enum LineError {
    TooLong,
    Io(io::Error),
}

/// One line without its terminator; `None` at EOF. Never buffers more than `limit` bytes.
async fn read_line(reader: &mut BufReader<ChildStdout>, limit: usize) -> Result<Option<String>, LineError> {
    let mut line = Vec::new();
    loop {
        let available = reader.fill_buf().await.map_err(LineError::Io)?;
        if available.is_empty() {
            return Ok(if line.is_empty() {
                None
            } else {
                Some(String::from_utf8_lossy(&line).into_owned())
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (&available[..end], Some(end + 1)),
            None => (available, None),
        };
        if line.len() + chunk.len() > limit {
            return Err(LineError::TooLong);
        }
        line.extend_from_slice(chunk);
        let consumed = done.unwrap_or(chunk.len());
        reader.consume(consumed);
        if done.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
    }
}

/// The guards: JSON, a known method, and a note of any stop reason.
fn check(line: &str, state: &RunState) -> Result<(), Fault> {
    if line.trim().is_empty() {
        return Ok(());
    }
    let value: Value = serde_json::from_str(line).map_err(|_| Fault::NotJson { stage: state.stage() })?;
    if let Some(method) = value.get("method") {
        let method = method.as_str().unwrap_or_default();
        // ACP extension methods: the SDK answers a request with "method not found".
        let extension = method.starts_with('_');
        if !CLIENT_METHODS.contains(&method) && !extension {
            return Err(Fault::UnknownMethod {
                method: method.to_owned(),
            });
        }
    }
    if let Some(reason) = value.pointer("/result/stopReason").and_then(Value::as_str) {
        state.seen().raw_stop_reason = Some(reason.to_owned());
    }
    if let Some(offers) = value.pointer("/result/authMethods").and_then(Value::as_array) {
        let mut seen = state.seen();
        if seen.stage == Stage::Initialize {
            seen.auth_offers = offers.iter().filter_map(AuthOffer::parse).take(MAX_OFFERS).collect();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guards_pass_protocol_and_stop_the_rest() {
        let state = RunState::default();
        assert_eq!(
            check(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#, &state),
            Ok(())
        );
        assert_eq!(
            check(r#"{"jsonrpc":"2.0","method":"_zed/hint","params":{}}"#, &state),
            Ok(())
        );
        assert_eq!(
            check(r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"frob"}}"#, &state),
            Ok(())
        );
        assert_eq!(state.raw_stop_reason().as_deref(), Some("frob"));
        assert_eq!(
            check("hello there", &state),
            Err(Fault::NotJson { stage: Stage::Spawn })
        );
        assert_eq!(
            check(
                r#"{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{}}"#,
                &state
            ),
            Err(Fault::UnknownMethod {
                method: "fs/read_text_file".into()
            })
        );
        assert_eq!(check(r#"{"jsonrpc":"2.0","id":1,"method":"_x/y"}"#, &state), Ok(()));
        assert!(matches!(
            check(r#"{"jsonrpc":"2.0","id":1,"method":"frobnicate"}"#, &state),
            Err(Fault::UnknownMethod { .. })
        ));
    }

    #[test]
    fn auth_offers_are_read_from_the_initialize_answer() {
        let state = RunState::default();
        state.set_stage(Stage::Initialize);
        let answer = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"authMethods":[
            {"id":"login","name":"Log in","description":"Opens a browser"},
            {"id":"key","name":"Use KEY","type":"env_var","varName":"KEY"},
            {"methodId":"v2","name":"V2 key","type":"env_var","vars":[{"name":"V2_KEY"}]},
            {"name":"no id"}
        ]}}"#
            .replace('\n', "");
        assert_eq!(check(&answer, &state), Ok(()));
        let offers = state.auth_offers();
        let ids: Vec<_> = offers.iter().map(|o| (o.id.as_str(), o.env_var.as_deref())).collect();
        assert_eq!(ids, [("login", None), ("key", Some("KEY")), ("v2", Some("V2_KEY"))]);
        assert_eq!(offers[0].description.as_deref(), Some("Opens a browser"));
        // Only the initialize answer counts.
        state.set_stage(Stage::Prompt);
        assert_eq!(
            check(r#"{"jsonrpc":"2.0","id":5,"result":{"authMethods":[]}}"#, &state),
            Ok(())
        );
        assert_eq!(state.auth_offers().len(), 3);
    }

    #[test]
    fn output_past_the_bound_is_a_fault() {
        let state = RunState::default();
        state.push_output("abc", 4);
        state.push_output("de", 4);
        assert_eq!(state.output(), "abc");
        assert_eq!(state.take_fault(), Some(Fault::OutputTooLong { limit: 4 }));
        assert!(state.faulted.is_cancelled());
    }
}
