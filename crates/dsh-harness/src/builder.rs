//! The builder: how a harness's parts are given, and the build that
//! checks them, then mounts them.

use std::sync::Arc;

use dsh_subagent::Limits;
use dsh_subagent_api::SubagentProvider;
use dsh_tool_subagent::SubagentToolConfig;
use dsh_tools::{ResultLimit, Tool};

use crate::assembly::Assembly;
use crate::{Background, BuildError, Harness, check};

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
    assembly: Assembly,
}

impl std::fmt::Debug for HarnessBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessBuilder")
            .field(
                "providers",
                &self
                    .assembly
                    .providers
                    .iter()
                    .map(|provider| provider.name())
                    .collect::<Vec<_>>(),
            )
            .field(
                "subagents",
                &self
                    .assembly
                    .subagents
                    .iter()
                    .map(|(config, _)| config)
                    .collect::<Vec<_>>(),
            )
            .field(
                "tools",
                &self.assembly.tools.iter().map(|tool| tool.name()).collect::<Vec<_>>(),
            )
            .field("background", &self.assembly.background)
            .field("later_tools", &self.assembly.later_tools)
            .field("limits", &self.assembly.limits)
            .field("result_limit", &self.assembly.result_limit)
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
        self.assembly.providers.push(provider.clone());
        self.assembly.subagents.push((config, provider));
        self
    }

    /// A provider without a tool of its own: registered so that what names
    /// it still finds it (a continuable child it started under an earlier
    /// configuration is resumed through it by `send_message`).
    pub fn provider(mut self, provider: Arc<dyn SubagentProvider>) -> Self {
        self.assembly.providers.push(provider);
        self
    }

    /// A tool of the harness's own, mounted with the others (its name must
    /// be free) so that tool filters may name it.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.assembly.tools.push(tool);
        self
    }

    /// Where background runs go; [`Background::Off`] unless set.
    pub fn background(mut self, background: Background) -> Self {
        self.assembly.background = background;
        self
    }

    /// Bounds every delegation tree of the harness (a top-level agent and
    /// everything below it): children running at once, calls waiting for a
    /// slot, children started, tokens and money spent. [`Limits::none`]
    /// unless set (the library's default is no limit; `dsh` sets its own).
    /// A tree token or cost budget needs every provider to report usage
    /// ([`BuildError::TreeBudgetUnsupported`],
    /// [`BuildError::TreeCostBudgetUnsupported`]); a cost budget also needs
    /// every agent of the tree to know its model's price, which the agent
    /// loop checks when it builds one.
    /// Give each top-level agent its own tree ([`Harness::open_tree`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.assembly.limits = limits;
        self
    }

    /// The most of a delegation output the model reads, for every tool of
    /// the harness that sets no limit of its own: each `subagent` tool's
    /// result ([`SubagentToolConfig::result_limit`]) and what `task_output`
    /// shows (background results, `send_message` answers, and the paged
    /// reads of cut results). [`ResultLimit::DEFAULT`] (8,000 tokens)
    /// unless set. A longer output reads as its head and tail around a
    /// notice that gives the exact `task_output` call reading on.
    pub fn result_limit(mut self, limit: ResultLimit) -> Self {
        self.assembly.result_limit = limit;
        self
    }

    /// Declares tools the harness mounts into [`Harness::tools`] after the
    /// build, by name prefix, so that tool filters may name them: MCP tools,
    /// for one, exist only once their servers run (`mcp__<server>__<tool>`).
    pub fn later_tools(mut self, prefix: impl Into<String>) -> Self {
        self.assembly.later_tools.push(prefix.into());
        self
    }

    /// Checks the assembly, then registers the providers and mounts the
    /// tools. Checked, in this order, before anything is mounted: each
    /// tool's configuration and its provider's name; one provider per name;
    /// one tool per name; then for each tool, that its background calls
    /// have somewhere to run, that its provider can honour its `maxDepth`,
    /// persona, tool filter and token budget, and that its filter names
    /// mounted tools; last, when the limits set a tree token or cost
    /// budget, that every provider reports its children's usage (the
    /// `tokenBudget` capability), so the budget is kept.
    pub fn build(self) -> Result<Harness, BuildError> {
        let providers = check::check(&self.assembly)?;
        Harness::mount(self.assembly, providers)
    }
}
