//! The `subagent` tool itself.

use std::sync::Arc;

use dsh_subagent::SubagentService;
use dsh_subagent_api::StartRequest;
use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::args::{self, DelegationArgs};
use crate::config::{MaxDepth, SubagentToolConfig};
use crate::lifecycle;
use crate::wording::{self, Wording};

/// One mounted `subagent` tool, bound to one provider and one wording.
pub(crate) struct SubagentTool {
    config: Arc<SubagentToolConfig>,
    wording: Wording,
    parameters: Value,
    service: SubagentService,
}

impl SubagentTool {
    pub(crate) fn new(config: Arc<SubagentToolConfig>, wording: Wording, service: SubagentService) -> Self {
        Self {
            config,
            wording,
            parameters: args::parameters(wording),
            service,
        }
    }

    /// Checks the call and builds the start request. Synchronous, so the
    /// arguments and the call context are dropped before anything is awaited.
    fn request(&self, args: &Value, exec: &ToolExecution) -> Result<StartRequest, ToolError> {
        let args = DelegationArgs::parse(args)?;
        let parent = exec
            .agent()
            .cloned()
            .ok_or_else(|| ToolError::new(wording::NO_CALLING_AGENT).with_code("NO_CALLING_AGENT"))?;
        if args.run_in_background == Some(true) && !self.config.enable_run_in_background {
            return Err(ToolError::new(wording::BACKGROUND_DISABLED).with_code("BACKGROUND_DISABLED"));
        }
        let mut request = StartRequest::text(args.prompt, parent, exec.cancel().child_token());
        request.label = Some(args.description);
        request.agent_options = self.config.agent_options.clone();
        request.persona = self.config.persona.clone();
        request.tool_filter = self.config.tool_filter.clone();
        request.max_depth = match self.config.max_depth {
            Some(MaxDepth::Limit(limit)) => Some(limit),
            Some(MaxDepth::ProviderManaged) | None => None,
        };
        Ok(request)
    }
}

impl Tool for SubagentTool {
    fn name(&self) -> &str {
        &self.config.tool_name
    }

    fn description(&self) -> &str {
        self.wording.description()
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        match self.request(&args, &exec) {
            Ok(request) => Box::pin(lifecycle::delegate(&self.service, &self.config.provider, request)),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }
}
