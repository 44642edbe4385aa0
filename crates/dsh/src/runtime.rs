//! The runtime every parent of `dsh run`, `dsh acp` and `dsh mcp` shares:
//! the chosen model over the mounted tools, with the observer, the task
//! notices and the data directory, and the parent agents on it, new or
//! resumed.

use std::path::Path;
use std::sync::Arc;

use dsh_agent::{Agent, AgentObserver, AgentRuntime, EndOfRun, KeptFacts, KeptUse, Notice, NoticeSource};
use dsh_llm::ChatModel;
use dsh_llm::cassette::Recorder;
use dsh_mcp::ClientOptions;
use dsh_subagent::{SubagentEvent, Subscription};
use dsh_tasks::TaskRegistry;
use dsh_tool_tasks::TaskShelf;
use dsh_tools::ResultPolicy;
use dsh_tools::{AgentId, ToolRegistry};

use crate::cassette_mode::CassetteMode;
use crate::cli::AgentArgs;
use crate::config::Config;
use crate::failure::Failure;
use crate::harness::{MountedHarness, Surface};
use crate::mcp_mounts::SharedMcpServers;
use crate::observe::TreeObserver;
use crate::resume::ResumeError;
use crate::retention::Retention;
use crate::signal::Stop;
use crate::{model, resume, wording};

/// The harness's completion notices, as the agent loop takes them (with the
/// tasks they report) and waits for them.
struct TaskNotices(dsh_harness::Notices);

impl NoticeSource for TaskNotices {
    fn take(&self, agent: &AgentId) -> Vec<Notice> {
        self.0
            .take_with_tasks(agent)
            .into_iter()
            .map(|(task, text)| Notice::of_task(task, text))
            .collect()
    }

    fn wait_for_work(&self, agent: &AgentId) -> dsh_tools::BoxFuture<'static, bool> {
        let notices = self.0.clone();
        let agent = agent.clone();
        Box::pin(async move { notices.wait_for_work(&agent).await })
    }
}

/// A model, a runtime with the delegation tools mounted, the MCP servers to
/// add, and the registrations that keep them alive.
pub(crate) struct SharedRuntime {
    /// The line that names the model.
    pub(crate) banner: String,
    runtime: Arc<AgentRuntime>,
    max_turns: u32,
    /// Set when `--model` or `[model].model` chose the model explicitly.
    explicit_model: bool,
    mounted: MountedHarness,
    /// The observer's subscription to the service's run events.
    _runs: Subscription,
    mcp: SharedMcpServers,
    /// How long the data directory's transcripts are kept, with one.
    retention: Option<Arc<Retention>>,
    /// The cassette being recorded (`--record`).
    recorder: Option<Recorder>,
    /// Who hears what becomes of the tree.
    observer: Arc<dyn TreeObserver>,
}

/// Every child's start and end, whatever its provider, from the run
/// events (an in-process agent's steps come from the agent loop), to
/// `observer`; and to `retention`, which holds a running child's
/// transcript from sweeps.
fn watch_children(
    mounted: &MountedHarness,
    observer: &Arc<dyn TreeObserver>,
    retention: Option<Arc<Retention>>,
) -> Subscription {
    let children = observer.clone();
    mounted
        .harness()
        .service()
        .subscribe(Arc::new(move |event: &SubagentEvent| {
            children.child_event(event);
            if let Some(retention) = &retention {
                retention.child_event(event);
            }
            Ok(())
        }))
}

/// How the tools of MCP servers answer: within the harness's result
/// limit, a longer result kept as a finished `mcp-<n>` task of its caller.
fn mcp_results(mounted: &MountedHarness) -> ResultPolicy {
    let shelf = TaskShelf::new(
        mounted.harness().tasks().clone(),
        mounted.tools().clone(),
        dsh_tasks::wording::MCP_RESULT_KIND,
    );
    ResultPolicy::new(mounted.harness().result_limit()).kept_on(Arc::new(shelf))
}

/// The agent loop's runtime over `model` and the mounted tools: its steps
/// reported to `observer`, finished background tasks handed to their
/// owners, and a resumed agent (a parent, or an in-process child resumed
/// by its call) given back what it ran in the background first.
fn agent_runtime(
    model: Arc<dyn ChatModel>,
    mounted: &MountedHarness,
    observer: &Arc<dyn TreeObserver>,
) -> AgentRuntime {
    let notices = TaskNotices(mounted.harness().notices());
    let runtime = AgentRuntime::new(model, mounted.tools().clone())
        .with_observer(observer.clone() as Arc<dyn AgentObserver>)
        .with_notices(Arc::new(notices));
    let Some(control) = mounted.harness().control().cloned() else {
        return runtime;
    };
    let observer = observer.clone();
    runtime.with_on_resume(Arc::new(move |agent: dsh_tools::AgentRef| {
        let (control, observer) = (control.clone(), observer.clone());
        async move {
            match control.recover(&agent).await {
                Ok(report) => observer.recovered(agent.id(), &report),
                Err(error) => tracing::warn!(agent = %agent.id(), "{}", wording::recovery_failed(&error)),
            }
        }
    }))
}

/// `runtime` over `data_dir`, when there is one: the transcripts, and what
/// a live `endpoint` taught earlier runs (a run being `recorded` starts
/// from nothing, as its replay will, and keeps what it learns).
fn on_disk(runtime: AgentRuntime, data_dir: Option<&Path>, endpoint: Option<String>, recorded: bool) -> AgentRuntime {
    let Some(dir) = data_dir else { return runtime };
    let runtime = runtime.with_data_dir(dir);
    let Some(endpoint) = endpoint else { return runtime };
    let usage = if recorded {
        KeptUse::WriteOnly
    } else {
        KeptUse::ReadAndWrite
    };
    runtime.with_kept_facts(KeptFacts::new(dir, &endpoint), usage)
}

impl SharedRuntime {
    /// Chooses the model (`--script`, `--base-url`/`[model]`/`DSH_*`, else
    /// the embedded scripted model) and mounts the delegation tools; the MCP
    /// servers start later ([`mount_mcp_servers`](Self::mount_mcp_servers)).
    pub(crate) fn new(
        args: &AgentArgs,
        config: Option<&Config>,
        data_dir: Option<&Path>,
        observer: Arc<dyn TreeObserver>,
        surface: Surface,
    ) -> Result<Self, Failure> {
        Self::withholding(args, config, data_dir, observer, surface, &[])
    }

    /// [`SharedRuntime::new`], with the `withheld` variables of ours kept from
    /// every process it starts: ACP children, MCP servers (those of the
    /// flags and the file, and those an ACP client hands a session).
    pub(crate) fn withholding(
        args: &AgentArgs,
        config: Option<&Config>,
        data_dir: Option<&Path>,
        observer: Arc<dyn TreeObserver>,
        surface: Surface,
        withheld: &[String],
    ) -> Result<Self, Failure> {
        let file_model = config.map(|config| config.model.clone()).unwrap_or_default();
        // Flags over the file's `[limits]` over dsh's defaults.
        let file_limits = config.map(|config| config.limits).unwrap_or_default();
        let limits = file_limits.resolve(&args.limits());
        let result_limit = file_limits.result_limit(&args.limits());
        // Recording or replaying: ACP children record their parts of the
        // same cassette, or replay it.
        let recorded_by_file = config.and_then(|config| config.record.as_deref());
        let cassette_mode =
            CassetteMode::resolve(args, recorded_by_file, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
        let cassette_env: Vec<(String, String)> = cassette_mode.child_env().into_iter().collect();
        let mounted = MountedHarness::new(
            config,
            data_dir,
            surface,
            Some(observer.clone()),
            limits,
            result_limit,
            (withheld, &cassette_env),
        )?;
        let retention = data_dir.map(|dir| {
            let policy = config.map(|config| config.data).unwrap_or_default();
            Arc::new(Retention::new(dir.to_owned(), policy))
        });
        let runs = watch_children(&mounted, &observer, retention.clone());
        let choice = model::choose(args, cassette_mode.replay(), &file_model, |key| std::env::var(key).ok())
            .map_err(Failure::usage)?;
        let recorder = cassette_mode.recorder()?;
        let banner = choice.banner.clone();
        let endpoint = choice.endpoint();
        let model = choice.model(recorder.as_ref()).map_err(Failure::usage)?;
        let window = model::context_window(args, &file_model, |key| std::env::var(key).ok()).map_err(Failure::usage)?;
        let mcp_results = mcp_results(&mounted);
        let mut runtime = agent_runtime(model, &mounted, &observer);
        if let Some(window) = window {
            runtime = runtime.with_context_window(window);
        }
        let runtime = on_disk(runtime, data_dir, endpoint, recorder.is_some());
        let runtime = crate::prices::priced(runtime, config, limits.cost_limit().is_some())?;
        Ok(Self {
            banner,
            recorder,
            runtime: Arc::new(runtime),
            max_turns: args.max_turns,
            explicit_model: args.model.is_some() || file_model.model.is_some(),
            mounted,
            _runs: runs,
            mcp: SharedMcpServers::new(args, config, withheld, mcp_results),
            retention,
            observer,
        })
    }

    /// Ends the recording (`--record`), if there is one: the cassette is
    /// closed and takes its name; says so on stderr unless `quiet`. A run
    /// stopped by a signal (`interrupted`) closes it as interrupted, so
    /// replay refuses it and says why.
    pub(crate) fn finish_recording(&self, quiet: bool, interrupted: Option<Stop>) -> Result<(), Failure> {
        let Some(recorder) = &self.recorder else {
            return Ok(());
        };
        let closed = match interrupted {
            None => recorder.finish(),
            Some(stop) => recorder.interrupt(stop.name()),
        };
        let exchanges = closed.map_err(|error| Failure::failed(error.to_string()))?;
        if !quiet {
            match interrupted {
                None => eprintln!("{}", wording::recorded(recorder.file(), exchanges)),
                Some(stop) => eprintln!(
                    "{}",
                    wording::recorded_interrupted(recorder.file(), exchanges, stop.name())
                ),
            }
        }
        Ok(())
    }

    /// What every parent (and child) on this runtime does when its model
    /// answers while its background children still run. Set before any
    /// agent is made.
    pub(crate) fn set_end_of_run(&mut self, end_of_run: EndOfRun) {
        self.runtime = Arc::new(self.runtime.as_ref().clone().with_end_of_run(end_of_run));
    }

    /// Marks every agent on this runtime as stopping resumably (see
    /// [`AgentRuntime::interrupt`]); their runs' tokens are cancelled next.
    pub(crate) fn interrupt(&self) {
        self.runtime.interrupt();
    }

    /// [`SharedRuntime::interrupt`], for a task of its own (a signal's).
    pub(crate) fn interrupter(&self) -> impl Fn() + Send + 'static {
        let runtime = self.runtime.clone();
        move || runtime.interrupt()
    }

    /// Gives `agent`, resumed without a turn of its own (an MCP session's
    /// calling agent), what it ran in the background back: the harness's
    /// recovery, reported to the observer.
    pub(crate) async fn recover(&self, agent: &Agent) {
        let agent = agent.agent_ref();
        match self.mounted.harness().recover(&agent).await {
            Ok(report) => self.observer.recovered(agent.id(), &report),
            Err(error) => tracing::warn!(agent = %agent.id(), "{}", wording::recovery_failed(&error)),
        }
    }

    /// The background tasks of `owner` that still run, each as the line
    /// that names it (its id and label).
    pub(crate) fn running_tasks(&self, owner: &AgentId) -> Vec<String> {
        self.tasks()
            .list(owner)
            .into_iter()
            .filter(|task| !task.status.is_terminal())
            .map(|task| wording::task_named(&task.id, &task.label))
            .collect()
    }

    /// How long the data directory's transcripts are kept
    /// ([`crate::retention`]); none without a data directory.
    pub(crate) fn retention(&self) -> Option<&Arc<Retention>> {
        self.retention.as_ref()
    }

    /// Starts the MCP servers and mounts their tools beside the others
    /// ([`SharedMcpServers::mount`]).
    pub(crate) async fn mount_mcp_servers(&mut self) -> Result<(), Failure> {
        self.mcp.mount(self.runtime.tools()).await
    }

    /// Releases every MCP server, waiting until their process groups are gone.
    pub(crate) async fn release_mcp_servers(&self) {
        self.mcp.release().await;
    }

    /// The tools every parent is offered.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        self.runtime.tools()
    }

    /// Where transcripts are kept, with a data directory.
    pub(crate) fn data_dir(&self) -> Option<&Path> {
        self.runtime.data_dir()
    }

    /// The subagent service every parent on this runtime delegates through.
    pub(crate) fn service(&self) -> &dsh_subagent::SubagentService {
        self.mounted.harness().service()
    }

    /// The background tasks of every parent on this runtime.
    pub(crate) fn tasks(&self) -> &TaskRegistry {
        self.mounted.harness().tasks()
    }

    /// The model-visible names of the delegation tools.
    pub(crate) fn delegation_tools(&self) -> &[String] {
        self.mounted.delegation_tools()
    }

    /// How MCP servers are started (their results within the budget); for
    /// the servers an ACP client hands a session, too.
    pub(crate) fn mcp_options(&self) -> &ClientOptions {
        self.mcp.options()
    }

    /// What every MCP server run as a process is launched with (the
    /// self-mount check's marker, without the withheld variables); for the
    /// servers an ACP client hands a session, too.
    pub(crate) fn mcp_launch(&self) -> &crate::mcp_mounts::ServerLaunch {
        self.mcp.launch()
    }

    /// The shared runtime over another registry: the same model, observer,
    /// notices and data directory, for parents with tools of their own (an
    /// ACP session's MCP servers, beside every shared tool).
    pub(crate) fn runtime_with(&self, tools: ToolRegistry) -> Arc<AgentRuntime> {
        Arc::new(self.runtime.as_ref().clone().with_tools(tools))
    }

    /// A new parent agent (its own conversation) on the shared runtime.
    pub(crate) fn parent(&self, label: &str) -> Result<Agent, Failure> {
        self.parent_on(self.runtime.clone(), label)
    }

    /// A new parent agent on `runtime` ([`SharedRuntime::runtime_with`]), at the
    /// root of a delegation tree of its own.
    pub(crate) fn parent_on(&self, runtime: Arc<AgentRuntime>, label: &str) -> Result<Agent, Failure> {
        Agent::builder(runtime)
            .lineage(self.mounted.open_tree().lineage())
            .system_prompt(wording::PARENT_SYSTEM_PROMPT)
            .max_turns(self.max_turns)
            .label(Some(label.to_owned()))
            .build()
            .map_err(|error| Failure::internal(error.to_string()))
    }

    /// An earlier parent, continued: its id, history (committed turns), system
    /// prompt and model from its transcript; today's tools. A torn tail is
    /// repaired first; what was repaired, and the tools its open turn's
    /// calls still need, are returned with it.
    pub(crate) fn resume(&self, id: &str) -> Result<resume::Resumed, ResumeError> {
        self.resume_on(self.runtime.clone(), id)
    }

    /// [`SharedRuntime::resume`] on `runtime` ([`SharedRuntime::runtime_with`]); the
    /// continued parent is at the root of a new delegation tree (limits
    /// count per run of dsh, not over a parent's whole history).
    pub(crate) fn resume_on(&self, runtime: Arc<AgentRuntime>, id: &str) -> Result<resume::Resumed, ResumeError> {
        let Some(dir) = runtime.data_dir() else {
            return Err(ResumeError::Failed(Failure::usage(wording::RESUME_NEEDS_DATA_DIR)));
        };
        let saved = resume::load_parent(dir, id)?;
        let pending = resume::PendingCalls::of(&saved);
        let interrupted = resume::tree_unfinished(dir, &saved.transcript);
        let mut builder = Agent::builder(runtime.clone())
            .lineage(self.mounted.open_tree().lineage())
            .id(saved.id)
            .max_turns(self.max_turns)
            .label(saved.label)
            .resume_from(&saved.transcript);
        if !self.explicit_model {
            builder = builder.model(Some(saved.model));
        }
        if let Some(system_prompt) = saved.system_prompt {
            builder = builder.system_prompt(system_prompt);
        }
        let agent = builder.build().map_err(|error| match error {
            // Bad input, not a fault: a model the cost budget cannot count.
            dsh_agent::AgentError::Unpriced { model } => ResumeError::Failed(Failure::usage(
                wording::cost_budget_unpriced(&model, wording::PRICE_NEEDED_RESUMED),
            )),
            error => ResumeError::Failed(Failure::internal(error.to_string())),
        })?;
        Ok(resume::Resumed {
            agent,
            repairs: saved.repairs,
            pending,
            interrupted,
        })
    }
}
