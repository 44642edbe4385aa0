//! The provider: start = spawn + handshake; publication; result; dispose.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason as AcpStop;
use dsh_process::ChildSpec;
use dsh_subagent_api::{
    AgentRef, Capabilities, ContentBlock, RemoteChild, RemoteEnd, RemoteSubagent, StartRequest, StopReason,
    SubagentError, SubagentProvider, SubagentResult, SubagentRun, concat_text,
};
use futures::channel::oneshot;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use tokio_util::sync::CancellationToken;

use crate::child_update::{ChildUpdate, ProgressSink};
use crate::config::AcpConfig;
use crate::diagnostic::{Diagnostic, Stage};
use crate::process::ChildProcess;
use crate::session::{AUTH_REQUIRED, Broken, Conversation, Ended, converse, map_stop};
use crate::transport::{AuthOffer, RunState, reader, writer};
use crate::wording;

/// How long a failed run whose child closed the connection waits for the
/// child's exit status and the end of its stderr before writing the
/// diagnostic without them.
const EXIT_WAIT: Duration = Duration::from_millis(1000);
const STDERR_WAIT: Duration = Duration::from_millis(200);

/// Runs each delegation as an out-of-process ACP child; see the crate docs.
pub struct AcpProvider {
    config: Arc<AcpConfig>,
    progress: Option<ProgressSink>,
}

impl std::fmt::Debug for AcpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpProvider")
            .field("config", &self.config)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl AcpProvider {
    /// A provider for this configuration, checked by [`AcpConfig::validate`].
    pub fn new(config: AcpConfig) -> Result<Self, SubagentError> {
        config
            .validate()
            .map_err(|error| SubagentError::failed_with_code(error.to_string(), crate::ErrorCode::InvalidConfig))?;
        Ok(Self {
            config: Arc::new(config),
            progress: None,
        })
    }

    /// Hands every child's reports while it works (its tool calls, its plan,
    /// its answer as it streams; see [`ChildUpdate`]) to `sink`, with the id
    /// of the run they belong to. Without one, a child's reports are read
    /// only for its answer.
    #[must_use]
    pub fn with_progress(mut self, sink: impl Fn(&str, &ChildUpdate) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(sink));
        self
    }

    /// The configuration.
    pub fn config(&self) -> &AcpConfig {
        &self.config
    }
}

impl SubagentProvider for AcpProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        // A call run again after an interruption whose child ran here: that
        // process ended with its parent's, and its session cannot be taken
        // up again. The call reads as disconnected, never as a new child.
        if let Some(child) = rerun_child(&request) {
            return Box::pin(async move { Ok(disconnected(&request, child)) });
        }
        Box::pin(start(self.config.clone(), self.progress.clone(), request))
    }
}

/// Aborts the conversation task if `start` is dropped or fails.
struct AbortOnDrop(Option<JoinHandle<Result<Ended, Broken>>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

async fn start(
    config: Arc<AcpConfig>,
    progress: Option<ProgressSink>,
    request: StartRequest,
) -> Result<SubagentRun, SubagentError> {
    if request.cancel.is_cancelled() {
        return Err(SubagentError::aborted(wording::ABORTED_BEFORE_START));
    }
    // Known from the start: the child's reports carry it.
    let id = format!("acp-{}", uuid::Uuid::new_v4());
    let cwd: PathBuf = match &config.program.launch.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir()
            .map_err(|error| SubagentError::failed_with_code(wording::no_cwd(&error), crate::ErrorCode::NoCwd))?,
    };
    let spec = crate::process::spec(&config, &cwd);
    let (process, pipes) = ChildProcess::spawn(&spec).map_err(|error| {
        SubagentError::failed_with_code(
            wording::spawn_failed(&config.program.command, &error),
            crate::ErrorCode::SpawnFailed,
        )
    })?;
    let process = Arc::new(process);
    tracing::debug!(pgid = process.group_id(), command = %config.program.command.display(), "{}", wording::LOG_CHILD_STARTED);

    let state = Arc::new(RunState::default());
    let run_cancel = request.cancel.child_token();
    let conversation = conversation(&config, &request, &spec, cwd, progress.map(|sink| (id.clone(), sink)));
    let (published_tx, published) = oneshot::channel();
    let (done_tx, done) = watch::channel(false);
    let task = tokio::spawn({
        let outgoing = writer(pipes.stdin, process.stdin_closer());
        let incoming = reader(pipes.stdout, state.clone(), config.max_line_bytes.bytes());
        let (state, cancel) = (state.clone(), run_cancel.clone());
        async move {
            let ended = converse(conversation, incoming, outgoing, state, cancel, published_tx).await;
            let _ = done_tx.send(true);
            ended
        }
    });
    let task = AbortOnDrop(Some(task));
    let handle = until_published(task, published, &process, &state, &config, &request.cancel).await?;
    let log = ParentLog::started(&request, &config, &state, &id);
    Ok(published_run(
        id,
        handle,
        Published {
            process,
            state,
            run_cancel,
            done,
            config,
            log,
        },
    ))
}

/// The child in another process that a rerun call had started, as its
/// parent recorded it.
fn rerun_child(request: &StartRequest) -> Option<(String, RemoteChild)> {
    let child = request.provenance().rerun.as_ref()?.child.as_ref()?;
    Some((child.id.clone(), child.remote.clone()?))
}

/// The run of a child that was interrupted in another process: over at
/// once, [disconnected](StopReason::Disconnected), saying what is known of
/// it; its parent's records say so too.
fn disconnected(request: &StartRequest, (id, mut child): (String, RemoteChild)) -> SubagentRun {
    let task_id = child.task_id.clone();
    let why = crate::wording::interrupted_child(&child.provider);
    child.at_ms = now_ms();
    child.ended = Some(RemoteEnd::new(StopReason::Disconnected.as_str(), 0));
    request.parent.record_remote_child(&id, &child);
    let diagnostic = match task_id {
        Some(task) => crate::wording::disconnected_with_task(&id, &task, &why),
        None => crate::wording::disconnected(&id, &why),
    };
    let result = SubagentResult::new(StopReason::Disconnected, Vec::new()).with_diagnostic(diagnostic);
    SubagentRun::new(id, async move { Ok(result) }, || async { Ok(()) })
}

/// What the parent's records keep of a published child
/// ([`AgentRef::record_remote_child`]): its start, then its end.
struct ParentLog {
    parent: AgentRef,
    id: String,
    child: RemoteChild,
}

impl ParentLog {
    /// Records the start: how the child came about, its session, and the
    /// data directory it named.
    fn started(request: &StartRequest, config: &AcpConfig, state: &RunState, id: &str) -> Self {
        let mut child = RemoteChild::new(config.name.clone(), now_ms());
        child.tool.clone_from(&request.provenance().tool);
        child.call_id.clone_from(&request.provenance().call_id);
        child.task_id.clone_from(&request.provenance().task_id);
        child.label.clone_from(&request.label);
        child.background = request.mode == dsh_subagent_api::RunMode::Background;
        if let Some(opened) = state.opened() {
            child.session = Some(opened.session);
            child.data_dir = opened.data_dir;
        }
        request.parent.record_remote_child(id, &child);
        Self {
            parent: request.parent.clone(),
            id: id.to_owned(),
            child,
        }
    }

    /// Records the end: its stop reason, its answer's size, and the
    /// subagent sessions it announced.
    fn ended(mut self, result: &SubagentResult, subagents: Vec<RemoteSubagent>) {
        self.child.at_ms = now_ms();
        self.child.subagents = subagents;
        let answer_bytes = result
            .output
            .iter()
            .filter_map(ContentBlock::as_text)
            .map(|text| text.len() as u64)
            .sum();
        self.child.ended = Some(RemoteEnd::new(result.stop_reason.as_str(), answer_bytes));
        self.parent.record_remote_child(&self.id, &self.child);
    }
}

/// Now, in milliseconds since the Unix epoch (0 before it).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
}

/// What the conversation task is given: the prompt's text, where and how the
/// child runs, what it may ask, its limits, its trace context, and where its
/// progress goes.
fn conversation(
    config: &AcpConfig,
    request: &StartRequest,
    spec: &ChildSpec,
    cwd: PathBuf,
    progress: Option<(String, ProgressSink)>,
) -> Conversation {
    let env_set = spec
        .child_env()
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    Conversation {
        prompt: concat_text(&request.prompt),
        cwd,
        permission: config.permission,
        auth: config.auth.clone(),
        env_set,
        turn_timeout: config.turn_timeout,
        cancel_grace: config.cancel_grace,
        max_output_bytes: config.max_output_bytes.bytes(),
        trace_context: request.origin.span().map(trace_meta).unwrap_or_default(),
        progress,
        origin: request.origin.span().cloned(),
    }
}

/// Waits until the child's session is published, then hands back the
/// conversation task. On a cancellation, a start-up timeout or a
/// conversation that ended first, the child is released and the start fails
/// with why.
async fn until_published(
    mut task: AbortOnDrop,
    published: oneshot::Receiver<()>,
    process: &ChildProcess,
    state: &RunState,
    config: &AcpConfig,
    cancel: &CancellationToken,
) -> Result<JoinHandle<Result<Ended, Broken>>, SubagentError> {
    enum Startup {
        Published,
        Ended,
        Cancelled,
        TimedOut,
    }
    let startup = tokio::select! {
        biased;
        () = cancel.cancelled() => Startup::Cancelled,
        published = published => if published.is_ok() { Startup::Published } else { Startup::Ended },
        () = tokio::time::sleep(config.startup_timeout) => Startup::TimedOut,
    };
    let failure = match startup {
        Startup::Published => None,
        Startup::Cancelled => Some(Err(SubagentError::aborted(wording::ABORTED_WHILE_STARTING))),
        Startup::TimedOut => Some(Ok((wording::startup_timed_out(config.startup_timeout), EndedBy::Other))),
        Startup::Ended => {
            let ended = match task.0.take() {
                Some(handle) => handle.await,
                None => Ok(Err(Broken::Closed)),
            };
            Some(Ok(describe_end(ended, state, config)))
        }
    };
    if let Some(failure) = failure {
        drop(task);
        let stage = state.stage();
        let error = match failure {
            Err(aborted) => aborted,
            Ok((what, ended_by)) => {
                let diagnostic = diagnose(process, stage, what, ended_by, cancel).await;
                SubagentError::failed_with_code(wording::start_failed(&diagnostic), crate::ErrorCode::StartFailed)
            }
        };
        release_failed_start(process, config, cancel).await;
        tracing::debug!(code = error.code().as_str(), "{}", wording::log_start_failed(&error));
        return Err(error);
    }
    task.0
        .take()
        .ok_or_else(|| SubagentError::failed(wording::CONVERSATION_TASK_LOST))
}

/// What a published run keeps for its result and its release.
struct Published {
    process: Arc<ChildProcess>,
    state: Arc<RunState>,
    /// The conversation's token: cancelled on release.
    run_cancel: CancellationToken,
    /// Set once the conversation task has ended.
    done: watch::Receiver<bool>,
    config: Arc<AcpConfig>,
    log: ParentLog,
}

/// The run of a published conversation: its result settles once the
/// conversation task ends; its release cancels the conversation, gives it
/// its grace to end, then tears the child down.
fn published_run(id: String, handle: JoinHandle<Result<Ended, Broken>>, published: Published) -> SubagentRun {
    let Published {
        process,
        state,
        run_cancel,
        mut done,
        config,
        log,
    } = published;
    let result = {
        let (process, run_cancel, config) = (process.clone(), run_cancel.clone(), config.clone());
        async move {
            let result = settle(handle.await, &state, &process, &run_cancel, &config).await;
            // Its run is over: a subagent session it left running is
            // closed as disconnected.
            let subagents = state.subagents().close();
            log.ended(&result, subagents);
            Ok(result)
        }
    };
    let dispose = move || async move {
        run_cancel.cancel();
        let conversation_end = config.cancel_grace + Duration::from_secs(1);
        let _ = tokio::time::timeout(conversation_end, done.wait_for(|done| *done)).await;
        let torn = process.teardown(&config.program.launch.teardown).await;
        tracing::debug!(pgid = process.group_id(), ?torn, "{}", wording::LOG_CHILD_RELEASED);
        torn.map(|_| ())
            .map_err(|error| SubagentError::failed_with_code(error, crate::ErrorCode::TeardownFailed))
    };
    SubagentRun::new(id, result, dispose)
}

/// Releases the child of a start that failed: the whole teardown ladder,
/// unless the request is cancelled meanwhile. Then the group is SIGKILLed at
/// once (its processes are collected in the background) and the start
/// returns its own error without waiting, so a caller that stops waiting at
/// the cancellation still reads the real cause.
async fn release_failed_start(process: &ChildProcess, config: &AcpConfig, cancel: &CancellationToken) {
    tokio::select! {
        biased;
        () = cancel.cancelled() => process.kill(),
        torn = process.teardown(&config.program.launch.teardown) => {
            if let Err(teardown) = torn {
                tracing::warn!("{teardown}");
            }
        }
    }
}

/// What ended a conversation that did not answer or start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndedBy {
    /// The child's own exit: only a closed connection says so. Its exit
    /// status and last stderr are worth waiting for.
    ChildExit,
    /// Anything else (an error reply, a fault we caught, a timeout, an
    /// error stop), which implies no exit: any exit after it is our doing.
    Other,
}

/// What ended a conversation that did not answer, in words, and whether the
/// child's own exit ended it.
fn describe_end(
    ended: Result<Result<Ended, Broken>, tokio::task::JoinError>,
    state: &RunState,
    config: &AcpConfig,
) -> (String, EndedBy) {
    if let Some(fault) = state.take_fault() {
        return (fault.to_string(), EndedBy::Other);
    }
    if let Some(raw) = state.raw_stop_reason()
        && !["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"].contains(&raw.as_str())
    {
        let raw: String = raw.chars().filter(char::is_ascii_graphic).take(64).collect();
        return (wording::unknown_stop(&raw), EndedBy::Other);
    }
    match ended {
        Ok(Ok(Ended::AuthNotOffered(id))) => (
            wording::auth_not_offered(&id, AuthOffer::listed(&state.auth_offers()).as_deref()),
            EndedBy::Other,
        ),
        Ok(Ok(_)) => (wording::ENDED_EARLY.to_owned(), EndedBy::Other),
        Ok(Err(Broken::Closed)) => (wording::CLOSED_BEFORE_ANSWER.to_owned(), EndedBy::ChildExit),
        Ok(Err(Broken::Failed(error))) if error.code == AUTH_REQUIRED => (
            wording::request_needs_auth(
                &error,
                &config.auth.required(AuthOffer::listed(&state.auth_offers()).as_deref()),
            ),
            EndedBy::Other,
        ),
        Ok(Err(Broken::Failed(error))) => (wording::request_failed(&error), EndedBy::Other),
        Err(error) => (wording::conversation_task_failed(&error), EndedBy::Other),
    }
}

/// A diagnostic for `what` at `stage`. When the child's own exit ended the
/// conversation ([`EndedBy::ChildExit`]), waits briefly for its status and
/// last stderr (not past a cancellation); otherwise quotes the stderr tail
/// as it is, and no exit status: any exit then is our doing.
async fn diagnose(
    process: &ChildProcess,
    stage: Stage,
    what: String,
    ended_by: EndedBy,
    cancel: &CancellationToken,
) -> Diagnostic {
    let (exit, stderr) = if ended_by == EndedBy::ChildExit {
        let patient = async {
            (
                process.wait_exit(EXIT_WAIT).await,
                process.stderr_tail(STDERR_WAIT).await,
            )
        };
        tokio::select! {
            biased;
            waited = patient => waited,
            () = cancel.cancelled() => (process.exit(), process.stderr_tail(Duration::ZERO).await),
        }
    } else {
        (None, process.stderr_tail(Duration::ZERO).await)
    };
    Diagnostic {
        stage,
        what,
        exit,
        stderr,
    }
}

/// The run's result from how its conversation ended.
async fn settle(
    ended: Result<Result<Ended, Broken>, tokio::task::JoinError>,
    state: &RunState,
    process: &ChildProcess,
    cancel: &CancellationToken,
    config: &AcpConfig,
) -> SubagentResult {
    let output = state.output();
    let blocks = if output.is_empty() {
        Vec::new()
    } else {
        vec![ContentBlock::text(output)]
    };
    match ended {
        Ok(Ok(Ended::Answered(stop))) => {
            let reason = map_stop(stop);
            let result = SubagentResult::new(reason.clone(), blocks);
            if reason == StopReason::Error {
                let diagnostic = diagnose(
                    process,
                    Stage::Prompt,
                    wording::error_stop(&stop_name(stop)),
                    EndedBy::Other,
                    cancel,
                )
                .await;
                return result.with_diagnostic(diagnostic.to_string());
            }
            result
        }
        Ok(Ok(Ended::TimedOut(acknowledged))) if !cancel.is_cancelled() => {
            let limit = config.turn_timeout.unwrap_or_default();
            let what = wording::turn_timed_out(limit, acknowledged.is_some(), config.cancel_grace);
            let diagnostic = diagnose(process, Stage::Prompt, what, EndedBy::Other, cancel).await;
            tracing::warn!("{}", wording::log_run_timed_out(&diagnostic));
            SubagentResult::new(StopReason::Error, blocks).with_diagnostic(diagnostic.to_string())
        }
        Ok(Ok(Ended::Cancelled(acknowledged))) => {
            let result = SubagentResult::new(StopReason::Aborted, blocks);
            match acknowledged {
                Some(_) => result,
                None => result.with_diagnostic(wording::cancel_ignored(config.cancel_grace)),
            }
        }
        // Local cancellation wins over whatever the child did after it.
        _ if cancel.is_cancelled() => SubagentResult::new(StopReason::Aborted, blocks),
        other => {
            let stage = state.stage();
            let (what, ended_by) = describe_end(other, state, config);
            let diagnostic = diagnose(process, stage, what, ended_by, cancel).await;
            tracing::warn!("{}", wording::log_run_failed(&diagnostic));
            SubagentResult::new(StopReason::Error, blocks).with_diagnostic(diagnostic.to_string())
        }
    }
}

/// `max_turn_requests` and other non-success stops that map to `error`.
pub(crate) fn stop_name(stop: AcpStop) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{stop:?}"))
}

/// The W3C trace context of the span that started the child, for the `_meta`
/// of its requests (empty when no trace is being exported).
fn trace_meta(span: &tracing::Span) -> serde_json::Map<String, serde_json::Value> {
    dsh_subagent_api::trace::inject(span)
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect()
}
