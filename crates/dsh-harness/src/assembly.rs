//! What a harness is assembled from: what the builder gathers, read by the
//! checks and by the mount.

use std::sync::Arc;

use dsh_subagent::Limits;
use dsh_subagent_api::{ChildStore, SubagentProvider};
use dsh_tool_subagent::SubagentToolConfig;
use dsh_tools::{ResultLimit, Tool};

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
    /// ([`BuildError::BackgroundWithoutTasks`](crate::BuildError::BackgroundWithoutTasks)).
    #[default]
    Off,
    /// Background runs are one-shot tasks of the calling agent, collected
    /// with `task_output`, `task_kill` and `task_list` (mounted), announced
    /// to their owner ([`Harness::notices`](crate::Harness::notices)). A tool whose provider
    /// continues its children cannot run them in the background here
    /// ([`BuildError::ContinuableWithoutStore`](crate::BuildError::ContinuableWithoutStore)).
    Tasks,
    /// As [`Background::Tasks`], and a provider that continues its children
    /// runs them as durable children kept in this store, continued with
    /// `send_message` (mounted) through the control service
    /// ([`Harness::control`](crate::Harness::control)). `dsh_agent::JsonlChildStore` is the store of
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

/// Everything given to a [`HarnessBuilder`](crate::HarnessBuilder), as given.
#[derive(Clone, Default)]
pub(crate) struct Assembly {
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
    /// The result limit of every tool that sets none of its own: the one
    /// place a harness decides it, [`ResultLimit::DEFAULT`] (its `Default`)
    /// unless the builder was given one.
    pub(crate) result_limit: ResultLimit,
}
