//! An agent's view of the tool registry: a filter that hides and refuses.

use dsh_llm::ToolDefinition;
use dsh_subagent_api::ToolFilter;
use dsh_tools::{ToolExecution, ToolRegistry, ToolResult};
use serde_json::Value;

use crate::wording;

/// The tools one agent may see and call: a registry seen through a filter.
#[derive(Clone, Debug)]
pub struct ToolView {
    registry: ToolRegistry,
    filter: Option<ToolFilter>,
}

impl ToolView {
    /// Every tool of `registry`.
    pub fn all(registry: ToolRegistry) -> Self {
        Self { registry, filter: None }
    }

    /// The tools of `registry` that `filter` permits.
    ///
    /// Fails when the filter names a tool the registry does not have: a typo
    /// in a filter must not silently widen or narrow what a child can do.
    pub fn filtered(registry: ToolRegistry, filter: ToolFilter) -> Result<Self, String> {
        let known = registry.names();
        let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
        if let Some(unknown) = named.into_iter().find(|name| !known.contains(name)) {
            return Err(wording::unknown_filter_tool(unknown, &known));
        }
        Ok(Self {
            registry,
            filter: Some(filter),
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
        self.filter.as_ref().is_none_or(|filter| filter.permits(name))
    }

    /// The definitions the model is offered, sorted by name.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.registry
            .specs()
            .into_iter()
            .filter(|spec| self.permits(&spec.name))
            .map(|spec| ToolDefinition {
                name: spec.name,
                description: spec.description,
                parameters: spec.parameters,
            })
            .collect()
    }

    /// Calls a tool the view permits; a filtered tool is refused, never run.
    pub async fn call(&self, name: &str, arguments: &str, exec: ToolExecution) -> ToolResult {
        if !self.permits(name) {
            return dsh_tools::ToolError::new(wording::tool_not_available(name))
                .with_code("TOOL_NOT_AVAILABLE")
                .into();
        }
        let args = if arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            match serde_json::from_str(arguments) {
                Ok(args) => args,
                Err(error) => {
                    return dsh_tools::ToolError::new(wording::arguments_not_json(name, &error.to_string()))
                        .with_code("INVALID_ARGUMENTS")
                        .into();
                }
            }
        };
        self.registry.call(name, args, exec).await
    }
}
