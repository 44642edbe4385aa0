//! `dsh acp`: the dsh agent served as an Agent Client Protocol (v1) agent on
//! stdio, through the official SDK.
//!
//! - `initialize` → protocol v1; `loadSession` when transcripts are kept
//!   (`--data-dir`); MCP servers over stdio and Streamable HTTP
//!   (`mcpCapabilities.http`). It is answered before the shared runtime is
//!   built, which then happens while the client reads the answer; a build
//!   that fails (a configured MCP server that cannot start) ends `dsh acp`
//!   with exit 2 before any session exists.
//! - `session/new` → a fresh parent agent (the same runtime as `dsh run`) on
//!   tools of its own: the shared ones and the MCP servers the client gave,
//!   started (or reached) for this session ([`session_tools`]); the session id is the
//!   agent's id. A server that cannot start fails the request, naming it.
//! - `session/load` → the parent of that id, continued from its transcript
//!   (as `dsh run --resume`), with the MCP servers this request gives; its
//!   history is replayed as `session/update`s before the answer
//!   ([`updates::replay`]). An unknown id is refused without naming others.
//! - `session/prompt` → one [`Agent::run`](dsh_agent::Agent::run) of the
//!   prompt's text, streamed as it happens ([`updates::live`]): a chunk per
//!   text delta (a burst of deltas ready together is one chunk,
//!   [`stream::coalesce`]), each tool call and its end, the children's progress on
//!   their delegation call; then the stop reason ([`prompt`]). A run that
//!   fails is answered with a JSON-RPC error carrying the reason. One prompt
//!   runs per session at a time; its turn ends on every way out of the
//!   prompt, so a failure part-way never leaves the session refusing every
//!   later prompt ([`session`]).
//! - `session/cancel` → cancels that session's running prompt, which then
//!   answers `cancelled`; what was streamed stands.
//!
//! Each method has one handler on [`Server`], the state every handler
//! shares; [`serve`] only wires them to the connection.
//!
//! Stdout carries nothing but the protocol; the banner, progress and logs go
//! to stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use acp::schema::ProtocolVersion;
use acp::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptRequest, SessionCapabilities, SessionCloseCapabilities, SessionNotification,
};
use agent_client_protocol as acp;
use dsh_agent::transcript::{TreeLock, TreeLockError};
use dsh_subagent_api::SpanOrigin;

use crate::cli::AcpArgs;
use crate::config::Config;
use crate::failure::Failure;
use crate::harness::Surface;
use crate::observe::{Tee, TreeObserver};
use crate::progress::Progress;
use crate::resume::{self, ResumeError};
use crate::runtime::SharedRuntime;
use crate::wording;

mod event;
mod prompt;
mod replay;
mod session;
mod session_tools;
mod stdio;
mod stream;
mod subagents;
mod updates;

use session::{NextTurn, Session, Sessions};
use session_tools::SessionTools;
use stdio::Stdio;
use stream::Streams;
use subagents::Known;

/// How long the shared runtime waits for the first answer to be out before it
/// is built anyway (a client that sends nothing still learns at once of a
/// configured MCP server that cannot start).
const BUILD_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// The shared runtime, once it is built: `session/new` and `session/load` wait
/// for it. A build that fails ends `dsh acp` with that failure (exit 2); a
/// request still waiting then gets an internal error, if it is answered at all.
#[derive(Clone)]
struct RuntimeHandle(tokio::sync::watch::Receiver<Option<Arc<SharedRuntime>>>);

impl RuntimeHandle {
    async fn get(&self) -> Result<Arc<SharedRuntime>, acp::Error> {
        let mut ready = self.0.clone();
        let shared = ready
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|shared| shared.clone());
        shared.ok_or_else(|| acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, wording::ACP_SETUP_FAILED))
    }
}

/// What every handler of the connection shares: the shared runtime (once
/// built), the open sessions and their turns, and the prompts' streams.
#[derive(Clone)]
struct Server {
    runtime: RuntimeHandle,
    sessions: Arc<Sessions>,
    streams: Arc<Streams>,
    /// Whether `session/load` is offered (transcripts are kept).
    load_session: bool,
    /// Whether the client advertised `subagents` in `initialize`: its
    /// sessions' children are then announced as subagent sessions.
    subagents: Arc<AtomicBool>,
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

/// The `_meta` of a `session/new` answer: where this process keeps its
/// transcripts ([`dsh_subagent_acp::DATA_DIR_META`], an absolute path), so
/// a dsh parent can show the session's own tree; none without a data
/// directory, or when its absolute path cannot be known.
fn records_meta(data_dir: Option<&std::path::Path>) -> Option<acp::v1::schema::Meta> {
    let dir = std::path::absolute(data_dir?).ok()?;
    let mut meta = acp::v1::schema::Meta::new();
    meta.insert(
        dsh_subagent_acp::DATA_DIR_META.to_owned(),
        serde_json::Value::String(dir.to_str()?.to_owned()),
    );
    Some(meta)
}

impl Server {
    /// `initialize`: protocol v1, `loadSession` when transcripts are kept,
    /// MCP servers over HTTP too, `session/close`. A client that advertises
    /// `subagents` has its sessions' children announced.
    fn initialize(&self, request: &InitializeRequest) -> InitializeResponse {
        self.subagents
            .store(request.client_capabilities.subagents.is_some(), Ordering::SeqCst);
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(self.load_session)
                    .mcp_capabilities(McpCapabilities::new().http(true))
                    .session_capabilities(SessionCapabilities::new().close(SessionCloseCapabilities::new())),
            )
            .agent_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION")))
    }

    /// Whether the client advertised `subagents`.
    fn subagents(&self) -> bool {
        self.subagents.load(Ordering::SeqCst)
    }

    /// Refuses a request (`what`: the method's verb) that names a subagent
    /// session this connection announced.
    /// A child's id is known from this connection's announcements, or from
    /// the transcripts kept (a child's record names its parent).
    fn refuse_subagent(&self, id: &str, what: &str) -> Result<(), acp::Error> {
        let recorded = || {
            let shared = self.runtime.0.borrow().clone();
            shared
                .and_then(|shared| Some(crate::resume::is_child(shared.data_dir()?, id)))
                .unwrap_or(false)
        };
        match self.streams.known(id) {
            Known::Running | Known::Ended => Err(subagent_refused(id, what)),
            Known::Unknown if recorded() => Err(subagent_refused(id, what)),
            Known::Unknown => Ok(()),
        }
    }

    /// `session/new`: a parent agent on the session's own tools, with the
    /// MCP servers its client gave started; the session id is the agent's id.
    async fn new_session(&self, request: &NewSessionRequest) -> Result<NewSessionResponse, acp::Error> {
        let shared = self.runtime.get().await?;
        let tools = SessionTools::mount(&shared, &request.mcp_servers, &request.cwd).await?;
        match shared.parent_on(shared.runtime_with(tools.registry().clone()), wording::ACP_LABEL) {
            Ok(agent) => {
                let id = agent.id().to_string();
                // A new tree: only a data directory that refuses the lock
                // file stops it.
                let lock = match lock_session(&shared, agent.id()) {
                    Ok(lock) => lock,
                    Err(error) => {
                        let mut tools = tools;
                        tools.release().await;
                        return Err(acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, wording::failed(&error)));
                    }
                };
                let meta = records_meta(agent.runtime().data_dir());
                let hold = shared.retention().map(|retention| retention.hold(agent.id()));
                self.sessions.insert(
                    id.clone(),
                    Session {
                        agent,
                        tools,
                        _hold: hold,
                        next: NextTurn::New,
                        lock,
                    },
                );
                Ok(NewSessionResponse::new(id).meta(meta))
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

    /// `session/load`: the parent of that id continued from its transcript,
    /// on its own tools with the MCP servers this request gives. A session
    /// open in this process is continued the same way, its earlier servers
    /// released first, unless a prompt of it is running. Returns the
    /// session's history as the `session/update`s that replay it before
    /// the answer, each with its session: with `subagents`, its children's
    /// too ([`replay`]).
    async fn load_session(&self, request: &LoadSessionRequest) -> Result<Vec<replay::Replayed>, acp::Error> {
        let shared = self.runtime.get().await?;
        let id = request.session_id.to_string();
        self.refuse_subagent(&id, "load")?;
        if let Some(mut earlier) = self.sessions.take_idle(&id)? {
            earlier.tools.release().await;
            earlier.unlock();
        }
        let lock = lock_loaded(&shared, &id)?;
        let mut tools = SessionTools::mount(&shared, &request.mcp_servers, &request.cwd).await?;
        let resumed = shared.resume_on(shared.runtime_with(tools.registry().clone()), &id);
        let resume::Resumed {
            agent,
            repairs,
            pending,
            interrupted,
        } = match resumed {
            Ok(resumed) => resumed,
            Err(error) => {
                tools.release().await;
                return Err(not_loaded(error, &id));
            }
        };
        for repair in repairs {
            eprintln!("{}", wording::resume_repaired(&id, &repair));
        }
        // A turn whose calls need a tool this session no longer has is
        // not loaded: the reason names the transcript, for the person
        // running dsh.
        if let Err(failure) = pending.check(&agent) {
            tools.release().await;
            eprintln!("{}", failure.message());
            return Err(acp::Error::new(
                acp::ErrorCode::INTERNAL_ERROR,
                wording::session_not_loaded(&id),
            ));
        }
        // An interrupted tree goes on at the next prompt, and what the
        // replay shows of it says so: a child that will resume is not
        // closed.
        let next = match interrupted {
            true => NextTurn::Resume,
            false => NextTurn::New,
        };
        let replay = self.replay(&shared, agent.id(), next);
        let replay = replay.unwrap_or_else(|| {
            let history = updates::replay(&agent.history(), shared.delegation_tools());
            history.into_iter().map(|update| (id.clone(), update)).collect()
        });
        let hold = shared.retention().map(|retention| retention.hold(agent.id()));
        self.sessions.insert(
            id,
            Session {
                agent,
                tools,
                _hold: hold,
                next,
                lock,
            },
        );
        Ok(replay)
    }

    /// A loaded session's replay with its children ([`replay::replay`]),
    /// for a client that advertised `subagents`; `None` otherwise, or when
    /// its transcript cannot be read again (it was just read to resume it).
    fn replay(&self, shared: &SharedRuntime, id: &dsh_tools::AgentId, next: NextTurn) -> Option<Vec<replay::Replayed>> {
        let data_dir = shared.data_dir().filter(|_| self.subagents())?;
        let path = dsh_agent::transcript::transcript_path(data_dir, id);
        let transcript = dsh_agent::transcript::read_transcript(&path).ok()?;
        let tools = shared.delegation_tools();
        Some(replay::replay(
            data_dir,
            id,
            &transcript,
            tools,
            next == NextTurn::Resume,
        ))
    }

    /// `session/prompt`: begins the session's turn (refused for an unknown
    /// session, or while one of its prompts runs) and runs it off the
    /// connection's loop ([`prompt::run`]), so `session/cancel` and other
    /// sessions are served meanwhile.
    fn prompt(
        &self,
        request: PromptRequest,
        responder: acp::v1::Responder<acp::v1::schema::PromptResponse>,
        cx: &acp::v1::ConnectionTo<acp::Client>,
    ) -> Result<(), acp::Error> {
        let id = request.session_id.to_string();
        let turn = match self.sessions.begin_turn(&id) {
            Ok(turn) => turn,
            Err(error) => {
                // No open session: a subagent session's id is refused as such.
                let error = self.refuse_subagent(&id, "prompt").err().unwrap_or(error);
                return responder.respond_with_error(error);
            }
        };
        let text = prompt::prompt_text(&request.prompt);
        let origin = origin(request.meta.as_ref());
        let connection = prompt::Connection {
            cx: cx.clone(),
            session_id: request.session_id,
            responder,
        };
        let (streams, subagents) = (self.streams.clone(), self.subagents());
        // A task that is never run drops the turn with it: the session is
        // not left running.
        cx.spawn(async move { prompt::run(turn, text, origin, &streams, subagents, connection).await })
    }

    /// `session/cancel`: cancels that session's running prompt, which then
    /// answers `cancelled`; what was streamed stands. With the id of an
    /// announced subagent session still running, cancels that child and
    /// its descendants alone: its parent reads its cancelled result and
    /// goes on. Any other id is logged and ignored.
    fn cancel(&self, notification: &CancelNotification) {
        let id = notification.session_id.to_string();
        if self.sessions.cancel_turn(&id) {
            return;
        }
        match self.streams.known(&id) {
            Known::Running => {
                let shared = self.runtime.0.borrow().clone();
                if !shared.is_some_and(|shared| shared.service().cancel_run(&id)) {
                    tracing::warn!("{}", wording::cancel_ignored_ended(&id));
                }
            }
            Known::Ended => tracing::warn!("{}", wording::cancel_ignored_ended(&id)),
            Known::Unknown => tracing::warn!("{}", wording::cancel_ignored_unknown(&id)),
        }
    }

    /// `session/close`: cancels the session's running prompt, ends it (its
    /// background children are killed and released, then its client's MCP
    /// servers go) and answers. A subagent session's id is refused; an
    /// unknown id too.
    async fn close(&self, request: &CloseSessionRequest) -> Result<CloseSessionResponse, acp::Error> {
        let id = request.session_id.to_string();
        let Some(mut session) = self.sessions.close(&id) else {
            self.refuse_subagent(&id, "close")?;
            return Err(acp::Error::new(
                acp::ErrorCode::INVALID_PARAMS,
                wording::unknown_session(&id),
            ));
        };
        let shared = self.runtime.get().await?;
        shared
            .tasks()
            .dispose_owner(session.agent.id(), wording::ACP_SESSION_CLOSED)
            .await;
        session.tools.release().await;
        session.unlock();
        Ok(CloseSessionResponse::new())
    }

    /// The end of the connection ends every session: the children its agent
    /// left running in the background are killed and released, then its
    /// client's servers go.
    async fn end(&self, shared: &SharedRuntime) {
        for mut session in self.sessions.drain() {
            shared
                .tasks()
                .dispose_owner(session.agent.id(), wording::ACP_CONNECTION_CLOSED)
                .await;
            session.tools.release().await;
            session.unlock();
        }
    }
}

/// The tree lock of the session `session/load` continues, taken before its
/// transcript is touched, as `dsh run --resume` does: a tree another
/// process runs is refused, changing nothing. No data directory, or an
/// unknown id: no lock, and the resume refuses it.
fn lock_loaded(shared: &SharedRuntime, id: &str) -> Result<Option<TreeLock>, acp::Error> {
    match shared.data_dir() {
        Some(data_dir) if resume::is_parent_id(data_dir, id) => lock_session(shared, &dsh_tools::AgentId::new(id))
            .map_err(|error| {
                eprintln!("{}", wording::failed(&error));
                let message = match error {
                    TreeLockError::Busy { .. } => wording::session_busy(&id),
                    _ => wording::session_not_loaded(&id),
                };
                acp::Error::new(acp::ErrorCode::INVALID_REQUEST, message)
            }),
        _ => Ok(None),
    }
}

/// Why `session/load` of `id` could not resume it, as the client reads it.
/// The client learns only that the id cannot be loaded: the full reason
/// names the data directory and lists the other sessions, which are not
/// its business. The person running dsh reads it on stderr.
fn not_loaded(error: ResumeError, id: &str) -> acp::Error {
    match error {
        ResumeError::Unknown(_) => acp::Error::new(acp::ErrorCode::INVALID_PARAMS, wording::unknown_session(&id)),
        ResumeError::Failed(failure) => {
            eprintln!("{}", failure.message());
            acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, wording::session_not_loaded(&id))
        }
    }
}

/// Takes the lock of session `id`'s tree when transcripts are kept, so no
/// other process runs it while the session is open here.
fn lock_session(shared: &SharedRuntime, id: &dsh_tools::AgentId) -> Result<Option<TreeLock>, TreeLockError> {
    match shared.data_dir() {
        Some(data_dir) => TreeLock::acquire(data_dir, id).map(Some),
        None => Ok(None),
    }
}

/// `dsh acp`: loads the configuration, answers the client at once, builds
/// the shared runtime meanwhile ([`build`]), and serves the connection until
/// it ends; then every session ends and the MCP servers go.
pub(crate) async fn serve(args: AcpArgs) -> Result<(), Failure> {
    let config = crate::self_mount::load_for_mounting(args.agent.config.as_deref())?;
    let progress = Arc::new(Progress::new(args.quiet));
    let delegation_tools = crate::harness::delegation_tool_names(config.as_ref());
    let streams = Arc::new(Streams::new(delegation_tools));
    let observer = Arc::new(Tee(progress, streams.clone()));
    let Stdio {
        lines,
        answered,
        blocking,
    } = Stdio::open();
    // The shared runtime (its harness, tools and configured MCP servers) is
    // built once `initialize` is answered, or after BUILD_WAIT without a
    // request: the client reads that answer and sends `session/new`
    // meanwhile, which waits for the runtime ([`RuntimeHandle`]).
    let (publish, built) = tokio::sync::watch::channel(None);
    let built_now = built.clone();
    let build = async {
        let _ = tokio::time::timeout(BUILD_WAIT, answered.notified()).await;
        let shared = build(&args, config.as_ref(), observer).await?;
        publish.send_replace(Some(shared.clone()));
        if let Some(retention) = shared.retention() {
            retention.sweep_periodically();
        }
        Ok::<_, Failure>(shared)
    };
    let server = Server {
        runtime: RuntimeHandle(built),
        sessions: Arc::default(),
        streams,
        load_session: args.data_dir.is_some(),
        subagents: Arc::default(),
    };
    let served = connect(server.clone(), lines);
    // A build that fails ends dsh at once (exit 2, as before any answer); a
    // connection that ends first (stdin closed) still gets its runtime built,
    // so a configured MCP server that cannot start is reported either way.
    let serving = async {
        tokio::pin!(served, build);
        tokio::select! {
            built = &mut build => {
                let shared = built?;
                Ok::<_, Failure>((served.await, shared))
            }
            served = &mut served => {
                answered.notify_one();
                Ok((served, build.await?))
            }
        }
    };
    // SIGINT or SIGTERM ends the server at once, its recording closed as
    // interrupted (the connection's end is its normal end).
    let (served, at_exit) = tokio::select! {
        served = serving => served?,
        stop = crate::signal::stopped() => {
            let shared = built_now.borrow().clone();
            if let Some(shared) = shared {
                shared.finish_recording(args.quiet, Some(stop))?;
            }
            return Err(Failure::interrupted(wording::INTERRUPTED));
        }
    };
    drop(blocking);
    server.end(&at_exit).await;
    at_exit.release_mcp_servers().await;
    at_exit.finish_recording(args.quiet, None)?;
    served.map_err(|error| Failure::failed(wording::acp_connection_failed(&error)))
}

/// The refusal of a request (`what`: the method's verb) that names a
/// subagent session.
fn subagent_refused(id: &str, what: &str) -> acp::Error {
    acp::Error::new(
        acp::ErrorCode::INVALID_PARAMS,
        wording::subagent_session_refused(&id, what),
    )
}

/// The runtime every session shares: the model and the delegation tools,
/// with the configured MCP servers started; its banner shown.
async fn build(
    args: &AcpArgs,
    config: Option<&Config>,
    observer: Arc<dyn TreeObserver>,
) -> Result<Arc<SharedRuntime>, Failure> {
    let mut shared = SharedRuntime::new(&args.agent, config, args.data_dir.as_deref(), observer, Surface::Agent)?;
    // A prompt's answer never leaves background children behind: the turn
    // waits for them and reads their results (and the ACP Subagents RFD
    // wants every announced child ended before the prompt returns).
    shared.set_end_of_run(dsh_agent::EndOfRun::WaitForBackground);
    shared.mount_mcp_servers().await?;
    let shared = Arc::new(shared);
    if !args.quiet {
        eprintln!("{}", shared.banner);
    }
    Ok(shared)
}

/// The connection to the client on `lines`, each ACP method wired to its
/// handler on `server`; it ends when the client closes it.
async fn connect(server: Server, lines: stdio::Lines) -> Result<(), acp::Error> {
    let (on_initialize, on_new, on_load, on_prompt, on_cancel, on_close) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server,
    );
    acp::Agent
        .v1()
        .name("dsh")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond(on_initialize.initialize(&request))
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                // Starting the client's MCP servers takes time: off the
                // connection's loop, so other sessions are served meanwhile.
                let server = on_new.clone();
                cx.spawn(async move { responder.respond_with_result(server.new_session(&request).await) })
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let (server, client) = (on_load.clone(), cx.clone());
                cx.spawn(async move {
                    let replay = match server.load_session(&request).await {
                        Ok(replay) => replay,
                        Err(error) => return responder.respond_with_error(error),
                    };
                    for (session, update) in replay {
                        client.send_notification(SessionNotification::new(session, update))?;
                    }
                    responder.respond(LoadSessionResponse::new())
                })
            },
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| on_prompt.prompt(request, responder, &cx),
            acp::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, cx| {
                let server = on_close.clone();
                cx.spawn(async move { responder.respond_with_result(server.close(&request).await) })
            },
            acp::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                on_cancel.cancel(&notification);
                Ok(())
            },
            acp::on_receive_notification!(),
        )
        .connect_to(lines)
        .await
}
