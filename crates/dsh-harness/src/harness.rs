//! The assembled harness: what it mounted, and the handles a harness loop needs.

use std::sync::Arc;

use dsh_subagent::{
    ControlError, DelegationTree, ProviderRegistration, RecoveryReport, SubagentControl, SubagentService,
};
use dsh_subagent_api::SubagentProvider;
use dsh_tasks::TaskRegistry;
use dsh_tool_subagent::SubagentToolPlugin;
use dsh_tool_subagent_control::SubagentControlPlugin;
use dsh_tool_tasks::TaskToolsPlugin;
use dsh_tools::{AgentId, AgentRef, RegistryError, ResultLimit, ToolRegistration, ToolRegistry};

use crate::BuildError;
use crate::assembly::{Assembly, Background};

/// A built harness: the tool registry the model is offered, and the
/// handles around it.
///
/// Everything the builder registered stays registered while the harness
/// lives (providers, tools, the plugins' subscriptions) and is removed when
/// it drops (or on [`Harness::dispose`]), tools first. Dropping it does not
/// stop background tasks that are still running: end each owner's with
/// [`TaskRegistry::dispose_owner`] on [`Harness::tasks`] first.
///
/// It depends on no agent loop: a loop of the harness's own calls
/// [`ToolRegistry::call`] on [`Harness::tools`] for the model's tool calls,
/// and hands [`Harness::notices`] to the owner's next model call.
#[derive(Debug)]
pub struct Harness {
    // Field order is drop order: the tools leave before their providers.
    _subagents: Vec<SubagentToolPlugin>,
    _control_tools: Option<SubagentControlPlugin>,
    _task_tools: Option<TaskToolsPlugin>,
    _own_tools: Vec<ToolRegistration>,
    _providers: Vec<ProviderRegistration>,
    control: Option<SubagentControl>,
    tasks: TaskRegistry,
    service: SubagentService,
    tools: ToolRegistry,
    result_limit: ResultLimit,
}

impl Harness {
    /// Registers the checked providers and mounts every tool, on a new
    /// service and a new registry; a failure drops what was mounted so far.
    pub(crate) fn mount(assembly: Assembly, providers: Vec<Arc<dyn SubagentProvider>>) -> Result<Self, BuildError> {
        let service = SubagentService::with_limits(assembly.limits);
        let tools = ToolRegistry::new();
        let tasks = TaskRegistry::new();
        let providers = providers
            .into_iter()
            .map(|provider| service.register_provider(provider))
            .collect::<Result<Vec<_>, _>>()?;
        let own_tools = assembly
            .tools
            .into_iter()
            .map(|tool| tools.register(tool).map_err(refused))
            .collect::<Result<Vec<_>, _>>()?;
        let task_tools = match assembly.background {
            Background::Off => None,
            Background::Tasks | Background::Continuable(_) => {
                Some(TaskToolsPlugin::apply_within(&tasks, &tools, assembly.result_limit).map_err(refused)?)
            }
        };
        let control = match assembly.background {
            Background::Continuable(store) => Some(SubagentControl::new(service.clone(), tasks.clone(), store)),
            Background::Off | Background::Tasks => None,
        };
        let control_tools = control
            .as_ref()
            .map(|control| SubagentControlPlugin::apply(control, &tools).map_err(refused))
            .transpose()?;
        let result_limit = assembly.result_limit;
        let subagents = assembly
            .subagents
            .into_iter()
            .map(|(mut config, _)| {
                // A tool's own limit, else the harness's: every tool gets one.
                config.result_limit = Some(config.result_limit.unwrap_or(result_limit));
                config
            })
            .map(|config| match (&control, &task_tools) {
                (Some(control), _) => SubagentToolPlugin::apply_with_control(config, &service, &tools, control),
                (None, Some(_)) => SubagentToolPlugin::apply_with_tasks(config, &service, &tools, &tasks),
                (None, None) => SubagentToolPlugin::apply(config, &service, &tools),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            _subagents: subagents,
            _control_tools: control_tools,
            _task_tools: task_tools,
            _own_tools: own_tools,
            _providers: providers,
            control,
            tasks,
            service,
            tools,
            result_limit,
        })
    }

    /// Every tool the harness mounted: what the model is offered. Tools
    /// mounted here later (those of [`HarnessBuilder::later_tools`](crate::HarnessBuilder::later_tools)) join it.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Opens a delegation tree under the harness's limits: give its
    /// lineage to one top-level agent (`AgentRef::with_lineage`), and all
    /// that agent delegates shares one gate and one token budget. Agents
    /// given none share the service's default tree.
    pub fn open_tree(&self) -> DelegationTree {
        self.service.open_tree()
    }

    /// The subagent service the providers are registered in: subscribe to
    /// its run events to follow every child.
    pub fn service(&self) -> &SubagentService {
        &self.service
    }

    /// The result limit of every tool of this harness that sets none of its
    /// own ([`HarnessBuilder::result_limit`](crate::HarnessBuilder::result_limit), else [`ResultLimit::DEFAULT`]):
    /// what a harness gives the other tools it mounts, such as MCP tools.
    pub fn result_limit(&self) -> ResultLimit {
        self.result_limit
    }

    /// The background tasks of every agent of this harness (none while
    /// background is [`Background::Off`]).
    pub fn tasks(&self) -> &TaskRegistry {
        &self.tasks
    }

    /// The control service of continuable children, with
    /// [`Background::Continuable`].
    pub fn control(&self) -> Option<&SubagentControl> {
        self.control.as_ref()
    }

    /// The completion notices of background tasks, for their owner's next
    /// model call.
    pub fn notices(&self) -> Notices {
        Notices {
            tasks: self.tasks.clone(),
        }
    }

    /// Resumes the delegation tree below `agent` after an interruption (a
    /// crash, a resumable stop): call it when `agent` is resumed from its
    /// records, before its turn goes on (an agent loop that resumes its own
    /// children calls it for each of them too). Every background child the
    /// records name becomes a task again under the id the model read: one
    /// that had finished delivers its result (its completion notice queued
    /// unless the agent had read it), and is finished again when this
    /// returns; an interrupted one goes on from its
    /// last completed step, one that cannot go on is reported disconnected.
    /// Foreground children are continued by their calls, run again when the
    /// turn resumes. The report says what became of each child.
    ///
    /// Without [`Background::Continuable`] there is no store of children to
    /// read, and the report is empty. Calling it twice restores nothing twice.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use dsh_harness::{Background, HarnessBuilder};
    /// # use dsh_subagent_testing::MemoryChildStore;
    /// # use dsh_tools::AgentRef;
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let harness = HarnessBuilder::new()
    ///     .background(Background::Continuable(Arc::new(MemoryChildStore::new())))
    ///     .build()
    ///     .unwrap();
    /// let report = harness.recover(&AgentRef::new("parent")).await.unwrap();
    /// assert!(report.children.is_empty(), "a parent with no recorded children");
    /// # }
    /// ```
    pub async fn recover(&self, agent: &AgentRef) -> Result<RecoveryReport, ControlError> {
        match &self.control {
            Some(control) => control.recover(agent).await,
            None => Ok(RecoveryReport::default()),
        }
    }

    /// Unmounts everything now (the same as dropping the harness).
    pub fn dispose(self) {}
}

/// A duplicate the checks did not see is still a duplicate.
fn refused(error: RegistryError) -> BuildError {
    match error {
        RegistryError::DuplicateName { name } => BuildError::DuplicateToolName { name },
        other => BuildError::Registry(other),
    }
}

/// The completion notices of a harness's background tasks: "background task
/// subagent-1 (…) finished [status: completed]. Read its output with
/// task_output." Cheap to clone.
///
/// Before each model call of an agent, take its notices and append them to
/// the conversation (the `dsh-agent` loop does this through
/// `AgentRuntime::with_notices`). Each notice is handed over once.
#[derive(Clone, Debug)]
pub struct Notices {
    tasks: TaskRegistry,
}

impl Notices {
    /// Takes the notices pending for `agent`, oldest first.
    pub fn take(&self, agent: &AgentId) -> Vec<String> {
        self.tasks.take_notices(agent)
    }

    /// Takes the notices pending for `agent`, oldest first, each with the id
    /// of the task it reports: record which tasks a message told the agent
    /// of, so that a resume after a crash never tells it twice.
    pub fn take_with_tasks(&self, agent: &AgentId) -> Vec<(String, String)> {
        self.tasks.take_task_notices(agent)
    }

    /// Waits until a notice is pending for `agent` (`true`), or answers
    /// `false` once none is and nothing `agent` started in the background
    /// still runs: an agent whose model answered before its background
    /// children finished waits here, then reads their notices.
    pub async fn wait_for_work(&self, agent: &AgentId) -> bool {
        self.tasks.wait_for_work(agent).await
    }
}
