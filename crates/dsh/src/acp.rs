//! `dsh acp`: the dsh agent served as an Agent Client Protocol (v1) agent on
//! stdio, through the official SDK.
//!
//! - `initialize` → protocol v1, no optional capabilities.
//! - `session/new` → a fresh parent agent (the same setup as `dsh run`); the
//!   session id is the agent's id.
//! - `session/prompt` → one [`Agent::run`](dsh_agent::Agent::run) of the
//!   prompt's text; its answer is sent as an `agent_message_chunk` update,
//!   then the stop reason is returned. A run that fails is answered with a
//!   JSON-RPC error carrying the reason.
//! - `session/cancel` → cancels that session's running prompt, which then
//!   answers `cancelled`.
//!
//! Stdout carries nothing but the protocol; the banner, progress and logs go
//! to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use acp::schema::ProtocolVersion;
use acp::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionNotification,
    SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol as acp;
use dsh_agent::{Agent, AgentStop};
use dsh_subagent_api::SpanOrigin;
use dsh_tools::CancellationToken;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::Failure;
use crate::cli::AcpArgs;
use crate::progress::Progress;
use crate::setup::{Setup, Surface};

/// One ACP session: a parent agent and the token of its running prompt.
struct Session {
    agent: Agent,
    running: Option<CancellationToken>,
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

fn sessions(sessions: &Sessions) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
    sessions.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How an agent run answers `session/prompt`.
fn stop_reason(stop: &AgentStop) -> Result<StopReason, acp::Error> {
    match stop {
        AgentStop::Completed => Ok(StopReason::EndTurn),
        AgentStop::MaxTokens => Ok(StopReason::MaxTokens),
        AgentStop::MaxTurns(_) => Ok(StopReason::MaxTurnRequests),
        AgentStop::Refusal => Ok(StopReason::Refusal),
        AgentStop::Cancelled => Ok(StopReason::Cancelled),
        AgentStop::Error(message) => Err(acp::Error::new(
            acp::ErrorCode::INTERNAL_ERROR,
            format!("the dsh agent run failed: {message}"),
        )),
    }
}

/// Where a prompt's agent run is traced: continuing the client's trace when
/// its `_meta` carries W3C trace context, else as today.
fn origin(meta: Option<&serde_json::Map<String, serde_json::Value>>) -> SpanOrigin {
    let fields: Vec<(String, String)> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|key| Some((key.to_owned(), meta?.get(key)?.as_str()?.to_owned())))
        .collect();
    if fields.iter().any(|(key, _)| key == "traceparent") {
        SpanOrigin::Remote(fields)
    } else {
        SpanOrigin::current()
    }
}

fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) async fn serve(args: AcpArgs) -> Result<(), Failure> {
    let progress = Arc::new(Progress::new(args.quiet));
    let mut setup = Setup::new(&args.agent, args.data_dir.as_deref(), progress, Surface::Agent)?;
    setup.mount_mcp_servers(&args.agent.mcp_servers).await?;
    let setup = Arc::new(setup);
    let at_exit = setup.clone();
    if !args.quiet {
        eprintln!("{}", setup.banner);
    }
    let open: Sessions = Arc::default();
    let on_new = open.clone();
    let on_prompt = open.clone();
    let on_cancel = open;

    let served = acp::Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |_request: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new())
                        .agent_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION"))),
                )
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: NewSessionRequest, responder, _cx| match setup.parent("dsh acp") {
                Ok(agent) => {
                    let id = agent.id().to_string();
                    sessions(&on_new).insert(id.clone(), Session { agent, running: None });
                    responder.respond(NewSessionResponse::new(id))
                }
                Err(failure) => responder.respond_with_error(acp::Error::new(
                    acp::ErrorCode::INTERNAL_ERROR,
                    failure.message().to_owned(),
                )),
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let session_id = request.session_id.clone();
                let cancel = CancellationToken::new();
                let agent = {
                    let mut open = sessions(&on_prompt);
                    match open.get_mut(&session_id.to_string()) {
                        None => None,
                        Some(session) if session.running.is_some() => {
                            return responder.respond_with_error(acp::Error::new(
                                acp::ErrorCode::INVALID_REQUEST,
                                "a prompt is already running in this session",
                            ));
                        }
                        Some(session) => {
                            session.running = Some(cancel.clone());
                            Some(session.agent.clone())
                        }
                    }
                };
                let Some(agent) = agent else {
                    return responder.respond_with_error(acp::Error::new(
                        acp::ErrorCode::INVALID_PARAMS,
                        format!("unknown session {session_id}"),
                    ));
                };
                let text = prompt_text(&request.prompt);
                let origin = origin(request.meta.as_ref());
                let open = on_prompt.clone();
                let sender = cx.clone();
                cx.spawn(async move {
                    let outcome = agent.run_from(text, &cancel, &origin).await;
                    if let Some(session) = sessions(&open).get_mut(&session_id.to_string()) {
                        session.running = None;
                    }
                    if !outcome.text.is_empty() {
                        let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(outcome.text)));
                        sender.send_notification(SessionNotification::new(
                            session_id,
                            SessionUpdate::AgentMessageChunk(chunk),
                        ))?;
                    }
                    match stop_reason(&outcome.stop) {
                        Ok(reason) => responder.respond(PromptResponse::new(reason)),
                        Err(error) => responder.respond_with_error(error),
                    }
                })
            },
            acp::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                if let Some(Session {
                    running: Some(cancel), ..
                }) = sessions(&on_cancel).get(&notification.session_id.to_string())
                {
                    cancel.cancel();
                }
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_to(acp::ByteStreams::new(
            tokio::io::stdout().compat_write(),
            tokio::io::stdin().compat(),
        ))
        .await;
    at_exit.release_mcp_servers().await;
    served.map_err(|error| Failure::failed(format!("dsh acp: the connection failed: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_stops_map_to_acp_stop_reasons() {
        assert_eq!(stop_reason(&AgentStop::Completed).ok(), Some(StopReason::EndTurn));
        assert_eq!(stop_reason(&AgentStop::MaxTokens).ok(), Some(StopReason::MaxTokens));
        assert_eq!(
            stop_reason(&AgentStop::MaxTurns(3)).ok(),
            Some(StopReason::MaxTurnRequests)
        );
        assert_eq!(stop_reason(&AgentStop::Refusal).ok(), Some(StopReason::Refusal));
        assert_eq!(stop_reason(&AgentStop::Cancelled).ok(), Some(StopReason::Cancelled));
        let error = stop_reason(&AgentStop::Error("boom".into())).err().map(|e| e.message);
        assert_eq!(error.as_deref(), Some("the dsh agent run failed: boom"));
    }
}
