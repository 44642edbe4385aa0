//! The `subagent` tool itself.

use std::sync::Arc;

use dsh_subagent::SubagentService;
use dsh_subagent_api::{SpanOrigin, StartRequest};
use dsh_tasks::{TaskRegistry, TaskSpec};
use dsh_tools::{Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::args::{self, DelegationArgs};
use crate::config::{MaxDepth, SubagentToolConfig};
use crate::wording::{self, Wording};
use crate::{lifecycle, trace};

/// One mounted `subagent` tool, bound to one provider and one wording.
pub(crate) struct SubagentTool {
    config: Arc<SubagentToolConfig>,
    description: String,
    parameters: Value,
    service: SubagentService,
    background: Option<Background>,
}

/// A checked call: run it now, or hand it to a background task.
enum Call<'a> {
    Foreground(StartRequest),
    Background(&'a Background, StartRequest),
}

/// What a background call needs: the task registry, and the tool registry in
/// which the caller collects results.
#[derive(Clone)]
pub(crate) struct Background {
    pub(crate) tasks: Option<TaskRegistry>,
    pub(crate) tools: ToolRegistry,
    /// The control service for continuable children, when mounted with one.
    pub(crate) control: Option<dsh_subagent::SubagentControl>,
    /// Whether the provider can continue its children (set at mount): then
    /// background calls take the continuable route.
    pub(crate) continuable: bool,
}

impl SubagentTool {
    pub(crate) fn new(
        config: Arc<SubagentToolConfig>,
        wording: Wording,
        service: SubagentService,
        background: Option<Background>,
    ) -> Self {
        let mut description = wording.description().to_owned();
        let mut parameters = args::parameters(wording, background.is_some());
        match &background {
            Some(background) if background.continuable => {
                description.push_str(wording::CONTINUABLE_SUFFIX);
                args::describe_run_in_background(&mut parameters, wording::RUN_IN_BACKGROUND_CONTINUABLE);
            }
            Some(_) => description.push_str(wording::ONE_SHOT_SUFFIX),
            None => {}
        }
        Self {
            config,
            description,
            parameters,
            service,
            background,
        }
    }

    /// Checks the call and builds its start request. Synchronous, so the
    /// arguments and the call context are dropped before anything is awaited.
    fn prepare(&self, args: Value, exec: &ToolExecution) -> Result<Call<'_>, ToolError> {
        let args = DelegationArgs::parse(args)?;
        let parent = exec
            .agent()
            .cloned()
            .ok_or_else(|| ToolError::new(wording::NO_CALLING_AGENT).with_code(dsh_tools::ErrorCode::NoCallingAgent))?;
        let background = match (args.run_in_background, &self.background) {
            (Some(true), None) => {
                return Err(
                    ToolError::new(wording::BACKGROUND_DISABLED).with_code(crate::ErrorCode::BackgroundDisabled)
                );
            }
            (Some(true), Some(background)) => Some(background),
            _ => None,
        };
        // The call's token itself, not a child of it: the provider derives
        // its run's own token from it (cancelling the call reaches the
        // child, dispose cancels the child alone), and the tool never
        // cancels it, so no node of the tool's own is needed.
        let mut request = StartRequest::text(args.prompt, parent, exec.cancel().clone());
        request.label = Some(args.description);
        request.agent_options = self.config.agent_options.clone();
        request.persona = self.config.persona.clone();
        request.tool_filter = self.config.tool_filter.clone();
        request.max_depth = match self.config.max_depth {
            Some(MaxDepth::Limit(limit)) => Some(limit),
            Some(MaxDepth::ProviderManaged) | None => None,
        };
        Ok(match background {
            Some(background) => {
                // The child outlives this call: its trace follows from it.
                request.origin = SpanOrigin::follows_current();
                Call::Background(background, request)
            }
            None => Call::Foreground(request),
        })
    }

    /// The one-shot background route: the run becomes a task of the caller,
    /// settled and released by the task; the call returns its id at once.
    fn start_in_background(&self, background: &Background, mut request: StartRequest) -> Result<ToolOutput, ToolError> {
        let tasks = background
            .tasks
            .as_ref()
            .ok_or_else(|| ToolError::new(wording::TASKS_UNAVAILABLE).with_code(crate::ErrorCode::TasksUnavailable))?;
        if background.tools.get("task_output").is_none() {
            return Err(ToolError::new(wording::NO_CONTROL_SURFACE).with_code(crate::ErrorCode::TasksUnavailable));
        }
        let owner = request.parent.id().clone();
        let service = self.service.clone();
        let provider = self.config.provider.clone();
        let label = request.label.clone().unwrap_or_default();
        let spec = TaskSpec::new("subagent", label, owner);
        let id = tasks
            .spawn(spec, move |control| async move {
                // The task's kill, not the call's token, governs a background run.
                request.cancel = control.token().child_token();
                let cancel = request.cancel.clone();
                match service.start(&provider, request).await {
                    Ok(run) => {
                        trace::started(&provider, &run);
                        trace::published(&run, None);
                        let (result, disposed) = lifecycle::Settle::detached(run, cancel).await;
                        trace::settled(&result);
                        trace::disposed(&disposed);
                        dsh_subagent::settlement::task_outcome(result, disposed)
                    }
                    Err(error) => {
                        dsh_subagent::settlement::start_failed_outcome(&error, control.token().is_cancelled())
                    }
                }
            })
            .map_err(ToolError::from)?;
        Ok(ToolOutput::text(wording::started_background(&id)))
    }
}

impl Tool for SubagentTool {
    fn name(&self) -> &str {
        &self.config.tool_name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        &self.parameters
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        match self.prepare(args, &exec) {
            Ok(Call::Foreground(request)) => {
                Box::pin(lifecycle::delegate(&self.service, &self.config.provider, request))
            }
            Ok(Call::Background(background, request)) if background.continuable => {
                let label = request.label.clone().unwrap_or_default();
                Box::pin(std::future::ready(crate::continuable::start(
                    background.control.as_ref(),
                    &background.tools,
                    &self.config.provider,
                    label,
                    request,
                )))
            }
            Ok(Call::Background(background, request)) => {
                Box::pin(std::future::ready(self.start_in_background(background, request)))
            }
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }
}
