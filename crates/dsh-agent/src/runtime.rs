//! What an agent tree shares: the model, the tools, the data directory, the
//! observer, the models' prices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dsh_llm::{ChatModel, Price};
use dsh_tools::ToolRegistry;
use futures::future::BoxFuture;

use crate::context::Learned;
use crate::kept::KeptFacts;
use crate::{AgentObserver, ContextWindow, NoticeSource};

/// The environment a parent and all its in-process children share.
///
/// Children inherit it: the same model client (a child may name another
/// model on it), the same tool registry (seen through the child's own
/// filter), the same data directory for transcripts, the same observer, the
/// same notice source, the same context window for the client's model, the
/// same prices of models, and
/// what the client's server taught about each model: the window its latest
/// refusal named, and how it counts tokens (learned by one agent, known to
/// all; a runtime made with [`AgentRuntime::new`] shares nothing of it with
/// another, so what one endpoint taught never reaches another's agents).
#[derive(Clone)]
pub struct AgentRuntime {
    model: Arc<dyn ChatModel>,
    tools: ToolRegistry,
    data_dir: Option<PathBuf>,
    observer: Option<Arc<dyn AgentObserver>>,
    notices: Option<Arc<dyn NoticeSource>>,
    context_window: Option<ContextWindow>,
    prices: Arc<BTreeMap<String, Price>>,
    learned: Arc<Learned>,
    end_of_run: EndOfRun,
    interrupted: Arc<AtomicBool>,
    on_resume: Option<Arc<dyn OnResume>>,
    kept: Option<Arc<KeptFacts>>,
}

/// What an agent does when its model gives a final answer while background
/// work it started (a background child) still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndOfRun {
    /// The run ends; the background work goes on, or is stopped by whoever
    /// owns it.
    #[default]
    Leave,
    /// The run waits for that work: each completion notice joins the turn
    /// and the model is asked again (within the run's limit of model
    /// calls), so the run's answer can use every result and no background
    /// child is dropped because its parent answered first.
    WaitForBackground,
}

/// Called when an agent of the runtime is resumed after an interruption,
/// before its turn goes on ([`Agent::resume`](crate::Agent::resume)): a
/// harness restores what the agent had running in the background (its
/// tasks, under their ids) here. The turn waits for the returned future, so
/// a task restored finished reads finished to the agent's first model call.
pub trait OnResume: Send + Sync + 'static {
    /// The agent `agent` is about to go on with its turn.
    fn resumed(&self, agent: dsh_tools::AgentRef) -> BoxFuture<'static, ()>;
}

impl<F, Fut> OnResume for F
where
    F: Fn(dsh_tools::AgentRef) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn resumed(&self, agent: dsh_tools::AgentRef) -> BoxFuture<'static, ()> {
        Box::pin(self(agent))
    }
}

/// How a runtime uses what an earlier run kept of its endpoint
/// ([`AgentRuntime::with_kept_facts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptUse {
    /// Starts from it, and keeps what it learns.
    ReadAndWrite,
    /// Keeps what it learns, starting from nothing: a run being recorded,
    /// whose replay starts from nothing too and must meet the same
    /// refusals and cuts to send the same requests.
    WriteOnly,
}

impl AgentRuntime {
    /// A runtime with this model and tool registry, no transcripts, no observer.
    pub fn new(model: Arc<dyn ChatModel>, tools: ToolRegistry) -> Self {
        Self {
            model,
            tools,
            data_dir: None,
            observer: None,
            notices: None,
            context_window: None,
            prices: Arc::default(),
            learned: Arc::default(),
            end_of_run: EndOfRun::default(),
            interrupted: Arc::default(),
            on_resume: None,
            kept: None,
        }
    }

    /// What an agent does when its model answers while its background work
    /// still runs ([`EndOfRun`]; default [`EndOfRun::Leave`]).
    #[must_use]
    pub fn with_end_of_run(mut self, end_of_run: EndOfRun) -> Self {
        self.end_of_run = end_of_run;
        self
    }

    /// Calls `on_resume` whenever an agent of the runtime is resumed after an
    /// interruption, before its turn goes on ([`OnResume`]).
    #[must_use]
    pub fn with_on_resume(mut self, on_resume: Arc<dyn OnResume>) -> Self {
        self.on_resume = Some(on_resume);
        self
    }

    /// Marks every agent of this runtime (and of its clones) as stopping
    /// resumably. Cancel their runs' tokens after this: each run then ends
    /// [`AgentStop::Interrupted`](crate::AgentStop::Interrupted), its turn
    /// left open and no tool result that only the stop produced recorded, so
    /// that [`Agent::resume`](crate::Agent::resume) goes on where it was.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }

    /// Whether [`AgentRuntime::interrupt`] was called.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// What an agent does when its model answers while its background work
    /// still runs.
    pub fn end_of_run(&self) -> EndOfRun {
        self.end_of_run
    }

    pub(crate) fn on_resume(&self) -> Option<&dyn OnResume> {
        self.on_resume.as_deref()
    }

    /// The same runtime over another tool registry: for agents that get
    /// tools of their own beside the shared ones (say, one session's MCP
    /// servers, in a registry that also holds every shared tool).
    #[must_use]
    pub fn with_tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Writes every agent's transcript under `data_dir/agents/<id>.jsonl`.
    #[must_use]
    pub fn with_data_dir(mut self, data_dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(data_dir.into());
        self
    }

    /// Reports progress of every agent to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn AgentObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Hands every agent its pending notices before each model call (see
    /// [`NoticeSource`]).
    #[must_use]
    pub fn with_notices(mut self, notices: Arc<dyn NoticeSource>) -> Self {
        self.notices = Some(notices);
        self
    }

    /// Sets the context window of the client's own model
    /// ([`ChatModel::model_name`]): every agent that uses that model fits
    /// its requests into it, unless it has a window of its own
    /// ([`AgentBuilder::context_window`](crate::AgentBuilder::context_window)).
    /// Without one, an agent learns the window from the server's first
    /// refusal that names it.
    #[must_use]
    pub fn with_context_window(mut self, window: ContextWindow) -> Self {
        self.context_window = Some(window);
        self
    }

    /// Keeps what the client's server teaches (each model's window, its
    /// limit on requests at once, how it counts tokens) in `facts`, a file
    /// of the data directory, at the end of each run that learned
    /// something; with [`KeptUse::ReadAndWrite`], starts from what an
    /// earlier run kept there. A file that cannot be read as learned is
    /// ignored with one warning naming it, and replaced by the next write.
    #[must_use]
    pub fn with_kept_facts(mut self, facts: KeptFacts, usage: KeptUse) -> Self {
        if usage == KeptUse::ReadAndWrite {
            match facts.read() {
                Ok(models) => {
                    for (model, kept) in &models {
                        self.learned.keep(model, kept);
                        if let Some(limit) = kept.concurrency {
                            self.model.keep_concurrency(model, limit);
                        }
                        tracing::info!("{}", crate::wording::log_kept_used(model, facts.path()));
                    }
                }
                Err(error) => tracing::warn!("{error}"),
            }
        }
        self.kept = Some(Arc::new(facts));
        self
    }

    /// Writes what was learned since it was last kept, if anything, into
    /// the kept-facts file ([`AgentRuntime::with_kept_facts`]); a failed
    /// write is logged, never the run's failure. The agent loop calls it at
    /// the end of each run.
    pub fn keep_learned(&self) {
        let Some(kept) = &self.kept else { return };
        let changed = self.learned.to_keep(|model| self.model.learned_concurrency(model));
        if changed.is_empty() {
            return;
        }
        if let Err(error) = kept.write(&changed) {
            tracing::warn!("{}", crate::wording::log_kept_not_written(kept.path(), &error));
        }
    }

    /// The file what the server teaches is kept in, when there is one.
    pub fn kept_facts(&self) -> Option<&KeptFacts> {
        self.kept.as_deref()
    }

    /// Sets what `model`'s tokens cost: every agent that uses that model
    /// counts what each of its calls costs, shows it beside its tokens and
    /// spends it from its tree's money budget. A model without a price has
    /// no cost (never a made-up one), and an agent of it cannot be built
    /// in a tree with a money budget.
    #[must_use]
    pub fn with_price(mut self, model: impl Into<String>, price: Price) -> Self {
        Arc::make_mut(&mut self.prices).insert(model.into(), price);
        self
    }

    /// What `model`'s tokens cost, when its price is known.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }

    /// The context window of the client's own model, when one is set.
    pub fn context_window(&self) -> Option<ContextWindow> {
        self.context_window
    }

    /// The window the client's server named when it last refused a
    /// request to `model` for its length.
    pub fn learned_window(&self, model: &str) -> Option<u64> {
        self.learned.window(model).map(|window| window.tokens)
    }

    /// What the client's server taught about each model.
    pub(crate) fn learned(&self) -> &Learned {
        &self.learned
    }

    /// The model client.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The transcript directory, if transcripts are kept.
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    pub(crate) fn observer(&self) -> Option<&dyn AgentObserver> {
        self.observer.as_deref()
    }

    pub(crate) fn notices(&self) -> Option<&dyn NoticeSource> {
        self.notices.as_deref()
    }
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime")
            .field("model", &self.model.model_name())
            .field("tools", &self.tools.names())
            .field("data_dir", &self.data_dir)
            .field("notices", &self.notices.is_some())
            .field("context_window", &self.context_window)
            .finish()
    }
}
