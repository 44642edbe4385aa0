//! The `subagent` tool itself.

use std::sync::Arc;

use dsh_subagent::{SubagentControl, SubagentService};
use dsh_subagent_api::{ChildSettings, Provenance, RunMode, SpanOrigin, StartRequest};
use dsh_tasks::TaskRegistry;
use dsh_tools::{Arguments, Tool, ToolError, ToolExecution, ToolOutput, ToolRegistry};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::MaxDepth;
use crate::args::{self, SubagentArgs};
use crate::config::SubagentToolConfig;
use crate::cut::{Cutter, Pages};
use crate::lifecycle;
use crate::wording::{self, Wording};

/// One mounted `subagent` tool, bound to one provider, one wording and one
/// background route, and to where its cut results are kept.
pub(crate) struct SubagentTool {
    config: Arc<SubagentToolConfig>,
    description: String,
    arguments: Arguments<SubagentArgs>,
    service: SubagentService,
    background: BackgroundRoute,
    /// What every call asks of its child beyond the prompt, built once from
    /// the configuration and shared by every request; `None`: nothing.
    settings: Option<Arc<ChildSettings>>,
    /// How every call's child came about (this tool, its provider), built
    /// once and shared by every request; a call with an id of its own
    /// gets a copy with it.
    provenance: Arc<Provenance>,
    /// The caller's tasks, where a foreground result over the budget is
    /// kept for `task_output`; `None`: loaded without a task registry.
    pages: Option<Pages>,
}

/// Where a `run_in_background: true` call goes, chosen at mount from the
/// configuration, what the plugin was loaded with, and the provider.
#[derive(Clone)]
pub(crate) enum BackgroundRoute {
    /// `enableRunInBackground` is off: such a call is refused.
    Disabled,
    /// The run becomes a task of the caller, collected with `task_output`.
    OneShot { tasks: TaskRegistry, tools: ToolRegistry },
    /// The provider can continue its children: a durable child starts
    /// through the control service, followed up with `send_message`.
    /// Without a control service every background call fails, saying so.
    Continuable {
        control: Option<SubagentControl>,
        tools: ToolRegistry,
    },
}

impl SubagentTool {
    pub(crate) fn new(
        config: Arc<SubagentToolConfig>,
        wording: Wording,
        service: SubagentService,
        background: BackgroundRoute,
        pages: Option<Pages>,
    ) -> Self {
        let (suffix, run_in_background) = match &background {
            BackgroundRoute::Disabled => ("", None),
            BackgroundRoute::OneShot { .. } => (wording::ONE_SHOT_SUFFIX, Some(wording::RUN_IN_BACKGROUND_ONE_SHOT)),
            BackgroundRoute::Continuable { .. } => (
                wording::CONTINUABLE_SUFFIX,
                Some(wording::RUN_IN_BACKGROUND_CONTINUABLE),
            ),
        };
        let settings = child_settings(&config);
        let mut provenance = Provenance::default();
        provenance.tool = Some(config.tool_name.clone());
        provenance.provider = Some(config.provider.clone());
        Self {
            config,
            description: format!("{}{suffix}", wording.description()),
            arguments: args::arguments(wording, run_in_background),
            service,
            background,
            settings: (!settings.is_empty()).then(|| Arc::new(settings)),
            provenance: Arc::new(provenance),
            pages,
        }
    }

    /// Checks the call and builds its start request. Synchronous, so the
    /// arguments and the call context are dropped before anything is awaited.
    /// The request's [`RunMode`] says whether the call asks to run in the
    /// background.
    fn prepare(&self, args: Value, exec: &ToolExecution) -> Result<StartRequest, ToolError> {
        let args = self.arguments.parse(args, &args::Words)?;
        let parent = exec
            .agent()
            .cloned()
            .ok_or_else(|| ToolError::new(wording::NO_CALLING_AGENT).with_code(dsh_tools::ErrorCode::NoCallingAgent))?;
        let mode = match args.run_in_background {
            Some(true) => RunMode::Background,
            Some(false) | None => RunMode::Foreground,
        };
        // The call's token itself, not a child of it: the provider derives
        // its run's own token from it (cancelling the call reaches the
        // child, dispose cancels the child alone), and the tool never
        // cancels it, so no node of the tool's own is needed.
        let mut request = StartRequest::text(args.prompt, parent, exec.cancel().clone());
        if let Some(settings) = &self.settings {
            request = request.with_settings(settings.clone());
        }
        request.label = Some(args.description);
        request.mode = mode;
        request = request.with_provenance(self.provenance.clone());
        if let Some(call_id) = exec.call_id() {
            request.provenance_mut().call_id = Some(call_id.to_owned());
        }
        // A call run again after an interruption names the child it had
        // started: the provider continues that child instead of another.
        if let Some(rerun) = exec.rerun() {
            request.provenance_mut().rerun = Some(rerun.clone());
        }
        if mode == RunMode::Background {
            // The child outlives this call: its trace follows from it.
            request.origin = SpanOrigin::follows_current();
        }
        Ok(request)
    }

    /// The one-shot background route: the run becomes a task of the caller,
    /// settled and released by the task; the call returns its id at once.
    fn start_one_shot(
        &self,
        tasks: &TaskRegistry,
        tools: &ToolRegistry,
        request: StartRequest,
    ) -> Result<ToolOutput, ToolError> {
        if tools.get(dsh_tasks::wording::TASK_OUTPUT).is_none() {
            return Err(ToolError::new(wording::NO_CONTROL_SURFACE).with_code(crate::ErrorCode::TasksUnavailable));
        }
        let label = request.label.clone().unwrap_or_default();
        let id = self
            .service
            .start_as_task(tasks, &self.config.provider, label, request)
            .map_err(ToolError::from)?;
        Ok(ToolOutput::text(wording::started_background(&id)))
    }
}

/// What a tool configured so asks of every child beyond its prompt.
fn child_settings(config: &SubagentToolConfig) -> ChildSettings {
    let mut settings = ChildSettings::new();
    settings.agent_options = config.agent_options.clone();
    settings.persona = config.persona.clone();
    settings.tool_filter = config.tool_filter.clone();
    settings.timeout = config.timeout;
    settings.token_limit = config.token_limit;
    settings.max_depth = config.max_depth.and_then(MaxDepth::cap);
    settings
}

impl Tool for SubagentTool {
    fn name(&self) -> &str {
        &self.config.tool_name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Value {
        self.arguments.parameters()
    }

    fn execute(&self, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        let request = match self.prepare(args, &exec) {
            Ok(mut request) if request.mode == RunMode::Foreground => {
                // Held while the call is in flight, for a cut once the run
                // is over: who reads the result (pointers only), the label
                // its kept task shows (exactly sized), and the id it is kept
                // under, reserved now, before anything is awaited, so the
                // calls of one round are numbered in call order. The child
                // records that id: it names the task that keeps a cut result.
                let caller = request.parent.clone();
                let label: Box<str> = request.label.as_deref().unwrap_or_default().into();
                let reserved = self
                    .pages
                    .as_ref()
                    .and_then(|pages| pages.reserve(&self.service, &caller));
                if let Some(reservation) = &reserved {
                    request.provenance_mut().task_id = Some(reservation.id().to_string());
                }
                // Mapped, not awaited in an `async` block, which would hold
                // the delegation's future twice (as a capture and as the
                // awaited value) for as long as the call is in flight.
                let delegating = lifecycle::delegate(&self.service, &self.config.provider, request);
                return Box::pin(delegating.map(move |delegated| {
                    let cutter = Cutter {
                        limit: self.config.result_limit_or_default(),
                        pages: self.pages.as_ref(),
                        service: &self.service,
                        caller: &caller,
                        label,
                        reserved,
                    };
                    cutter.within(delegated)
                }));
            }
            Ok(request) => request,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let started = match &self.background {
            BackgroundRoute::Disabled => {
                Err(ToolError::new(wording::BACKGROUND_DISABLED).with_code(crate::ErrorCode::BackgroundDisabled))
            }
            BackgroundRoute::OneShot { tasks, tools } => self.start_one_shot(tasks, tools, request),
            BackgroundRoute::Continuable { control, tools } => {
                let label = request.label.clone().unwrap_or_default();
                crate::continuable::start(control.as_ref(), tools, &self.config.provider, label, request)
            }
        };
        Box::pin(std::future::ready(started))
    }
}
