//! Stable build-error codes.

dsh_subagent_api::error_codes! {
    /// The stable codes of [`BuildError`](crate::BuildError): importable,
    /// matchable, and what [`BuildError::code`](crate::BuildError::code) returns
    /// as text. The text of a code never changes; the table of every code is in
    /// `docs/errors.md`.
    ///
    /// Named apart from the `ErrorCode` of the other crates (the provider
    /// seam's, re-exported here as `provider::ErrorCode`, the tools'), which
    /// are the codes of failures at run time: these are the codes of an
    /// assembly refused before anything runs.
    pub enum BuildErrorCode {
        /// `BACKGROUND_WITHOUT_TASKS`: a tool enables `run_in_background` in a harness without background tasks.
        BackgroundWithoutTasks => "BACKGROUND_WITHOUT_TASKS",
        /// `CONTINUABLE_WITHOUT_STORE`: a tool would run continuable children in the background, and the harness has no child store.
        ContinuableWithoutStore => "CONTINUABLE_WITHOUT_STORE",
        /// `UNKNOWN_FILTER_TOOL`: a tool filter names a tool the harness does not mount.
        UnknownFilterTool => "UNKNOWN_FILTER_TOOL",
        /// `DUPLICATE_TOOL_NAME`: two tools of the harness have one name.
        DuplicateToolName => "DUPLICATE_TOOL_NAME",
        /// `DUPLICATE_PROVIDER`: two different providers have one name.
        DuplicateProvider => "DUPLICATE_PROVIDER",
        /// `PROVIDER_MISMATCH`: a tool's configuration names another provider than the one it was given.
        ProviderMismatch => "PROVIDER_MISMATCH",
        /// `UNSUPPORTED_CAPABILITY`: a tool sets a persona, a tool filter or a token budget its provider cannot honour.
        UnsupportedCapability => "UNSUPPORTED_CAPABILITY",
        /// `INVALID_TOOL_CONFIG`: a tool's configuration is refused by the tool itself.
        InvalidToolConfig => "INVALID_TOOL_CONFIG",
        /// `TOOL_NOT_REGISTERED`: the tool registry refused a tool of the harness's own.
        ToolNotRegistered => "TOOL_NOT_REGISTERED",
        /// `TREE_BUDGET_UNSUPPORTED`: the limits set a tree token budget, and a provider of the harness reports no usage to spend from it.
        TreeBudgetUnsupported => "TREE_BUDGET_UNSUPPORTED",
        /// `TREE_COST_BUDGET_UNSUPPORTED`: the limits set a tree cost budget, and a provider of the harness reports no usage to price.
        TreeCostBudgetUnsupported => "TREE_COST_BUDGET_UNSUPPORTED",
    }
}

/// The stable code of a [`BuildError`](crate::BuildError), typed: the
/// builder's own, or the service's, which a provider it refused keeps.
/// Match on it to tell the codes apart; [`as_str`](Self::as_str) is its
/// text, for the wire and the logs, and it compares equal to its text.
///
/// ```
/// use std::sync::Arc;
/// use dsh_harness::{BuildCode, BuildErrorCode, HarnessBuilder, SubagentToolConfig};
/// # use dsh_subagent_testing::ScriptedProvider;
/// # let provider = ScriptedProvider::builder("scripted").build();
/// let refused = HarnessBuilder::new()
///     .subagent(SubagentToolConfig::new("scripted").enable_run_in_background(true), provider)
///     .build()
///     .unwrap_err();
/// assert!(matches!(refused.code(), BuildCode::Build(BuildErrorCode::BackgroundWithoutTasks)));
/// assert_eq!(refused.code(), "BACKGROUND_WITHOUT_TASKS");
/// ```
#[derive(Clone, Copy, Debug)]
pub enum BuildCode<'a> {
    /// One of the builder's codes: an assembly refused before anything runs.
    Build(BuildErrorCode),
    /// The service's code, for a provider it refused.
    Service(dsh_subagent_api::SubagentCode<'a>),
}

impl<'a> BuildCode<'a> {
    /// The code as text, e.g. `BACKGROUND_WITHOUT_TASKS`.
    pub fn as_str(&self) -> &'a str {
        match self {
            Self::Build(code) => code.as_str(),
            Self::Service(code) => code.as_str(),
        }
    }
}

impl From<BuildErrorCode> for BuildCode<'_> {
    fn from(code: BuildErrorCode) -> Self {
        Self::Build(code)
    }
}

dsh_subagent_api::code_text!(BuildCode; BuildErrorCode, dsh_subagent_api::ErrorCode);
