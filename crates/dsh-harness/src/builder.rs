//! What a harness is assembled from.

use std::sync::Arc;

use dsh_subagent::Limits;
use dsh_subagent_api::{ChildStore, SubagentProvider};
use dsh_tool_subagent::SubagentToolConfig;
use dsh_tools::{ResultBudget, Tool};

use crate::{BuildError, Harness, check};

/// Where the model's `run_in_background: true` calls go, and which tools
/// collect them.
///
/// A tool shows `run_in_background` only when its configuration enables it
/// ([`SubagentToolConfig::enable_run_in_background`]); this setting decides
/// whether the harness can honour that, and the builder refuses a tool it
/// cannot honour.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Background {
    /// No background runs: no task registry in use, no task tools. A tool
    /// that enables `run_in_background` is refused
    /// ([`BuildError::BackgroundWithoutTasks`]).
    #[default]
    Off,
    /// Background runs are one-shot tasks of the calling agent, collected
    /// with `task_output`, `task_kill` and `task_list` (mounted), announced
    /// to their owner ([`Harness::notices`]). A tool whose provider
    /// continues its children cannot run them in the background here
    /// ([`BuildError::ContinuableWithoutStore`]).
    Tasks,
    /// As [`Background::Tasks`], and a provider that continues its children
    /// runs them as durable children kept in this store, continued with
    /// `send_message` (mounted) through the control service
    /// ([`Harness::control`]). `dsh_agent::JsonlChildStore` is the store of
    /// the `dsh-agent` loop's transcripts.
    Continuable(Arc<dyn ChildStore>),
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Off => f.write_str("Off"),
            Self::Tasks => f.write_str("Tasks"),
            Self::Continuable(_) => f.write_str("Continuable(..)"),
        }
    }
}

/// Assembles a [`Harness`]: the subagent service with its providers, the
/// `subagent` tools, and (by [`Background`]) the task registry, the task
/// tools, the control service and `send_message`.
///
/// Nothing happens until [`build`](Self::build), which checks the whole
/// assembly first and mounts only what passes: a combination that would show
/// the model a parameter, a filter or a tool it is then refused is a
/// [`BuildError`], and nothing is mounted.
///
/// ```
/// use std::sync::Arc;
/// use dsh_harness::{Background, BuildError, HarnessBuilder, SubagentToolConfig};
/// use dsh_subagent_testing::ScriptedProvider;
///
/// let provider = ScriptedProvider::builder("spawn").build();
/// let builder = HarnessBuilder::new()
///     .subagent(SubagentToolConfig::new("spawn").enable_run_in_background(true), provider);
/// // Background calls need somewhere to run.
/// let error = builder.clone().build().unwrap_err();
/// assert_eq!(error, BuildError::BackgroundWithoutTasks { tool: "subagent".into() });
/// let harness = builder.background(Background::Tasks).build().unwrap();
/// assert_eq!(harness.tools().names(), ["subagent", "task_kill", "task_list", "task_output"]);
/// ```
#[derive(Clone, Default)]
#[must_use = "a builder does nothing until it is built"]
pub struct HarnessBuilder {
    /// Every provider given, in order (those of the tools included).
    pub(crate) providers: Vec<Arc<dyn SubagentProvider>>,
    /// Each `subagent` tool, with the provider it was given.
    pub(crate) subagents: Vec<(SubagentToolConfig, Arc<dyn SubagentProvider>)>,
    /// The harness's own tools.
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) background: Background,
    /// Name prefixes of tools the harness mounts after the build.
    pub(crate) later_tools: Vec<String>,
    /// The limits of every delegation tree of the harness's service.
    pub(crate) limits: Limits,
    /// The result budget of every tool that sets none of its own.
    pub(crate) result_budget: Option<ResultBudget>,
}

impl std::fmt::Debug for HarnessBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessBuilder")
            .field(
                "providers",
                &self
                    .providers
                    .iter()
                    .map(|provider| provider.name())
                    .collect::<Vec<_>>(),
            )
            .field(
                "subagents",
                &self.subagents.iter().map(|(config, _)| config).collect::<Vec<_>>(),
            )
            .field("tools", &self.tools.iter().map(|tool| tool.name()).collect::<Vec<_>>())
            .field("background", &self.background)
            .field("later_tools", &self.later_tools)
            .field("limits", &self.limits)
            .field("result_budget", &self.result_budget)
            .finish()
    }
}

impl HarnessBuilder {
    /// An empty assembly: no provider, no tool, background off.
    pub fn new() -> Self {
        Self::default()
    }

    /// A `subagent` tool, configured by `config`, over `provider` (which
    /// `config.provider` must name). The provider is registered once however
    /// many tools share it; give each of those tools the same instance.
    pub fn subagent(mut self, config: SubagentToolConfig, provider: Arc<dyn SubagentProvider>) -> Self {
        self.providers.push(provider.clone());
        self.subagents.push((config, provider));
        self
    }

    /// A provider without a tool of its own: registered so that what names
    /// it still finds it (a continuable child it started under an earlier
    /// configuration is resumed through it by `send_message`).
    pub fn provider(mut self, provider: Arc<dyn SubagentProvider>) -> Self {
        self.providers.push(provider);
        self
    }

    /// A tool of the harness's own, mounted with the others (its name must
    /// be free) so that tool filters may name it.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Where background runs go; [`Background::Off`] unless set.
    pub fn background(mut self, background: Background) -> Self {
        self.background = background;
        self
    }

    /// Bounds every delegation tree of the harness (a top-level agent and
    /// everything below it): children running at once, calls waiting for a
    /// slot, children started, tokens spent. [`Limits::none`] unless set
    /// (the library's default is no limit; `dsh` sets its own). A tree
    /// token budget needs every provider to report usage
    /// ([`BuildError::TreeBudgetUnsupported`]).
    /// Give each top-level agent its own tree ([`Harness::open_tree`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The most of a delegation output the model reads, for every tool of
    /// the harness that sets no budget of its own: each `subagent` tool's
    /// result ([`SubagentToolConfig::result_budget`]) and what `task_output`
    /// shows (background results, `send_message` answers, and the paged
    /// reads of cut results). [`ResultBudget::DEFAULT`] (8,000 tokens)
    /// unless set. A longer output reads as its head and tail around a
    /// notice that gives the exact `task_output` call reading on.
    pub fn result_budget(mut self, budget: ResultBudget) -> Self {
        self.result_budget = Some(budget);
        self
    }

    /// Declares tools the harness mounts into [`Harness::tools`] after the
    /// build, by name prefix, so that tool filters may name them: MCP tools,
    /// for one, exist only once their servers run (`mcp__<server>__<tool>`).
    pub fn later_tools(mut self, prefix: impl Into<String>) -> Self {
        self.later_tools.push(prefix.into());
        self
    }

    /// Checks the assembly, then registers the providers and mounts the
    /// tools. Checked, in this order, before anything is mounted: each
    /// tool's configuration and its provider's name; one provider per name;
    /// one tool per name; then for each tool, that its background calls
    /// have somewhere to run, that its provider can honour its `maxDepth`,
    /// persona, tool filter and token budget, and that its filter names
    /// mounted tools; last, when the limits set a tree token budget, that
    /// every provider reports its children's usage (the `tokenBudget`
    /// capability), so the budget is kept.
    pub fn build(self) -> Result<Harness, BuildError> {
        let providers = check::check(&self)?;
        Harness::mount(self, providers)
    }
}
