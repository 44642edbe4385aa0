//! `dsh acp`: the dsh agent served as an Agent Client Protocol (v1) agent on
//! stdio, through the official SDK.
//!
//! - `initialize` → protocol v1; `loadSession` when transcripts are kept
//!   (`--data-dir`).
//! - `session/new` → a fresh parent agent (the same setup as `dsh run`); the
//!   session id is the agent's id.
//! - `session/load` → the parent of that id, continued from its transcript
//!   (as `dsh run --resume`); its history is replayed as `session/update`s
//!   before the answer ([`updates::replay`]).
//! - `session/prompt` → one [`Agent::run`](dsh_agent::Agent::run) of the
//!   prompt's text, streamed as it happens ([`updates::live`]): a chunk per
//!   text delta, each tool call and its end, the children's progress on
//!   their delegation call; then the stop reason. A run that fails is
//!   answered with a JSON-RPC error carrying the reason.
//! - `session/cancel` → cancels that session's running prompt, which then
//!   answers `cancelled`; what was streamed stands.
//!
//! Stdout carries nothing but the protocol; the banner, progress and logs go
//! to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use acp::schema::ProtocolVersion;
use acp::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    SessionNotification, StopReason,
};
use agent_client_protocol as acp;
use dsh_agent::{Agent, AgentStop};
use dsh_subagent_api::SpanOrigin;
use dsh_tools::CancellationToken;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::cli::AcpArgs;
use crate::progress::Progress;
use crate::runtime::Setup;
use crate::setup::Surface;
use crate::{Failure, wording};

mod stream;
mod updates;

use stream::{Streams, Tee};

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
            wording::agent_run_failed(message),
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
    let config = crate::config::load_from_cwd(args.agent.config.as_deref())?;
    let progress = Arc::new(Progress::new(args.quiet));
    let delegation_tools = crate::setup::delegation_tool_names(config.as_ref());
    let streams = Arc::new(Streams::new(delegation_tools));
    let observer = Arc::new(Tee(progress, streams.clone()));
    let mut setup = Setup::new(
        &args.agent,
        config.as_ref(),
        args.data_dir.as_deref(),
        observer,
        Surface::Agent,
    )?;
    setup.mount_mcp_servers().await?;
    let setup = Arc::new(setup);
    let at_exit = setup.clone();
    if !args.quiet {
        eprintln!("{}", setup.banner);
    }
    let load_session = args.data_dir.is_some();
    let open: Sessions = Arc::default();
    let on_new = open.clone();
    let on_load = open.clone();
    let on_prompt = open.clone();
    let on_cancel = open;
    let load_setup = setup.clone();

    let served = acp::Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |_request: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new().load_session(load_session))
                        .agent_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION"))),
                )
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |_request: NewSessionRequest, responder, _cx| match setup.parent(wording::ACP_LABEL) {
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
            async move |request: LoadSessionRequest, responder, cx| {
                let id = request.session_id.to_string();
                let loaded = {
                    let open = sessions(&on_load);
                    open.get(&id).map(|session| session.agent.clone())
                };
                let agent = match loaded {
                    Some(agent) => agent,
                    None => match load_setup.resume(&id) {
                        Ok((agent, repairs)) => {
                            for repair in repairs {
                                eprintln!("{}", wording::resume_repaired(&id, &repair));
                            }
                            sessions(&on_load).insert(
                                id.clone(),
                                Session {
                                    agent: agent.clone(),
                                    running: None,
                                },
                            );
                            agent
                        }
                        Err(failure) => {
                            return responder.respond_with_error(acp::Error::new(
                                acp::ErrorCode::INVALID_PARAMS,
                                failure.message().to_owned(),
                            ));
                        }
                    },
                };
                for update in updates::replay(&agent.history(), load_setup.delegation_tools()) {
                    cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
                }
                responder.respond(LoadSessionResponse::new())
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
                                wording::PROMPT_ALREADY_RUNNING,
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
                        wording::unknown_session(&session_id),
                    ));
                };
                let text = prompt_text(&request.prompt);
                let origin = origin(request.meta.as_ref());
                let open = on_prompt.clone();
                let sender = cx.clone();
                let streams = streams.clone();
                cx.spawn(async move {
                    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
                    streams.open(agent.id(), events);
                    let run = agent.run_from(text, &cancel, &origin);
                    tokio::pin!(run);
                    // Every event is sent before the run returns: forward
                    // them as they come, then the rest, then the answer.
                    let outcome = loop {
                        tokio::select! {
                            outcome = &mut run => break outcome,
                            Some(event) = received.recv() => {
                                for update in updates::live(event) {
                                    sender.send_notification(SessionNotification::new(session_id.clone(), update))?;
                                }
                            }
                        }
                    };
                    streams.close(agent.id());
                    while let Ok(event) = received.try_recv() {
                        for update in updates::live(event) {
                            sender.send_notification(SessionNotification::new(session_id.clone(), update))?;
                        }
                    }
                    if let Some(session) = sessions(&open).get_mut(&session_id.to_string()) {
                        session.running = None;
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
    served.map_err(|error| Failure::failed(wording::acp_connection_failed(&error)))
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
