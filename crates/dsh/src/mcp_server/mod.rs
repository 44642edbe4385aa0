//! `dsh mcp`: the dsh delegation tools served as a Model Context Protocol
//! server, on stdio or over Streamable HTTP (`--listen`).
//!
//! Each MCP session has its own calling agent: a parent agent built like
//! `dsh run`'s that never runs a model turn of its own (the MCP host's model
//! plays its part). It owns the session's children and background tasks;
//! another session (over HTTP, or another `dsh mcp` process, even on the
//! same data directory) cannot read, message or kill them.
//!
//! - **Stdio** serves one session. When the client closes stdin, every call
//!   still running is cancelled, every background task is killed and
//!   released, and the MCP servers of `--mcp-server` are shut down before
//!   dsh exits. Stdout carries nothing but the protocol; the banner,
//!   progress and logs go to stderr.
//! - **HTTP** serves many sessions at `/mcp`, each with its own agent made
//!   when the session opens and released when it ends (DELETE, idle
//!   timeout, or SIGINT/SIGTERM, which end every session before dsh exits).
//!
//! A session's transcripts (its agent's and those of every agent below it)
//! go with it when it ends, unless `--keep-transcripts`
//! ([`crate::retention`]).
//!
//! A call that asked for progress hears its children's lifecycle and work
//! ([`call_reports::CallReports`]).

mod call_reports;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use dsh_agent::Agent;
use dsh_agent::transcript::TreeLock;
use dsh_mcp::{HttpServeOptions, McpToolServer, SessionAgents};
use dsh_subagent_api::BoxFuture;
use dsh_tools::{AgentId, AgentRef, CancellationToken};
use tokio::net::TcpListener;

use crate::cli::McpArgs;
use crate::failure::Failure;
use crate::harness::Surface;
use crate::observe::Tee;
use crate::progress::Progress;
use crate::retention::{Hold, Retention};
use crate::runtime::SharedRuntime;
use crate::wording;

pub(crate) async fn serve(args: McpArgs) -> Result<(), Failure> {
    // SIGINT and SIGTERM are caught from the start (not killing dsh).
    let stop = crate::signal::stopped();
    let config = crate::self_mount::load_for_mounting(args.agent.config.as_deref())?;
    // Over HTTP the port is taken (and the token read) before anything starts.
    let http = match args.listen {
        Some(address) => Some(listen(&args, address).await?),
        None => None,
    };
    let observer = Arc::new(Tee(
        Arc::new(Progress::new(args.quiet)),
        Arc::new(call_reports::CallReports::default()),
    ));
    // The token that guards this server reaches no process dsh starts.
    let withheld: Vec<String> = args.bearer_token_env.iter().cloned().collect();
    let mut shared = SharedRuntime::withholding(
        &args.agent,
        config.as_ref(),
        Some(&args.data_dir),
        observer,
        Surface::McpServer,
        &withheld,
    )?;
    shared.mount_mcp_servers().await?;
    if !args.quiet {
        eprintln!("{}", shared.banner);
    }
    if let Some(retention) = shared.retention() {
        if !args.keep_transcripts {
            retention.remove_with_sessions();
        }
        retention.sweep_periodically();
    }
    let quiet = args.quiet;
    let server = McpToolServer::new(shared.tools().clone())
        .identity("dsh", env!("CARGO_PKG_VERSION"))
        .progress_interval(args.progress_interval.get())
        .on_call_end(move |end| {
            if end.cancelled && !quiet {
                eprintln!("{}", wording::mcp_call_cancelled(end.tool, &end.result.text));
            }
        });
    let shared = Arc::new(shared);
    // On stdio the session ends when stdin closes: a signal interrupts it
    // (and its recording). Over HTTP a signal is how the server is stopped.
    let mut interrupted = None;
    let served = match http {
        None => tokio::select! {
            served = serve_stdio(&shared, &server, &args.data_dir) => served,
            stop = stop => {
                interrupted = Some(stop);
                Err(Failure::interrupted(wording::INTERRUPTED))
            }
        },
        Some((listener, options)) => serve_http(&shared, &server, listener, options, stop).await,
    };
    shared.release_mcp_servers().await;
    shared.finish_recording(args.quiet, interrupted)?;
    served
}

/// One session on stdin and stdout, with one parent agent.
///
/// A session that a crash (or a kill) ended goes on in the next `dsh mcp`
/// on the same data directory: its calling agent is taken up again, and its
/// background tasks come back under their ids (finished ones with their
/// results, interrupted ones running again), so the host's model reads the
/// tasks it knew. A session that ended cleanly leaves no such mark.
async fn serve_stdio(shared: &SharedRuntime, server: &McpToolServer, data_dir: &Path) -> Result<(), Failure> {
    let session = match crate::resume::interrupted_session(data_dir, wording::MCP_LABEL) {
        Some(id) => {
            let session = shared.resume(&id)?.agent;
            shared.recover(&session).await;
            session
        }
        None => shared.parent(wording::MCP_LABEL)?,
    };
    // Held while the session is open; removed when it ends cleanly.
    let lock = TreeLock::acquire(data_dir, session.id()).map_err(|error| Failure::usage(wording::failed(&error)))?;
    let opened = SessionData::open(shared, session.id());
    let served = server
        .serve(session.agent_ref(), tokio::io::stdin(), tokio::io::stdout())
        .await;
    shared
        .tasks()
        .dispose_owner(session.id(), wording::MCP_SESSION_CLOSED)
        .await;
    opened.end().await;
    lock.remove();
    served.map_err(|error| Failure::failed(wording::mcp_failed(&error)))
}

/// What a session keeps in the data directory: its calling agent's
/// transcript, held from sweeps while the session is open; when it ends,
/// the transcripts of that agent and every agent below it go (unless
/// `--keep-transcripts`; [`crate::retention`]).
struct SessionData {
    retention: Option<Arc<Retention>>,
    session: AgentId,
    _hold: Option<Hold>,
}

impl SessionData {
    fn open(shared: &SharedRuntime, session: &AgentId) -> Self {
        let retention = shared.retention().cloned();
        let hold = retention.as_ref().map(|retention| {
            retention.open_session(session);
            retention.hold(session)
        });
        Self {
            retention,
            session: session.clone(),
            _hold: hold,
        }
    }

    /// Ends the session's data; its tasks must be released first.
    async fn end(self) {
        let Self { retention, session, .. } = self;
        let Some(retention) = retention else {
            return;
        };
        let ended = session.clone();
        let error = match tokio::task::spawn_blocking(move || retention.end_session(&session)).await {
            Ok(Ok(_)) => return,
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        tracing::warn!("{}", wording::session_transcripts_not_removed(&ended, &error));
    }
}

/// The HTTP options of the flags (the token read from its variable),
/// checked against `address`, and the listener bound there.
async fn listen(args: &McpArgs, address: SocketAddr) -> Result<(TcpListener, HttpServeOptions), Failure> {
    let mut options = HttpServeOptions::default()
        .max_sessions(usize::from(args.max_sessions))
        .idle_timeout(args.session_idle_timeout.get());
    if let Some(variable) = &args.bearer_token_env {
        match std::env::var(variable) {
            Ok(token) if !token.trim().is_empty() => options = options.bearer_token(token.trim()),
            _ => return Err(Failure::usage(wording::mcp_token_variable_unset(variable))),
        }
    }
    for origin in &args.allowed_origins {
        options = options.allow_origin(origin.clone());
    }
    for host in &args.allowed_hosts {
        options = options.allow_host(host.clone());
    }
    options
        .check(address)
        .map_err(|error| Failure::usage(wording::mcp_failed(&error)))?;
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| Failure::usage(wording::mcp_cannot_listen(&address, &error)))?;
    Ok((listener, options))
}

/// Many sessions at `/mcp`, each with its own parent agent, until SIGINT or
/// SIGTERM; then every session ends before this returns.
async fn serve_http(
    shared: &Arc<SharedRuntime>,
    server: &McpToolServer,
    listener: TcpListener,
    options: HttpServeOptions,
    stop: impl Future<Output = crate::signal::Stop> + Send + 'static,
) -> Result<(), Failure> {
    let address = listener
        .local_addr()
        .map_err(|error| Failure::internal(error.to_string()))?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        stop.await;
        on_signal.cancel();
    });
    // Always shown (even with --quiet): with port 0 it is how a caller
    // learns the port.
    eprintln!("{}", wording::mcp_listening(&address, dsh_mcp::MCP_PATH));
    let agents = Arc::new(Parents {
        shared: shared.clone(),
        open: Mutex::default(),
    });
    server
        .serve_http(listener, options, agents, shutdown)
        .await
        .map_err(|error| Failure::failed(wording::mcp_failed(&error)))
}

/// The parent agent of each HTTP session: made when the session opens, and
/// when it ends its background tasks are killed and released, then its
/// transcripts go ([`SessionData`]).
struct Parents {
    shared: Arc<SharedRuntime>,
    open: Mutex<HashMap<AgentId, (Agent, SessionData)>>,
}

impl SessionAgents for Parents {
    fn open(&self) -> Result<AgentRef, String> {
        let agent = self
            .shared
            .parent(wording::MCP_LABEL)
            .map_err(|failure| failure.message().to_owned())?;
        let reference = agent.agent_ref();
        let data = SessionData::open(&self.shared, reference.id());
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(reference.id().clone(), (agent, data));
        Ok(reference)
    }

    fn close(&self, agent: AgentRef) -> BoxFuture<'static, ()> {
        let parent = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(agent.id());
        let tasks = self.shared.tasks().clone();
        Box::pin(async move {
            tasks.dispose_owner(agent.id(), wording::MCP_SESSION_CLOSED).await;
            if let Some((parent, data)) = parent {
                drop(parent);
                data.end().await;
            }
        })
    }
}
