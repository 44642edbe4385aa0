//! Mounting: the tool follows its provider in and out of the service.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dsh_subagent::{SubagentControl, SubagentEvent, SubagentService, Subscription};
use dsh_subagent_api::{SubagentError, SubagentProvider};
use dsh_tasks::TaskRegistry;
use dsh_tools::{MountedTool, NameReservation, RegistryError, ToolRegistry};

use crate::MaxDepth;
use crate::config::{ConfigError, SubagentToolConfig};
use crate::cut::Pages;
use crate::tool::{BackgroundRoute, SubagentTool};
use crate::wording::{self, Wording};

/// One loaded `subagent` tool instance.
///
/// [`SubagentToolPlugin::apply`] checks the configuration and claims the tool
/// name at once (a duplicate name fails here, before any provider exists),
/// then mounts the tool whenever its provider is registered and unmounts it
/// whenever the provider leaves. Each mount re-derives the wording from the
/// provider instance that arrived. Dropping the plugin (or
/// [`SubagentToolPlugin::dispose`]) unmounts the tool, frees the name and
/// stops following: a plugin disposed while waiting never mounts.
pub struct SubagentToolPlugin {
    inner: Arc<PluginInner>,
    _subscription: Subscription,
}

struct PluginInner {
    config: Arc<SubagentToolConfig>,
    service: SubagentService,
    /// What background calls were given at load; `None` when
    /// `enableRunInBackground` is off.
    background: Option<Backing>,
    /// Where cut foreground results are kept: the task registry the
    /// instance was loaded with, whatever `enableRunInBackground` says.
    pages: Option<Pages>,
    reservation: NameReservation,
    state: Mutex<PluginState>,
}

/// What the plugin was loaded with for background calls; each mount picks
/// the route from it and the provider.
#[derive(Clone)]
struct Backing {
    tasks: TaskRegistry,
    control: Option<SubagentControl>,
    tools: ToolRegistry,
}

impl Backing {
    /// Background runs as tasks in `tasks`, with no control service.
    fn tasks(tasks: TaskRegistry, tools: &ToolRegistry) -> Self {
        Self {
            tasks,
            control: None,
            tools: tools.clone(),
        }
    }
}

#[derive(Default)]
struct PluginState {
    disposed: bool,
    mounted: Option<(MountedTool, Wording)>,
}

impl SubagentToolPlugin {
    /// Loads one instance: validates `config`, reserves its tool name in
    /// `tools`, and mounts the tool now if the provider is registered in
    /// `service` (else when it appears).
    ///
    /// Without a task registry there is nowhere to run a background call,
    /// nor to keep a result over the budget for paged reads (its notice
    /// then says the rest is not kept), so a configuration with
    /// `enableRunInBackground` is refused
    /// ([`ConfigError::BackgroundWithoutTasks`]); load it with
    /// [`apply_with_tasks`](Self::apply_with_tasks) instead.
    pub fn apply(
        config: SubagentToolConfig,
        service: &SubagentService,
        tools: &ToolRegistry,
    ) -> Result<Self, ConfigError> {
        Self::load(config, service, tools, None)
    }

    /// Loads one instance whose background runs (when
    /// `enableRunInBackground` is set) become tasks in `tasks`, collected
    /// with the task tools mounted in `tools`. A foreground result over the
    /// budget is kept there too, as a finished task of its caller, for
    /// `task_output` to page through.
    pub fn apply_with_tasks(
        config: SubagentToolConfig,
        service: &SubagentService,
        tools: &ToolRegistry,
        tasks: &TaskRegistry,
    ) -> Result<Self, ConfigError> {
        Self::load(config, service, tools, Some(Backing::tasks(tasks.clone(), tools)))
    }

    /// Like [`SubagentToolPlugin::apply_with_tasks`], with the control service
    /// of continuable children: over a provider that can continue its
    /// children ([`SubagentProvider::continuation`]), a background call
    /// starts a durable child through `control` and returns
    /// `started subagent <id> as task <taskId>`; the model follows up with
    /// `send_message` (mount `dsh-tool-subagent-control` in `tools`) and
    /// collects with `task_output`.
    pub fn apply_with_control(
        config: SubagentToolConfig,
        service: &SubagentService,
        tools: &ToolRegistry,
        control: &SubagentControl,
    ) -> Result<Self, ConfigError> {
        let backing = Backing {
            control: Some(control.clone()),
            ..Backing::tasks(control.tasks().clone(), tools)
        };
        Self::load(config, service, tools, Some(backing))
    }

    /// `backing` is what background calls were given, if anything: an
    /// instance with background runs and no backing is refused before its
    /// name is reserved.
    fn load(
        config: SubagentToolConfig,
        service: &SubagentService,
        tools: &ToolRegistry,
        backing: Option<Backing>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        if config.enable_run_in_background && backing.is_none() {
            return Err(ConfigError::BackgroundWithoutTasks {
                tool_name: config.tool_name,
            });
        }
        let pages = backing.as_ref().map(|backing| Pages {
            tasks: backing.tasks.clone(),
            tools: backing.tools.clone(),
        });
        let background = backing.filter(|_| config.enable_run_in_background);
        let reservation = tools.reserve(&config.tool_name).map_err(|error| match error {
            RegistryError::DuplicateName { name } => ConfigError::DuplicateToolName { name },
            other => ConfigError::Invalid(other.to_string()),
        })?;
        let inner = Arc::new(PluginInner {
            config: Arc::new(config),
            service: service.clone(),
            background,
            pages,
            reservation,
            state: Mutex::default(),
        });
        // Subscribe first, then look: no registration can slip between the two.
        let weak = Arc::downgrade(&inner);
        // Provider events only: the tool costs runs no announcement.
        let subscription = service.subscribe_to_providers(Arc::new(move |event: &SubagentEvent| {
            let Some(inner) = weak.upgrade() else { return Ok(()) };
            match event {
                SubagentEvent::ProviderAdded(provider) if provider.name() == inner.config.provider => {
                    inner.mount(provider.clone()).map_err(|error| {
                        SubagentError::failed_with_code(error.to_string(), crate::ErrorCode::ToolMountFailed)
                    })
                }
                SubagentEvent::ProviderRemoved(name) if *name == inner.config.provider => {
                    inner.unmount();
                    Ok(())
                }
                _ => Ok(()),
            }
        }));
        match service.provider(&inner.config.provider) {
            Some(provider) => inner.mount(provider)?,
            None => tracing::info!(
                "{}",
                wording::waiting_for_provider(&inner.config.provider, &inner.config.tool_name)
            ),
        }
        Ok(Self {
            inner,
            _subscription: subscription,
        })
    }

    /// The tool name this instance holds.
    pub fn tool_name(&self) -> &str {
        &self.inner.config.tool_name
    }

    /// The configuration in force.
    pub fn config(&self) -> &SubagentToolConfig {
        &self.inner.config
    }

    /// Whether the tool is mounted (its provider is registered).
    pub fn is_mounted(&self) -> bool {
        self.inner.lock().mounted.is_some()
    }

    /// The wording of the mounted tool, if it is mounted.
    pub fn wording(&self) -> Option<Wording> {
        self.inner.lock().mounted.as_ref().map(|(_, wording)| *wording)
    }

    /// Unloads the instance now (the same as dropping it).
    pub fn dispose(self) {}
}

impl Drop for SubagentToolPlugin {
    fn drop(&mut self) {
        let mounted = {
            let mut state = self.inner.lock();
            state.disposed = true;
            state.mounted.take()
        };
        drop(mounted);
    }
}

impl std::fmt::Debug for SubagentToolPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentToolPlugin")
            .field("tool_name", &self.tool_name())
            .field("provider", &self.inner.config.provider)
            .field("mounted", &self.is_mounted())
            .finish()
    }
}

impl PluginInner {
    fn lock(&self) -> MutexGuard<'_, PluginState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mount(&self, provider: Arc<dyn SubagentProvider>) -> Result<(), ConfigError> {
        let mut state = self.lock();
        if state.disposed || state.mounted.is_some() {
            return Ok(());
        }
        if matches!(self.config.max_depth, Some(MaxDepth::Limit(_))) && !provider.capabilities().depth_limit {
            return Err(ConfigError::CannotEnforceMaxDepth {
                provider: provider.name().to_owned(),
            });
        }
        let wording = Wording::for_provider(provider.inherits_parent_context());
        // The rule (docs/contract.md, "Background tasks"): the background route is continuable iff the
        // provider can continue its children.
        let background = match self.background.clone() {
            None => BackgroundRoute::Disabled,
            Some(Backing { control, tools, .. }) if provider.continuation().is_some() => {
                BackgroundRoute::Continuable { control, tools }
            }
            Some(Backing { tasks, tools, .. }) => BackgroundRoute::OneShot { tasks, tools },
        };
        let tool = SubagentTool::new(
            self.config.clone(),
            wording,
            self.service.clone(),
            background,
            self.pages.clone(),
        );
        let mounted = self
            .reservation
            .mount(Arc::new(tool))
            .map_err(|error| ConfigError::Invalid(error.to_string()))?;
        state.mounted = Some((mounted, wording));
        Ok(())
    }

    fn unmount(&self) {
        let mounted = self.lock().mounted.take();
        drop(mounted);
    }
}
