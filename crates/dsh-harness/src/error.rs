//! Why a harness was not built.

use dsh_subagent_api::{Capability, SubagentError};
use dsh_tool_subagent::ConfigError;
use dsh_tools::RegistryError;

use crate::{BuildCode, BuildErrorCode, wording};

/// A harness the builder refuses to assemble. Nothing is mounted when
/// [`HarnessBuilder::build`](crate::HarnessBuilder::build) returns one.
///
/// Each variant is a combination that would show the model something it is
/// then refused (a parameter, a tool filter, a tool), or a plain
/// contradiction in what the builder was given. [`BuildError::code`] is
/// stable; the texts live in the crate's `wording` module.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A tool enables `run_in_background`, and the harness runs no
    /// background tasks ([`Background::Off`](crate::Background::Off)).
    #[error("{}", wording::background_without_tasks(tool))]
    BackgroundWithoutTasks {
        /// The tool's name.
        tool: String,
    },
    /// A tool enables `run_in_background` over a provider that continues its
    /// children, and the harness has no child store
    /// ([`Background::Tasks`](crate::Background::Tasks)).
    #[error("{}", wording::continuable_without_store(tool, provider))]
    ContinuableWithoutStore {
        /// The tool's name.
        tool: String,
        /// The provider's name.
        provider: String,
    },
    /// A tool filter names a tool the harness does not mount.
    #[error("{}", wording::unknown_filter_tool(tool, name, mounted))]
    UnknownFilterTool {
        /// The tool whose filter it is.
        tool: String,
        /// The name no tool has.
        name: String,
        /// The names the harness mounts, sorted.
        mounted: Vec<String>,
    },
    /// Two tools of the harness have one name (the task tools and
    /// `send_message` included).
    #[error("{}", wording::duplicate_tool_name(name))]
    DuplicateToolName {
        /// The contested name.
        name: String,
    },
    /// Two different providers have one name.
    #[error("{}", wording::duplicate_provider(name))]
    DuplicateProvider {
        /// The contested name.
        name: String,
    },
    /// A tool's configuration names another provider than the one it was given.
    #[error("{}", wording::provider_mismatch(tool, configured, given))]
    ProviderMismatch {
        /// The tool's name.
        tool: String,
        /// The provider its configuration names.
        configured: String,
        /// The name of the provider it was given.
        given: String,
    },
    /// A tool sets a persona, a tool filter or a token budget its provider cannot honour.
    #[error("{}", wording::unsupported_capability(tool, provider, *capability))]
    UnsupportedCapability {
        /// The tool's name.
        tool: String,
        /// The provider's name.
        provider: String,
        /// What the provider lacks.
        capability: Capability,
    },
    /// The limits set a tree token budget, and a provider of the harness
    /// cannot spend from it: it lacks the `tokenBudget` capability, so its
    /// children report no usage and the budget would never be enforced for
    /// them.
    #[error("{}", wording::tree_budget_unsupported(provider, *limit))]
    TreeBudgetUnsupported {
        /// The provider's name.
        provider: String,
        /// The tree's token budget.
        limit: u64,
    },
    /// The limits set a tree cost budget, and this provider lacks the
    /// `tokenBudget` capability: its children report no usage, so what
    /// they spend could never be priced and the budget would never be
    /// enforced for them.
    #[error("{}", wording::tree_cost_budget_unsupported(provider))]
    TreeCostBudgetUnsupported {
        /// The provider's name.
        provider: String,
    },
    /// The `subagent` tool refused its configuration (an invalid value, or a
    /// numeric `maxDepth` its provider cannot enforce), in its own words.
    #[error(transparent)]
    Tool(#[from] ConfigError),
    /// The tool registry refused a tool of the harness's own (an empty name).
    #[error("{}", wording::tool_not_registered(.0))]
    Registry(#[from] RegistryError),
    /// The service refused a provider; its code passes through.
    #[error(transparent)]
    Provider(#[from] SubagentError),
}

impl BuildError {
    /// The stable code, e.g. `BACKGROUND_WITHOUT_TASKS` ([`BuildCode`]: one
    /// of [`BuildErrorCode`], or, for a provider refused by the service, the
    /// service's code).
    pub fn code(&self) -> BuildCode<'_> {
        let code = match self {
            Self::BackgroundWithoutTasks { .. } => BuildErrorCode::BackgroundWithoutTasks,
            Self::ContinuableWithoutStore { .. } => BuildErrorCode::ContinuableWithoutStore,
            Self::UnknownFilterTool { .. } => BuildErrorCode::UnknownFilterTool,
            Self::DuplicateToolName { .. } => BuildErrorCode::DuplicateToolName,
            Self::DuplicateProvider { .. } => BuildErrorCode::DuplicateProvider,
            Self::ProviderMismatch { .. } => BuildErrorCode::ProviderMismatch,
            Self::UnsupportedCapability { .. } => BuildErrorCode::UnsupportedCapability,
            Self::TreeBudgetUnsupported { .. } => BuildErrorCode::TreeBudgetUnsupported,
            Self::TreeCostBudgetUnsupported { .. } => BuildErrorCode::TreeCostBudgetUnsupported,
            Self::Tool(_) => BuildErrorCode::InvalidToolConfig,
            Self::Registry(_) => BuildErrorCode::ToolNotRegistered,
            Self::Provider(error) => return BuildCode::Service(error.code()),
        };
        BuildCode::Build(code)
    }
}
