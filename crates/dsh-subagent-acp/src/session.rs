//! One ACP conversation with a child, over the official SDK: `initialize`,
//! `session/new`, one `session/prompt`, and `session/cancel` when asked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, Implementation, InitializeRequest, NewSessionRequest, PermissionOptionKind,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason as AcpStop, TextContent,
};
use agent_client_protocol::{Agent, Client, Lines};
use dsh_subagent_api::StopReason;
use futures::channel::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::PermissionPolicy;
use crate::diagnostic::Stage;
use crate::transport::{Outgoing, RunState};

/// How a conversation ended, as far as the protocol tells.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The child answered the prompt.
    Answered(AcpStop),
    /// We cancelled; `Some` when the child ended the turn within the grace.
    Cancelled(Option<AcpStop>),
    /// A guard or handler recorded a fault (see [`RunState`]).
    Faulted,
}

/// Why a conversation broke off, in safe words.
#[derive(Debug)]
pub(crate) enum Broken {
    /// The child's stdout closed (or the connection ended) before the answer.
    Closed,
    /// A request failed: the child answered with an error, or the SDK refused.
    Failed(String),
}

impl Broken {
    fn from_sdk(error: agent_client_protocol::Error) -> Self {
        if agent_client_protocol::is_incoming_transport_closed(&error)
            || agent_client_protocol::is_connection_terminated(&error)
        {
            return Self::Closed;
        }
        let message: String = error.message.chars().take(512).collect();
        Self::Failed(if message.is_empty() {
            format!("error {:?}", error.code)
        } else {
            format!("error {:?}: {message}", error.code)
        })
    }
}

/// What one conversation needs.
pub(crate) struct Conversation {
    pub(crate) prompt: String,
    pub(crate) cwd: PathBuf,
    pub(crate) permission: PermissionPolicy,
    pub(crate) cancel_grace: Duration,
    pub(crate) max_output_bytes: usize,
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
        cancel_grace,
        max_output_bytes,
    } = conversation;
    let updates = state.clone();
    let main = state.clone();
    Client
        .v1()
        .name("dsh-subagent-acp")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let SessionUpdate::AgentMessageChunk(chunk) = &notification.update
                    && let ContentBlock::Text(text) = &chunk.content
                    && updates.is_session(&notification.session_id.to_string())
                {
                    updates.push_output(&text.text, max_output_bytes);
                }
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
        .connect_with(
            Lines::new(outgoing, incoming),
            async move |cx: agent_client_protocol::v1::ConnectionTo<Agent>| {
                let state = main;
                state.set_stage(Stage::Initialize);
                let initialize = InitializeRequest::new(ProtocolVersion::V1)
                    .client_info(Implementation::new("dsh-subagent-acp", env!("CARGO_PKG_VERSION")));
                cx.send_request(initialize).block_task().await?;
                state.set_stage(Stage::NewSession);
                let session = cx.send_request(NewSessionRequest::new(cwd)).block_task().await?;
                let session_id = session.session_id;
                state.set_session(session_id.to_string());
                if published.send(()).is_err() {
                    // `start` gave up (cancelled or timed out): no prompt.
                    return Ok(Ended::Cancelled(None));
                }
                state.set_stage(Stage::Prompt);
                let request =
                    PromptRequest::new(session_id.clone(), vec![ContentBlock::Text(TextContent::new(prompt))]);
                let mut answer = std::pin::pin!(cx.send_request(request).block_task());
                tokio::select! {
                    biased;
                    () = state.faulted.cancelled() => return Ok(Ended::Faulted),
                    answered = &mut answer => return Ok(Ended::Answered(answered?.stop_reason)),
                    () = cancel.cancelled() => {}
                }
                state.set_stage(Stage::Cancel);
                cx.send_notification(CancelNotification::new(session_id))?;
                let acknowledged = tokio::select! {
                    biased;
                    () = state.faulted.cancelled() => None,
                    answered = tokio::time::timeout(cancel_grace, &mut answer) => match answered {
                        Ok(Ok(response)) => Some(response.stop_reason),
                        _ => None,
                    },
                };
                Ok(Ended::Cancelled(acknowledged))
            },
        )
        .await
        .map_err(Broken::from_sdk)
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
