//! An agent's view of the tool registry: a filter that hides and refuses.

use dsh_llm::ToolDefinition;
use dsh_subagent_api::ToolFilter;
use std::sync::Arc;

use dsh_tools::{Tool, ToolExecution, ToolRegistry, ToolResult};
use serde_json::Value;
use tracing::Instrument;

use crate::wording;

/// A tool filter names a tool the registry does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UnknownFilterTool {
    message: String,
    name: String,
}

impl UnknownFilterTool {
    /// The name the filter used.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The tools one agent may see and call: a registry seen through a filter,
/// plus tools local to this agent (such as a child's `structured_output`),
/// which the filter does not apply to and which shadow registry tools.
#[derive(Clone)]
pub struct ToolView {
    registry: ToolRegistry,
    filter: Option<ToolFilter>,
    local: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolView")
            .field("registry", &self.registry)
            .field("filter", &self.filter)
            .field("local", &self.local.iter().map(|tool| tool.name()).collect::<Vec<_>>())
            .finish()
    }
}

impl ToolView {
    /// Every tool of `registry`.
    pub fn all(registry: ToolRegistry) -> Self {
        Self {
            registry,
            filter: None,
            local: Vec::new(),
        }
    }

    /// Adds a tool local to this agent.
    #[must_use]
    pub fn with_local(mut self, tool: Arc<dyn Tool>) -> Self {
        self.local.push(tool);
        self
    }

    fn local(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.local.iter().find(|tool| tool.name() == name)
    }

    /// The tools of `registry` that `filter` permits.
    ///
    /// Fails when the filter names a tool the registry does not have: a typo
    /// in a filter must not silently widen or narrow what a child can do.
    pub fn filtered(registry: ToolRegistry, filter: ToolFilter) -> Result<Self, UnknownFilterTool> {
        let known = registry.names();
        let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
        if let Some(unknown) = named.into_iter().find(|name| !known.contains(name)) {
            return Err(UnknownFilterTool {
                message: wording::unknown_filter_tool(unknown, &known),
                name: unknown.clone(),
            });
        }
        Ok(Self {
            registry,
            filter: Some(filter),
            local: Vec::new(),
        })
    }

    /// The registry behind the view.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The filter, if any.
    pub fn filter(&self) -> Option<&ToolFilter> {
        self.filter.as_ref()
    }

    /// Whether the view shows a tool of this name.
    pub fn permits(&self, name: &str) -> bool {
        self.local(name).is_some() || self.filter.as_ref().is_none_or(|filter| filter.permits(name))
    }

    /// The definitions the model is offered, sorted by name.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> = self
            .registry
            .specs()
            .into_iter()
            .filter(|spec| self.local(&spec.name).is_none() && self.permits(&spec.name))
            .map(|spec| ToolDefinition {
                name: spec.name,
                description: spec.description,
                parameters: spec.parameters,
            })
            .chain(self.local.iter().map(|tool| ToolDefinition {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.parameters().clone(),
            }))
            .collect();
        definitions.sort_by(|a, b| a.name.cmp(&b.name));
        definitions
    }

    /// Calls a tool the view permits; a filtered tool is refused, never run.
    ///
    /// Every call gets its `execute_tool <name>` span: registry tools in the
    /// registry, the rest (refusals, unreadable arguments, local tools) here.
    pub async fn call(&self, name: &str, arguments: &str, exec: ToolExecution) -> ToolResult {
        let args = match self.check(name, arguments) {
            Ok(args) => args,
            Err(error) => {
                let span = dsh_tools::trace::execute_tool_span(name, &exec);
                let result = ToolResult::from(error);
                dsh_tools::trace::record_tool_result(&span, &result);
                return result;
            }
        };
        match self.local(name) {
            Some(tool) => {
                let span = dsh_tools::trace::execute_tool_span(name, &exec);
                let result = dsh_tools::execute(&**tool, args, exec).instrument(span.clone()).await;
                dsh_tools::trace::record_tool_result(&span, &result);
                result
            }
            None => self.registry.call(name, args, exec).await,
        }
    }

    /// The call's arguments, once the view permits the tool and they parse.
    fn check(&self, name: &str, arguments: &str) -> Result<Value, dsh_tools::ToolError> {
        if !self.permits(name) {
            return Err(dsh_tools::ToolError::new(wording::tool_not_available(name))
                .with_code(crate::ErrorCode::ToolNotAvailable));
        }
        if arguments.trim().is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(arguments).map_err(|error| {
            dsh_tools::ToolError::new(wording::arguments_not_json(name, &error.to_string()))
                .with_code(dsh_tools::ErrorCode::InvalidArguments)
        })
    }
}
