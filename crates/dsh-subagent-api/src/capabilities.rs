//! Provider capabilities: which optional start fields a provider honours.

use std::fmt;

/// The optional start-request fields a provider can honour.
///
/// The service refuses a request that sets a field its provider cannot honour
/// before the provider is called, with `UNSUPPORTED_CAPABILITY`. They describe
/// one-shot starts only.
///
/// Built from [`Capabilities::NONE`] or [`Capabilities::ALL`] with
/// [`with`](Capabilities::with) / [`without`](Capabilities::without), so a
/// capability added later breaks no provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Capabilities {
    /// Honours [`ChildSettings::output_schema`](crate::ChildSettings::output_schema).
    pub output_schema: bool,
    /// Honours [`ChildSettings::max_depth`](crate::ChildSettings::max_depth).
    pub depth_limit: bool,
    /// Honours [`ChildSettings::tool_filter`](crate::ChildSettings::tool_filter).
    pub tool_filter: bool,
    /// Honours [`ChildSettings::persona`](crate::ChildSettings::persona).
    pub persona: bool,
    /// Honours [`ChildSettings::token_limit`](crate::ChildSettings::token_limit):
    /// the provider reports every model call's usage, so a budget can be kept.
    pub token_budget: bool,
}

impl Capabilities {
    /// Every capability: what an in-process provider usually offers.
    pub const ALL: Self = Self {
        output_schema: true,
        depth_limit: true,
        tool_filter: true,
        persona: true,
        token_budget: true,
    };

    /// No capability: what an out-of-process provider usually offers.
    pub const NONE: Self = Self {
        output_schema: false,
        depth_limit: false,
        tool_filter: false,
        persona: false,
        token_budget: false,
    };

    /// These capabilities plus `capability`.
    ///
    /// ```
    /// use dsh_subagent_api::{Capabilities, Capability};
    /// let caps = Capabilities::NONE.with(Capability::Persona);
    /// assert!(caps.supports(Capability::Persona) && !caps.supports(Capability::ToolFilter));
    /// assert_eq!(Capabilities::ALL.without(Capability::OutputSchema).with(Capability::OutputSchema), Capabilities::ALL);
    /// ```
    #[must_use]
    pub const fn with(self, capability: Capability) -> Self {
        self.set(capability, true)
    }

    /// These capabilities minus `capability`.
    #[must_use]
    pub const fn without(self, capability: Capability) -> Self {
        self.set(capability, false)
    }

    const fn set(mut self, capability: Capability, on: bool) -> Self {
        match capability {
            Capability::OutputSchema => self.output_schema = on,
            Capability::DepthLimit => self.depth_limit = on,
            Capability::ToolFilter => self.tool_filter = on,
            Capability::Persona => self.persona = on,
            Capability::TokenBudget => self.token_budget = on,
        }
        self
    }

    /// Whether `capability` is offered.
    pub fn supports(&self, capability: Capability) -> bool {
        match capability {
            Capability::OutputSchema => self.output_schema,
            Capability::DepthLimit => self.depth_limit,
            Capability::ToolFilter => self.tool_filter,
            Capability::Persona => self.persona,
            Capability::TokenBudget => self.token_budget,
        }
    }
}

/// One capability, named as the contract names it (`depthLimit`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `outputSchema`
    OutputSchema,
    /// `depthLimit`
    DepthLimit,
    /// `toolFilter`
    ToolFilter,
    /// `persona`
    Persona,
    /// `tokenBudget`
    TokenBudget,
}

impl Capability {
    /// The contract's name for the capability.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OutputSchema => "outputSchema",
            Self::DepthLimit => "depthLimit",
            Self::ToolFilter => "toolFilter",
            Self::Persona => "persona",
            Self::TokenBudget => "tokenBudget",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
