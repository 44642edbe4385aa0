//! One ACP conversation with a child, over the official SDK: `initialize`,
//! `session/new`, one `session/prompt`, and `session/cancel` when asked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock, Implementation, InitializeRequest, Meta,
    NewSessionRequest, PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionId, SessionNotification, SessionUpdate,
    StopReason as AcpStop, SubagentCapabilities, TextContent,
};
use agent_client_protocol::{Agent, Client, Lines};
use dsh_subagent_api::StopReason;
use futures::channel::oneshot;
use tokio_util::sync::CancellationToken;

use crate::child_update::{ProgressSink, child_update};
use crate::config::{AcpAuth, PermissionPolicy};
use crate::diagnostic::Stage;
use crate::printable::printable;
use crate::transport::{AuthOffer, Opened, Outgoing, RunState};

/// How a conversation ended, as far as the protocol tells.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The child answered the prompt.
    Answered(AcpStop),
    /// We cancelled; `Some` when the child ended the turn within the grace.
    Cancelled(Option<AcpStop>),
    /// The turn timeout ran out and we cancelled the turn; `Some` when the
    /// child ended it within the cancel grace.
    TimedOut(Option<AcpStop>),
    /// The configured authentication method is not among those the child offered.
    AuthNotOffered(String),
    /// A guard or handler recorded a fault (see [`RunState`]).
    Faulted,
}

/// Why a conversation broke off, in safe words.
#[derive(Debug)]
pub(crate) enum Broken {
    /// The child's stdout closed (or the connection ended) before the answer.
    Closed,
    /// A request failed: the child answered with an error, or the SDK refused.
    Failed(RpcFailure),
}

/// A JSON-RPC error, cleaned for a diagnostic: the child chose every part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RpcFailure {
    /// The error code (`-32000` is ACP's "authentication required").
    pub(crate) code: i32,
    /// The message, printable and cut.
    pub(crate) message: String,
    /// The `data` member: its `message` when it has one, else the text
    /// itself or the compact JSON; printable and cut.
    pub(crate) data: Option<String>,
}

/// ACP's "authentication required" error code.
pub(crate) const AUTH_REQUIRED: i32 = -32000;

/// How many characters of a child's error message or data a diagnostic quotes.
const QUOTE_CHARS: usize = 512;

impl RpcFailure {
    pub(crate) fn new(code: i32, message: &str, data: Option<&serde_json::Value>) -> Self {
        use serde_json::Value;
        let data = match data {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(value) => Some(match value.get("message").and_then(Value::as_str) {
                Some(message) => message.to_owned(),
                None => value.to_string(),
            }),
        };
        let message = printable(message, QUOTE_CHARS);
        let data = data
            .map(|data| printable(&data, QUOTE_CHARS))
            .filter(|data| !data.is_empty() && *data != message);
        Self { code, message, data }
    }
}

impl std::fmt::Display for RpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [Some(&self.message).filter(|m| !m.is_empty()), self.data.as_ref()]
            .into_iter()
            .flatten()
            .map(String::as_str);
        f.write_str(&crate::wording::rpc_failure(self.code, parts))
    }
}

impl Broken {
    fn from_sdk(error: agent_client_protocol::Error) -> Self {
        if agent_client_protocol::is_incoming_transport_closed(&error)
            || agent_client_protocol::is_connection_terminated(&error)
        {
            return Self::Closed;
        }
        Self::Failed(RpcFailure::new(
            i32::from(error.code),
            &error.message,
            error.data.as_ref(),
        ))
    }
}

/// The method to `authenticate` with under `auth`, given what the child
/// offered and which variables its environment sets; `Err` names a
/// configured method the child does not offer.
pub(crate) fn choose_auth(auth: &AcpAuth, offers: &[AuthOffer], env_set: &[String]) -> Result<Option<String>, String> {
    match auth {
        AcpAuth::None => Ok(None),
        AcpAuth::Method(id) if offers.iter().any(|offer| offer.id == *id) => Ok(Some(id.clone())),
        AcpAuth::Method(id) => Err(id.clone()),
        AcpAuth::FirstEnvVar => Ok(offers
            .iter()
            .find(|offer| offer.env_var.as_ref().is_some_and(|var| env_set.contains(var)))
            .map(|offer| offer.id.clone())),
    }
}

/// The `_meta` key of a `session/new` answer under which an agent that
/// keeps dsh transcripts (`dsh acp --data-dir`) names its data directory,
/// as an absolute path: the parent records it, and its tree view reads the
/// child's own tree there (the session id is the child's agent id).
pub const DATA_DIR_META: &str = "dsh.dataDir";

/// What one conversation needs.
pub(crate) struct Conversation {
    pub(crate) prompt: String,
    pub(crate) cwd: PathBuf,
    pub(crate) permission: PermissionPolicy,
    pub(crate) auth: AcpAuth,
    /// Names of the variables set (non-empty) in the child's environment.
    pub(crate) env_set: Vec<String>,
    pub(crate) turn_timeout: Option<Duration>,
    pub(crate) cancel_grace: Duration,
    pub(crate) max_output_bytes: usize,
    /// `traceparent` (and `tracestate`) for the `_meta` of each request;
    /// empty: no `_meta` is sent.
    pub(crate) trace_context: serde_json::Map<String, serde_json::Value>,
    /// The run's id and where the child's reports go, if anywhere.
    pub(crate) progress: Option<(String, ProgressSink)>,
    /// The span that started the child: the spans of the subagent sessions
    /// it announces hang under it.
    pub(crate) origin: Option<tracing::Span>,
}

/// The ACP → dsh stop-reason mapping (docs/contract.md, "Stop reasons").
pub(crate) fn map_stop(stop: AcpStop) -> StopReason {
    match stop {
        AcpStop::EndTurn => StopReason::Completed,
        AcpStop::MaxTokens => StopReason::MaxTokens,
        AcpStop::Refusal => StopReason::Refusal,
        AcpStop::Cancelled => StopReason::Aborted,
        // `max_turn_requests` and anything a later schema adds.
        _ => StopReason::Error,
    }
}

/// The answer to a permission request under `policy`.
pub(crate) fn answer_permission(
    policy: PermissionPolicy,
    request: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    let kinds: &[PermissionOptionKind] = match policy {
        PermissionPolicy::Reject => &[PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways],
        PermissionPolicy::AllowFirst => &[PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways],
    };
    let chosen = kinds.iter().find_map(|kind| {
        request
            .options
            .iter()
            .find(|option| option.kind == *kind)
            .map(|option| option.option_id.clone())
    });
    RequestPermissionResponse::new(match chosen {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => RequestPermissionOutcome::Cancelled,
    })
}

/// Runs the conversation over `incoming`/`outgoing`. `published` fires once
/// the session exists; `cancel` asks for `session/cancel`.
///
/// `Err` carries the SDK's error (a rejected request, a closed connection);
/// the caller reads faults, the stage and the output from `state`.
pub(crate) async fn converse(
    conversation: Conversation,
    incoming: futures::channel::mpsc::Receiver<std::io::Result<String>>,
    outgoing: Outgoing,
    state: Arc<RunState>,
    cancel: CancellationToken,
    published: oneshot::Sender<()>,
) -> Result<Ended, Broken> {
    let Conversation {
        prompt,
        cwd,
        permission,
        auth,
        env_set,
        turn_timeout,
        cancel_grace,
        max_output_bytes,
        trace_context,
        progress,
        origin,
    } = conversation;
    state.subagents().configure(progress.clone(), origin);
    let meta = (!trace_context.is_empty()).then_some(trace_context);
    let updates = state.clone();
    let turn = Turn {
        prompt,
        meta: meta.clone(),
        timeout: turn_timeout,
        cancel_grace,
    };
    Client
        .v1()
        .name("dsh-subagent-acp")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                take_update(&updates, &notification, max_output_bytes, progress.as_ref());
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                responder.respond(answer_permission(permission, &request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(Lines::new(outgoing, incoming), async move |cx: ConnectionTo<Agent>| {
            let session_id = match open_session(&cx, &state, &auth, &env_set, cwd, meta).await? {
                Ok(session_id) => session_id,
                Err(ended) => return Ok(ended),
            };
            if published.send(()).is_err() {
                // `start` gave up (cancelled or timed out): no prompt.
                return Ok(Ended::Cancelled(None));
            }
            // From here on the child's updates count (its answer, its
            // reports): only a published run has any.
            state.set_session(session_id.to_string());
            prompt_turn(&cx, &state, session_id, turn, &cancel).await
        })
        .await
        .map_err(Broken::from_sdk)
}

/// A `session/update` of the child's: its answer's text is kept (up to
/// `max_output_bytes`) and its progress reported, for the published session
/// only.
fn take_update(
    state: &RunState,
    notification: &SessionNotification,
    max_output_bytes: usize,
    progress: Option<&(String, ProgressSink)>,
) {
    let session = notification.session_id.to_string();
    let subagent = match &notification.update {
        SessionUpdate::SubagentUpdate(update) => Some(update),
        _ => None,
    };
    if !state.is_session(&session) || subagent.is_some() {
        // Before its session is published nothing of the child counts;
        // after, its subagent sessions' updates are kept apart.
        if state.has_session() {
            state.subagents().take(&session, subagent);
        }
        return;
    }
    if let SessionUpdate::AgentMessageChunk(chunk) = &notification.update
        && let ContentBlock::Text(text) = &chunk.content
    {
        state.push_output(&text.text, max_output_bytes);
    }
    if let Some((run, sink)) = progress
        && let Some(update) = child_update(&notification.update)
    {
        sink(run, &update);
    }
}

/// `initialize`; `authenticate` when the configuration picks a method the
/// child offers; then `session/new`. The new session's id, or how the
/// conversation ended without one.
async fn open_session(
    cx: &ConnectionTo<Agent>,
    state: &RunState,
    auth: &AcpAuth,
    env_set: &[String],
    cwd: PathBuf,
    meta: Option<Meta>,
) -> Result<Result<SessionId, Ended>, agent_client_protocol::Error> {
    state.set_stage(Stage::Initialize);
    // `subagents`: the child may announce subagent sessions of its own,
    // which are kept apart from its answer (crate::subagents).
    let initialize = InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(ClientCapabilities::new().subagents(SubagentCapabilities::new()))
        .client_info(Implementation::new("dsh-subagent-acp", env!("CARGO_PKG_VERSION")));
    cx.send_request(initialize).block_task().await?;
    match choose_auth(auth, &state.auth_offers(), env_set) {
        Ok(None) => {}
        Ok(Some(method)) => {
            state.set_stage(Stage::Authenticate);
            cx.send_request(AuthenticateRequest::new(method)).block_task().await?;
        }
        Err(missing) => return Ok(Err(Ended::AuthNotOffered(missing))),
    }
    state.set_stage(Stage::NewSession);
    let session = cx
        .send_request(NewSessionRequest::new(cwd).meta(meta))
        .block_task()
        .await?;
    let data_dir = session
        .meta
        .as_ref()
        .and_then(|meta| meta.get(crate::DATA_DIR_META)?.as_str())
        .filter(|dir| std::path::Path::new(dir).is_absolute())
        .map(str::to_owned);
    state.set_opened(Opened {
        session: session.session_id.to_string(),
        data_dir,
    });
    Ok(Ok(session.session_id))
}

/// The prompt's turn, and the limits it runs under.
struct Turn {
    prompt: String,
    meta: Option<Meta>,
    /// How long the child may take to answer; `None`: no limit.
    timeout: Option<Duration>,
    /// How long a cancelled turn is given to end.
    cancel_grace: Duration,
}

/// Sends the prompt and waits for its answer. When the caller cancels or
/// the turn's time runs out first, sends `session/cancel` and takes what the
/// child acknowledges within the cancel grace. A fault recorded meanwhile
/// ends the turn at once.
async fn prompt_turn(
    cx: &ConnectionTo<Agent>,
    state: &RunState,
    session_id: SessionId,
    turn: Turn,
    cancel: &CancellationToken,
) -> Result<Ended, agent_client_protocol::Error> {
    state.set_stage(Stage::Prompt);
    let request = PromptRequest::new(
        session_id.clone(),
        vec![ContentBlock::Text(TextContent::new(turn.prompt))],
    )
    .meta(turn.meta);
    let mut answer = std::pin::pin!(cx.send_request(request).block_task());
    let out_of_time = async {
        match turn.timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let timed_out = tokio::select! {
        biased;
        () = state.faulted.cancelled() => return Ok(Ended::Faulted),
        answered = &mut answer => return Ok(Ended::Answered(answered?.stop_reason)),
        () = cancel.cancelled() => false,
        () = out_of_time => true,
    };
    state.set_stage(Stage::Cancel);
    cx.send_notification(CancelNotification::new(session_id))?;
    let acknowledged = tokio::select! {
        biased;
        () = state.faulted.cancelled() => None,
        answered = tokio::time::timeout(turn.cancel_grace, &mut answer) => match answered {
            Ok(Ok(response)) => Some(response.stop_reason),
            _ => None,
        },
    };
    Ok(if timed_out {
        Ended::TimedOut(acknowledged)
    } else {
        Ended::Cancelled(acknowledged)
    })
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{PermissionOption, ToolCallUpdate, ToolCallUpdateFields};

    use super::*;

    #[test]
    fn stop_reasons_map_as_the_reference_says() {
        assert_eq!(map_stop(AcpStop::EndTurn), StopReason::Completed);
        assert_eq!(map_stop(AcpStop::MaxTokens), StopReason::MaxTokens);
        assert_eq!(map_stop(AcpStop::Refusal), StopReason::Refusal);
        assert_eq!(map_stop(AcpStop::Cancelled), StopReason::Aborted);
        assert_eq!(map_stop(AcpStop::MaxTurnRequests), StopReason::Error);
    }

    fn request(kinds: &[PermissionOptionKind]) -> RequestPermissionRequest {
        let options = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| PermissionOption::new(format!("opt-{i}"), format!("option {i}"), *kind))
            .collect();
        RequestPermissionRequest::new("s", ToolCallUpdate::new("call", ToolCallUpdateFields::new()), options)
    }

    fn chosen(response: RequestPermissionResponse) -> Option<String> {
        match response.outcome {
            RequestPermissionOutcome::Selected(selected) => Some(selected.option_id.to_string()),
            _ => None,
        }
    }

    #[test]
    fn error_data_is_quoted_by_its_message_or_as_json() {
        let with_message = serde_json::json!({"message": "invalid api key", "retryable": false});
        assert_eq!(
            RpcFailure::new(-32603, "Internal error", Some(&with_message)).to_string(),
            "error -32603: Internal error: invalid api key"
        );
        let other = serde_json::json!({"status": 401});
        assert_eq!(
            RpcFailure::new(-32603, "Internal error", Some(&other)).to_string(),
            r#"error -32603: Internal error: {"status":401}"#
        );
        let text = serde_json::json!("line one\nline \u{1b}[31mtwo\u{1b}[0m");
        assert_eq!(
            RpcFailure::new(-32000, "", Some(&text)).to_string(),
            "error -32000: line one line two"
        );
        let same = serde_json::json!("Internal error");
        assert_eq!(
            RpcFailure::new(-32603, "Internal error", Some(&same)).to_string(),
            "error -32603: Internal error"
        );
        assert_eq!(RpcFailure::new(-32603, "", None).to_string(), "error -32603");
        let long = serde_json::json!("x".repeat(2000));
        let quoted = RpcFailure::new(1, "m", Some(&long)).to_string();
        assert!(quoted.chars().count() < 600 && quoted.ends_with('…'), "{quoted}");
    }

    fn offer(id: &str, env_var: Option<&str>) -> AuthOffer {
        AuthOffer {
            id: id.into(),
            name: id.into(),
            description: None,
            env_var: env_var.map(str::to_owned),
        }
    }

    #[test]
    fn authentication_is_chosen_from_the_offers() {
        let offers = [
            offer("login", None),
            offer("a-key", Some("A_KEY")),
            offer("b-key", Some("B_KEY")),
        ];
        let env = ["PATH".to_owned(), "B_KEY".to_owned()];
        assert_eq!(choose_auth(&AcpAuth::None, &offers, &env), Ok(None));
        assert_eq!(
            choose_auth(&AcpAuth::FirstEnvVar, &offers, &env),
            Ok(Some("b-key".to_owned()))
        );
        assert_eq!(
            choose_auth(&AcpAuth::FirstEnvVar, &offers, &["PATH".to_owned()]),
            Ok(None)
        );
        assert_eq!(
            choose_auth(&AcpAuth::Method("login".into()), &offers, &env),
            Ok(Some("login".to_owned()))
        );
        assert_eq!(
            choose_auth(&AcpAuth::Method("sso".into()), &offers, &env),
            Err("sso".to_owned())
        );
    }

    #[test]
    fn permission_answers_follow_the_policy() {
        use PermissionOptionKind::*;
        let offered = request(&[AllowAlways, AllowOnce, RejectAlways, RejectOnce]);
        assert_eq!(
            chosen(answer_permission(PermissionPolicy::Reject, &offered)).as_deref(),
            Some("opt-3")
        );
        assert_eq!(
            chosen(answer_permission(PermissionPolicy::AllowFirst, &offered)).as_deref(),
            Some("opt-1")
        );
        let allow_only = request(&[AllowAlways]);
        assert_eq!(chosen(answer_permission(PermissionPolicy::Reject, &allow_only)), None);
        assert_eq!(
            chosen(answer_permission(PermissionPolicy::AllowFirst, &allow_only)).as_deref(),
            Some("opt-0")
        );
        assert_eq!(
            chosen(answer_permission(PermissionPolicy::AllowFirst, &request(&[RejectOnce]))),
            None
        );
    }
}
