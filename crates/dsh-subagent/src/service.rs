//! The subagent service: the provider registry and checked starts.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use dsh_subagent_api::{
    AgentRef, Capability, RunMode, SpanOrigin, StartRequest, SubagentError, SubagentProvider, SubagentRun, child_depth,
};
use dsh_tasks::{TaskRegistry, TextStore};
use futures::future::Either;

use crate::admission::{Admission, Caller, DelegationTree, Demand, Reservation, wait};
use crate::events::{Events, Hears, Listener, RunStart, SubagentEvent, Subscription, task_preview};
use crate::task::{self, TaskStartError};
use crate::{Limits, trace};

struct ProviderEntry {
    id: u64,
    provider: Arc<dyn SubagentProvider>,
}

/// The registered providers, in registration order.
#[derive(Default)]
struct Providers {
    entries: Vec<ProviderEntry>,
    next_id: u64,
}

#[derive(Default)]
pub(crate) struct Inner {
    providers: Mutex<Providers>,
    /// Who hears the service's events, and the numbering of its runs.
    pub(crate) events: Arc<Events>,
    /// The limits of the service's trees, and its default tree.
    admission: Admission,
}

impl Inner {
    fn providers(&self) -> MutexGuard<'_, Providers> {
        self.providers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remove_provider(&self, id: u64) -> Option<Arc<dyn SubagentProvider>> {
        let mut providers = self.providers();
        let index = providers.entries.iter().position(|entry| entry.id == id)?;
        Some(providers.entries.remove(index).provider)
    }
}

/// The subagent service: registered providers and checked starts.
///
/// Cheap to clone; clones share state. Providers are registered with
/// [`SubagentService::register_provider`] and leave when the returned handle
/// drops. Subscribers ([`SubagentService::subscribe`]) hear every change, and
/// a subscriber that subscribes first and then looks ([`SubagentService::provider`])
/// cannot miss a provider.
#[derive(Clone, Default)]
pub struct SubagentService {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for SubagentService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentService")
            .field("providers", &self.list())
            .field("limits", &self.inner.admission.limits())
            .finish()
    }
}

impl SubagentService {
    /// A service with no providers and no limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A service whose delegation trees are bounded by `limits`.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            inner: Arc::new(Inner {
                admission: Admission::new(limits),
                ..Inner::default()
            }),
        }
    }

    /// The limits of this service's trees.
    pub fn limits(&self) -> Limits {
        self.inner.admission.limits()
    }

    /// Opens a new delegation tree under this service's limits. A harness
    /// opens one per top-level agent (one per session of a server) and
    /// gives its [`DelegationTree::lineage`] to that agent. An agent whose
    /// reference carries no tree shares the service's default tree with
    /// every other such agent.
    pub fn open_tree(&self) -> DelegationTree {
        self.inner.admission.open_tree()
    }

    /// The store of `agent`'s kept outputs (its background results and its
    /// cut foreground results): the service's own when its limits set one
    /// ([`Limits::with_kept_output`]), else the process's
    /// ([`dsh_tasks::TextStore::process`]), so that every tree of a process
    /// counts against one hard bound. An agent of another service's tree
    /// keeps them in that service's store.
    pub fn texts(&self, agent: &AgentRef) -> TextStore {
        self.inner.admission.texts(agent)
    }

    /// Registers a provider under its name and announces it.
    ///
    /// Fails with `DUPLICATE_PROVIDER` when the name is taken, and with
    /// `UNSUPPORTED_CAPABILITY` (`tokenBudget`) when the limits set a tree
    /// token or cost budget and the provider lacks that capability: its children
    /// report no usage, so what they spend would never be counted and the
    /// budget never enforced. A harness refuses such a provider when it is
    /// built; this refuses one registered later the same way. When a
    /// [`SubagentEvent::ProviderAdded`] listener fails, the registration is
    /// rolled back (a removal is announced) and its error returned.
    pub fn register_provider(
        &self,
        provider: Arc<dyn SubagentProvider>,
    ) -> Result<ProviderRegistration, SubagentError> {
        let name = provider.name().to_owned();
        let budgeted = self.limits().token_limit().is_some() || self.limits().cost_limit().is_some();
        if budgeted && !provider.capabilities().supports(Capability::TokenBudget) {
            return Err(SubagentError::UnsupportedCapability {
                provider: name,
                capability: Capability::TokenBudget,
            });
        }
        let id = {
            let mut providers = self.inner.providers();
            if providers.entries.iter().any(|entry| entry.provider.name() == name) {
                return Err(SubagentError::DuplicateProvider { name });
            }
            providers.next_id += 1;
            let id = providers.next_id;
            providers.entries.push(ProviderEntry {
                id,
                provider: provider.clone(),
            });
            id
        };
        if let Err(error) = self.inner.events.dispatch(&SubagentEvent::ProviderAdded(provider)) {
            if self.inner.remove_provider(id).is_some() {
                self.inner.events.notify(&SubagentEvent::ProviderRemoved(name));
            }
            return Err(error);
        }
        Ok(ProviderRegistration {
            service: Arc::downgrade(&self.inner),
            id,
            name,
        })
    }

    /// The provider registered under `name`.
    pub fn provider(&self, name: &str) -> Option<Arc<dyn SubagentProvider>> {
        self.inner
            .providers()
            .entries
            .iter()
            .find(|entry| entry.provider.name() == name)
            .map(|entry| entry.provider.clone())
    }

    /// The registered provider names, in registration order.
    pub fn list(&self) -> Vec<String> {
        self.inner
            .providers()
            .entries
            .iter()
            .map(|entry| entry.provider.name().to_owned())
            .collect()
    }

    /// Subscribes to every later event; dropping the handle unsubscribes.
    ///
    /// Runs are announced ([`SubagentEvent::RunStarted`], then
    /// [`SubagentEvent::RunEnded`]) only when some subscriber hears run
    /// events as the run starts: a run started while none does is never
    /// announced, so no subscriber sees a run end it did not see start.
    pub fn subscribe(&self, listener: Listener) -> Subscription {
        self.inner.events.subscribe(listener, Hears::Everything)
    }

    /// Subscribes to provider events only ([`SubagentEvent::ProviderAdded`],
    /// [`SubagentEvent::ProviderRemoved`]); dropping the handle unsubscribes.
    ///
    /// Such a subscriber costs runs nothing: while every subscriber is of
    /// this kind, starts announce nothing and settle without an observer.
    pub fn subscribe_to_providers(&self, listener: Listener) -> Subscription {
        self.inner.events.subscribe(listener, Hears::Providers)
    }

    /// Cancels the announced run whose handle id is `id` (a run in flight
    /// that [`SubagentEvent::RunStarted`] named), as if the call that
    /// started it had been cancelled: its start's token fires, so the run
    /// ends `aborted`, its caller reads a cancelled run, and every
    /// descendant of it (whose tokens derive from it) is cancelled with it;
    /// its caller and its siblings go on. A continuable child's activation
    /// is stopped by killing its task instead. Returns whether a run was
    /// found: a run not announced (nobody heard run events when it
    /// started), already settled, or unknown is not.
    pub fn cancel_run(&self, id: &str) -> bool {
        self.inner.events.running.cancel(id)
    }

    /// Starts a child on the named provider.
    ///
    /// Checks, in this order, before the provider is called: the provider
    /// exists (`NO_PROVIDER`); it supports every optional field the request
    /// sets, in the order `outputSchema`, `depthLimit`, `toolFilter`,
    /// `persona`, `tokenBudget` (`UNSUPPORTED_CAPABILITY`); `max_depth` is a
    /// safe integer and `output_schema` object-rooted; the child's depth
    /// (parent depth + 1) is within `max_depth`. Then the child passes its
    /// tree's gate (see [`SubagentService::with_limits`]): a spent budget
    /// (`TOKEN_BUDGET_SPENT`), the tree at `max_children` (`CHILD_LIMIT`) or
    /// a full queue (`QUEUE_FULL`) refuse it at once; past `max_concurrent`
    /// it waits for a slot, and a cancellation while it waits fails the
    /// start with `subagent run was cancelled`. The provider gets the
    /// request with the child's [`StartRequest::lineage`] set.
    ///
    /// A start that fails announces nothing but its wait; a published run is
    /// announced with [`SubagentEvent::RunStarted`], and its settled result
    /// with [`SubagentEvent::RunEnded`], when a subscriber hears run events
    /// ([`SubagentService::subscribe`]).
    ///
    /// The checks and the reservation of a slot are made when `start` is
    /// called, so calls take their places in the queue in the order they
    /// were made; the returned future waits and starts.
    pub fn start<'a>(
        &'a self,
        provider_name: &'a str,
        request: StartRequest,
    ) -> impl Future<Output = Result<SubagentRun, SubagentError>> + Send + 'a {
        let checked = self.checked_provider(provider_name, &request).and_then(|provider| {
            let reservation = self.reserve(&request.parent, Demand::new_child(&request))?;
            Ok((provider, reservation))
        });
        match checked {
            Ok((provider, reservation)) => {
                Either::Left(self.start_reserved(provider_name, provider, reservation, request))
            }
            Err(error) => Either::Right(std::future::ready(Err(error))),
        }
    }

    /// [`SubagentService::start`] after its checks and its reservation:
    /// waits for the slot when it has to, gives the request the child's
    /// lineage, starts the child and announces it. Only what a wait needs
    /// lives across it, so a waiting call stays small.
    ///
    /// A plain function returning an `async` block, not an `async fn`: the
    /// block holds its captures once, where an `async fn` would hold its
    /// arguments twice (as arguments and as the locals they are bound to).
    #[expect(
        clippy::manual_async_fn,
        reason = "an async block holds its captures once; an async fn would hold its arguments twice"
    )]
    pub(crate) fn start_reserved<'a>(
        &'a self,
        provider_name: &'a str,
        provider: Arc<dyn SubagentProvider>,
        mut reservation: Reservation,
        mut request: StartRequest,
    ) -> impl Future<Output = Result<SubagentRun, SubagentError>> + Send + 'a {
        async move {
            let depth = request.parent.depth().saturating_add(1);
            let waited = match reservation.queued() {
                None => None,
                Some(queued) => {
                    let asked = std::time::Instant::now();
                    // Announced as the wait is made: the caller's details
                    // are not held while the call waits.
                    let waiting = wait(
                        queued,
                        &request.cancel,
                        &Caller {
                            provider: provider_name,
                            parent: request.parent.id(),
                            depth,
                            label: request.label.as_deref(),
                        },
                        &self.inner.events,
                    );
                    let waited = waiting.await?;
                    request.provenance_mut().queued = asked.elapsed();
                    Some(waited)
                }
            };
            // From the wait to `provider.start` nothing awaits: the wait's
            // last look at the token holds (a withdrawn call starts nothing).
            let (admitted, lineage, stop) = reservation.admitted(waited, &request.cancel);
            request.lineage = lineage;
            if let Some(stop) = stop {
                request.cancel = stop;
            }
            // A tool names its provider in the provenance it shares between
            // its calls: copied only when another is asked.
            if request.provenance().provider.as_deref() != Some(provider_name) {
                request.provenance_mut().provider = Some(provider_name.to_owned());
            }
            // Announced only when someone hears run events; otherwise the
            // run carries no observer.
            let announced = self.inner.events.announces_runs().then(|| RunStart {
                parent: request.parent.id().clone(),
                depth,
                label: request.label.clone(),
                task: task_preview(&request.prompt),
                mode: request.mode,
                cancel: Some(request.cancel.clone()),
            });
            let run = provider.start(request).await?;
            let run = match announced {
                Some(start) => self.inner.events.announce(provider_name, start, run, admitted.run_id).0,
                None => run,
            };
            Ok(admitted.bind(run))
        }
    }

    /// Starts `request` on the provider `provider_name` as a background task
    /// of the request's parent on `tasks`, labelled `label`, and returns the
    /// task's id (`subagent-<n>`) at once.
    ///
    /// The task runs in a `subagent.task` span of its own (placed by the
    /// request's origin); the child's span and the run's lifecycle
    /// events sit under it, and the span records the task's id. The task's
    /// kill token replaces the request's, so killing the task, not
    /// cancelling the call that asked for it, stops the child. The start is
    /// [`SubagentService::start`], checks included: a failing check fails
    /// the task. The task settles the run ([`settle`](crate::settle)) and
    /// ends with its outcome:
    ///
    /// - `completed` → completed with the child's text; `aborted` (what a
    ///   kill reads) → killed; any other stop reason → failed with the
    ///   reason (and `; diagnostic: …`; partial output is not included); a
    ///   rejected result → failed with the error.
    /// - A failed release is appended (`…; dispose failed: …`) and turns a
    ///   completed or killed task into a failed one: the release happened
    ///   before the outcome is reported.
    /// - A failed start → killed when the task was killed and the provider
    ///   rolled back cleanly; otherwise failed with the error (a failed
    ///   rollback stays failed after a kill, its detail carrying both).
    ///
    /// Refused, with nothing started, when the registry refuses the task (an
    /// empty label, a disposed owner), or when the child's delegation tree
    /// refuses it (a spent budget, `max_children`, a full queue). Past
    /// `max_concurrent` the call still returns at once; the task waits for
    /// the slot, in call order.
    pub fn start_as_task(
        &self,
        tasks: &TaskRegistry,
        provider_name: &str,
        label: String,
        request: StartRequest,
    ) -> Result<String, TaskStartError> {
        let mut request = request;
        request.mode = RunMode::Background;
        let reservation = self.reserve(&request.parent, Demand::new_child(&request))?;
        let owner = request.parent.id().clone();
        let span = trace::task_span(&request.origin);
        let service = self.clone();
        let provider = provider_name.to_owned();
        request.origin = SpanOrigin::ChildOf(span.clone());
        let spec = task::spec(label, owner, self.texts(&request.parent));
        let task_id = task::spawn(tasks, spec, span, move |control| async move {
            request.provenance_mut().task_id = Some(control.id().to_owned());
            let start = |cancel| async {
                request.cancel = cancel;
                let checked = service.checked_provider(&provider, &request)?;
                service.start_reserved(&provider, checked, reservation, request).await
            };
            task::run(control, &provider, start).await
        })?;
        Ok(task_id)
    }

    /// The synchronous half of admission ([`Admission::reserve`]).
    pub(crate) fn reserve(&self, parent: &AgentRef, demand: Demand) -> Result<Reservation, SubagentError> {
        self.inner.admission.reserve(parent, demand)
    }

    /// The admission of a start that runs nothing ([`Admission::pass`]).
    pub(crate) fn pass(&self, parent: &AgentRef) -> Reservation {
        self.inner.admission.pass(parent)
    }

    /// The service's events: who hears them, and the numbering of its runs.
    pub(crate) fn events(&self) -> &Arc<Events> {
        &self.inner.events
    }

    /// The start checks, in order: the provider exists, it supports every
    /// optional field the request sets, `max_depth` and `output_schema` are
    /// valid, and the child's depth is within the cap. Shared by one-shot
    /// starts and continuable ones, so both refuse alike.
    pub(crate) fn checked_provider(
        &self,
        provider_name: &str,
        request: &StartRequest,
    ) -> Result<Arc<dyn SubagentProvider>, SubagentError> {
        let provider = self.provider(provider_name).ok_or_else(|| SubagentError::NoProvider {
            name: provider_name.to_owned(),
        })?;
        let capabilities = provider.capabilities();
        if let Some(missing) = request.required_capabilities().find(|&c| !capabilities.supports(c)) {
            return Err(SubagentError::UnsupportedCapability {
                provider: provider_name.to_owned(),
                capability: missing,
            });
        }
        request.validate()?;
        let max_depth = request.settings().max_depth;
        if max_depth.is_some() {
            child_depth(request.parent.depth(), max_depth)?;
        }
        Ok(provider)
    }
}

/// A registered provider. Dropping it (or [`ProviderRegistration::dispose`])
/// unregisters the provider and announces the removal. Runs already returned
/// keep running.
#[must_use = "dropping the registration unregisters the provider at once"]
pub struct ProviderRegistration {
    service: Weak<Inner>,
    id: u64,
    name: String,
}

impl ProviderRegistration {
    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Unregisters the provider now (the same as dropping the handle).
    pub fn dispose(self) {}
}

impl Drop for ProviderRegistration {
    fn drop(&mut self) {
        if let Some(inner) = self.service.upgrade()
            && inner.remove_provider(self.id).is_some()
        {
            inner
                .events
                .notify(&SubagentEvent::ProviderRemoved(std::mem::take(&mut self.name)));
        }
    }
}

impl std::fmt::Debug for ProviderRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistration")
            .field("name", &self.name)
            .finish()
    }
}
