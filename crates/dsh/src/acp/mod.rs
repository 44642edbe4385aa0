//! `dsh acp`: the dsh agent served as an Agent Client Protocol (v1) agent on
//! stdio, through the official SDK.
//!
//! - `initialize` → protocol v1; `loadSession` when transcripts are kept
//!   (`--data-dir`); MCP servers over stdio and Streamable HTTP
//!   (`mcpCapabilities.http`). It is answered before the agent setup is
//!   built, which then happens while the client reads the answer; a setup
//!   that fails (a configured MCP server that cannot start) ends `dsh acp`
//!   with exit 2 before any session exists.
//! - `session/new` → a fresh parent agent (the same setup as `dsh run`) on
//!   tools of its own: the shared ones and the MCP servers the client gave,
//!   started (or reached) for this session ([`mcp`]); the session id is the
//!   agent's id. A server that cannot start fails the request, naming it.
//! - `session/load` → the parent of that id, continued from its transcript
//!   (as `dsh run --resume`), with the MCP servers this request gives; its
//!   history is replayed as `session/update`s before the answer
//!   ([`updates::replay`]). An unknown id is refused without naming others.
//! - `session/prompt` → one [`Agent::run`](dsh_agent::Agent::run) of the
//!   prompt's text, streamed as it happens ([`updates::live`]): a chunk per
//!   text delta (a burst of deltas ready together is one chunk,
//!   [`stream::coalesce`]), each tool call and its end, the children's progress on
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
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, SessionNotification, StopReason,
};
use agent_client_protocol as acp;
use dsh_agent::{Agent, AgentStop};
use dsh_subagent_api::SpanOrigin;
use dsh_tools::CancellationToken;

use crate::cli::AcpArgs;
use crate::progress::Progress;
use crate::resume::ResumeError;
use crate::runtime::Setup;
use crate::setup::Surface;
use crate::{Failure, wording};

mod mcp;
mod stdio;
mod stream;
mod updates;

use mcp::SessionTools;
use stdio::Stdio;
use stream::{Event, Streams, Tee};

/// One ACP session: a parent agent, its tools (the shared ones and its
/// client's MCP servers), and the token of its running prompt.
struct Session {
    agent: Agent,
    tools: SessionTools,
    running: Option<CancellationToken>,
}

type Sessions = Arc<Mutex<HashMap<String, Session>>>;

/// How long the agent setup waits for the first answer to be out before it
/// is built anyway (a client that sends nothing still learns at once of a
/// configured MCP server that cannot start).
const SETUP_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// The agent setup, once it is built: `session/new` and `session/load` wait
/// for it. A setup that fails ends `dsh acp` with that failure (exit 2); a
/// request still waiting then gets an internal error, if it is answered at all.
#[derive(Clone)]
struct SetupHandle(tokio::sync::watch::Receiver<Option<Arc<Setup>>>);

impl SetupHandle {
    async fn get(&self) -> Result<Arc<Setup>, acp::Error> {
        let mut ready = self.0.clone();
        let setup = ready
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|setup| setup.clone());
        setup.ok_or_else(|| acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, wording::ACP_SETUP_FAILED))
    }
}

fn sessions(sessions: &Sessions) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
    sessions.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How an agent run answers `session/prompt`.
fn stop_reason(stop: &AgentStop) -> Result<StopReason, acp::Error> {
    match stop {
        AgentStop::Completed => Ok(StopReason::EndTurn),
        AgentStop::MaxTokens | AgentStop::TokenBudget(_) => Ok(StopReason::MaxTokens),
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

/// The events already waiting on a prompt's channel, without waiting for more.
fn waiting(received: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> impl Iterator<Item = Event> + '_ {
    std::iter::from_fn(|| received.try_recv().ok())
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

/// `session/new`: a parent agent on the session's own tools, with the MCP
/// servers its client gave started; the session id is the agent's id.
async fn create_session(setup: &Setup, open: &Sessions, request: &NewSessionRequest) -> Result<String, acp::Error> {
    let tools = SessionTools::mount(setup, &request.mcp_servers, &request.cwd).await?;
    match setup.parent_on(setup.runtime_with(tools.registry().clone()), wording::ACP_LABEL) {
        Ok(agent) => {
            let id = agent.id().to_string();
            let session = Session {
                agent,
                tools,
                running: None,
            };
            sessions(open).insert(id.clone(), session);
            Ok(id)
        }
        Err(failure) => {
            let mut tools = tools;
            tools.release().await;
            Err(acp::Error::new(
                acp::ErrorCode::INTERNAL_ERROR,
                failure.message().to_owned(),
            ))
        }
    }
}

/// `session/load`: the parent of that id continued from its transcript, on
/// its own tools with the MCP servers this request gives. A session open in
/// this process is continued the same way, its earlier servers released
/// first, unless a prompt of it is running.
async fn continue_session(setup: &Setup, open: &Sessions, request: &LoadSessionRequest) -> Result<Agent, acp::Error> {
    let id = request.session_id.to_string();
    let earlier = {
        let mut open = sessions(open);
        if open.get(&id).is_some_and(|session| session.running.is_some()) {
            return Err(acp::Error::new(
                acp::ErrorCode::INVALID_REQUEST,
                wording::PROMPT_ALREADY_RUNNING,
            ));
        }
        open.remove(&id)
    };
    if let Some(mut earlier) = earlier {
        earlier.tools.release().await;
    }
    let mut tools = SessionTools::mount(setup, &request.mcp_servers, &request.cwd).await?;
    let resumed = setup.resume_on(setup.runtime_with(tools.registry().clone()), &id);
    let (agent, repairs) = match resumed {
        Ok(resumed) => resumed,
        Err(error) => {
            tools.release().await;
            return Err(match error {
                // The client learns only that the id cannot be loaded: the
                // full reason names the data directory and lists the other
                // sessions, which are not its business. The person running
                // dsh reads it on stderr.
                ResumeError::Unknown(_) => {
                    acp::Error::new(acp::ErrorCode::INVALID_PARAMS, wording::unknown_session(&id))
                }
                ResumeError::Failed(failure) => {
                    eprintln!("{}", failure.message());
                    acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, wording::session_not_loaded(&id))
                }
            });
        }
    };
    for repair in repairs {
        eprintln!("{}", wording::resume_repaired(&id, &repair));
    }
    let session = Session {
        agent: agent.clone(),
        tools,
        running: None,
    };
    sessions(open).insert(id, session);
    Ok(agent)
}

pub(crate) async fn serve(args: AcpArgs) -> Result<(), Failure> {
    let config = crate::config::load_for_mounting(args.agent.config.as_deref())?;
    let progress = Arc::new(Progress::new(args.quiet));
    let delegation_tools = crate::setup::delegation_tool_names(config.as_ref());
    let streams = Arc::new(Streams::new(delegation_tools));
    let observer = Arc::new(Tee(progress, streams.clone()));
    let Stdio {
        lines,
        answered,
        blocking,
    } = Stdio::open();
    // The agent setup (its harness, tools and configured MCP servers) is
    // built once `initialize` is answered, or after SETUP_WAIT without a
    // request: the client reads that answer and sends `session/new`
    // meanwhile, which waits for the setup ([`SetupHandle`]).
    let (publish, setup) = tokio::sync::watch::channel(None);
    let setup = SetupHandle(setup);
    let build = async {
        let _ = tokio::time::timeout(SETUP_WAIT, answered.notified()).await;
        let mut setup = Setup::new(
            &args.agent,
            config.as_ref(),
            args.data_dir.as_deref(),
            observer,
            Surface::Agent,
        )?;
        setup.mount_mcp_servers().await?;
        let setup = Arc::new(setup);
        if !args.quiet {
            eprintln!("{}", setup.banner);
        }
        publish.send_replace(Some(setup.clone()));
        Ok::<_, Failure>(setup)
    };
    let load_session = args.data_dir.is_some();
    let open: Sessions = Arc::default();
    let on_new = open.clone();
    let on_load = open.clone();
    let on_prompt = open.clone();
    let on_cancel = open.clone();
    let at_end = open;
    let load_setup = setup.clone();

    let served = acp::Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |_request: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(load_session)
                                .mcp_capabilities(McpCapabilities::new().http(true)),
                        )
                        .agent_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION"))),
                )
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                // Starting the client's MCP servers takes time: off the
                // connection's loop, so other sessions are served meanwhile.
                let (setup, open) = (setup.clone(), on_new.clone());
                cx.spawn(async move {
                    let setup = match setup.get().await {
                        Ok(setup) => setup,
                        Err(error) => return responder.respond_with_error(error),
                    };
                    match create_session(&setup, &open, &request).await {
                        Ok(id) => responder.respond(NewSessionResponse::new(id)),
                        Err(error) => responder.respond_with_error(error),
                    }
                })
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let (setup, open, sender) = (load_setup.clone(), on_load.clone(), cx.clone());
                cx.spawn(async move {
                    let setup = match setup.get().await {
                        Ok(setup) => setup,
                        Err(error) => return responder.respond_with_error(error),
                    };
                    let agent = match continue_session(&setup, &open, &request).await {
                        Ok(agent) => agent,
                        Err(error) => return responder.respond_with_error(error),
                    };
                    for update in updates::replay(&agent.history(), setup.delegation_tools()) {
                        sender.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
                    }
                    responder.respond(LoadSessionResponse::new())
                })
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
                    // them as they come (those ready together at once,
                    // coalesced), then the rest, then the answer.
                    let forward = |events: Vec<Event>| -> Result<(), acp::Error> {
                        for update in stream::coalesce(events).into_iter().flat_map(updates::live) {
                            sender.send_notification(SessionNotification::new(session_id.clone(), update))?;
                        }
                        Ok(())
                    };
                    let outcome = loop {
                        tokio::select! {
                            outcome = &mut run => break outcome,
                            Some(event) = received.recv() => {
                                forward(std::iter::once(event).chain(waiting(&mut received)).collect())?;
                            }
                        }
                    };
                    streams.close(agent.id());
                    forward(waiting(&mut received).collect())?;
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
        .connect_to(lines);
    // A setup that fails ends dsh at once (exit 2, as before any answer); a
    // connection that ends first (stdin closed) still gets its setup built,
    // so a configured MCP server that cannot start is reported either way.
    let (served, at_exit) = {
        tokio::pin!(served, build);
        tokio::select! {
            setup = &mut build => {
                let setup = setup?;
                (served.await, setup)
            }
            served = &mut served => {
                answered.notify_one();
                (served, build.await?)
            }
        }
    };
    drop(blocking);
    // The end of the connection ends every session: the children its agent
    // left running in the background are killed and released, then its
    // client's servers go.
    let ended: Vec<Session> = sessions(&at_end).drain().map(|(_, session)| session).collect();
    for mut session in ended {
        at_exit
            .tasks()
            .dispose_owner(session.agent.id(), wording::ACP_CONNECTION_CLOSED)
            .await;
        session.tools.release().await;
    }
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
