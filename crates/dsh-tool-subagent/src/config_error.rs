//! What the tool refuses of a configuration, at load or when its provider
//! appears.

use crate::wording;

/// A configuration the tool refuses, at load or when its provider appears.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `maxDepth` is neither a non-negative safe integer nor `"provider-managed"`.
    #[error("{}", wording::MAX_DEPTH_INVALID)]
    InvalidMaxDepth,
    /// `toolFilter` names neither `allow` nor `deny`.
    #[error("{}", wording::TOOL_FILTER_EMPTY)]
    EmptyToolFilter,
    /// A numeric `maxDepth` over a provider without the `depthLimit` capability.
    #[error("{}", wording::cannot_enforce_max_depth(provider))]
    CannotEnforceMaxDepth {
        /// The provider's name.
        provider: String,
    },
    /// `enableRunInBackground` is set, but the instance was loaded without a
    /// task registry ([`SubagentToolPlugin::apply`](crate::SubagentToolPlugin::apply)):
    /// the model would be shown `run_in_background` and refused every time.
    #[error("{}", wording::background_without_tasks(tool_name))]
    BackgroundWithoutTasks {
        /// The instance's tool name.
        tool_name: String,
    },
    /// Another tool (or another instance) already holds the tool name.
    #[error("{}", wording::duplicate_tool_name(name))]
    DuplicateToolName {
        /// The contested name.
        name: String,
    },
    /// Any other malformed configuration; the message names the key.
    #[error("{}", wording::invalid_config(.0))]
    Invalid(String),
}
