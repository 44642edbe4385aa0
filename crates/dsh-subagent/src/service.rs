//! The subagent service: the provider registry and checked starts.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use dsh_subagent_api::{
    AgentId, StartRequest, StopReason, SubagentError, SubagentProvider, SubagentRun, child_depth, concat_text,
};
use dsh_tools::panic_message;

use futures::future::Either;

use crate::admission::{Caller, Demand, Reservation};
use crate::events::{Listener, RunEndInfo, RunInfo, SubagentEvent};
use crate::gate::Node;
use crate::{Limits, wording};

struct ProviderEntry {
    id: u64,
    provider: Arc<dyn SubagentProvider>,
}

#[derive(Default)]
struct State {
    providers: Vec<ProviderEntry>,
    /// Copy-on-write: an event clones the `Arc`, not the list.
    listeners: Arc<Vec<Subscriber>>,
    next_id: u64,
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// One listener and whether it hears run events.
#[derive(Clone)]
struct Subscriber {
    id: u64,
    listener: Listener,
    runs: bool,
}

impl Subscriber {
    fn hears(&self, event: &SubagentEvent) -> bool {
        self.runs || !event.is_run_event()
    }
}

#[derive(Default)]
pub(crate) struct Inner {
    state: Mutex<State>,
    /// The limits of every tree of this service.
    pub(crate) limits: Limits,
    /// The tree of agents that carry none of their own (see `open_tree`).
    pub(crate) default_tree: OnceLock<Arc<Node>>,
    next_run: AtomicU64,
    /// Subscribers that hear run events; with none, runs are not announced
    /// and carry no observer.
    run_listeners: AtomicUsize,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A snapshot of the listeners, taken without copying the list.
    fn listeners(&self) -> Arc<Vec<Subscriber>> {
        self.lock().listeners.clone()
    }

    /// Calls every listener; the first failure (error or panic) is returned.
    fn dispatch(&self, event: &SubagentEvent) -> Result<(), SubagentError> {
        for Subscriber { listener, .. } in self.listeners().iter().filter(|s| s.hears(event)) {
            match catch_unwind(AssertUnwindSafe(|| listener(event))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(panic) => {
                    return Err(SubagentError::failed(wording::listener_panicked(
                        event.name(),
                        &panic_message(&*panic),
                    )));
                }
            }
        }
        Ok(())
    }

    /// Calls every listener; failures are logged, never propagated.
    fn notify(&self, event: &SubagentEvent) {
        for Subscriber { listener, .. } in self.listeners().iter().filter(|s| s.hears(event)) {
            match catch_unwind(AssertUnwindSafe(|| listener(event))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!("{}", wording::listener_threw(event.name(), &error)),
                Err(panic) => {
                    tracing::warn!("{}", wording::listener_threw(event.name(), panic_message(&*panic)))
                }
            }
        }
    }

    fn remove_provider(&self, id: u64) -> Option<Arc<dyn SubagentProvider>> {
        let mut state = self.lock();
        let index = state.providers.iter().position(|entry| entry.id == id)?;
        Some(state.providers.remove(index).provider)
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
            .field("limits", &self.inner.limits)
            .finish()
    }
}

impl SubagentService {
    /// A service with no providers and no limits.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn build(limits: Limits) -> Self {
        Self {
            inner: Arc::new(Inner {
                limits,
                ..Inner::default()
            }),
        }
    }

    /// Notifies every subscriber; failures are logged.
    pub(crate) fn notify(&self, event: &SubagentEvent) {
        self.inner.notify(event);
    }

    /// A fresh run id for an announcement.
    pub(crate) fn next_run_id(&self) -> u64 {
        self.inner.next_run.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers a provider under its name and announces it.
    ///
    /// Fails with `DUPLICATE_PROVIDER` when the name is taken. When a
    /// [`SubagentEvent::ProviderAdded`] listener fails, the registration is
    /// rolled back (a removal is announced) and its error returned.
    pub fn register_provider(
        &self,
        provider: Arc<dyn SubagentProvider>,
    ) -> Result<ProviderRegistration, SubagentError> {
        let name = provider.name().to_owned();
        let id = {
            let mut state = self.inner.lock();
            if state.providers.iter().any(|entry| entry.provider.name() == name) {
                return Err(SubagentError::DuplicateProvider { name });
            }
            let id = state.next_id();
            state.providers.push(ProviderEntry {
                id,
                provider: provider.clone(),
            });
            id
        };
        if let Err(error) = self.inner.dispatch(&SubagentEvent::ProviderAdded(provider)) {
            if self.inner.remove_provider(id).is_some() {
                self.inner.notify(&SubagentEvent::ProviderRemoved(name));
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
        let state = self.inner.lock();
        state
            .providers
            .iter()
            .find(|entry| entry.provider.name() == name)
            .map(|entry| entry.provider.clone())
    }

    /// The registered provider names, in registration order.
    pub fn list(&self) -> Vec<String> {
        let state = self.inner.lock();
        state
            .providers
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
        self.add_subscriber(listener, true)
    }

    /// Subscribes to provider events only ([`SubagentEvent::ProviderAdded`],
    /// [`SubagentEvent::ProviderRemoved`]); dropping the handle unsubscribes.
    ///
    /// Such a subscriber costs runs nothing: while every subscriber is of
    /// this kind, starts announce nothing and settle without an observer.
    pub fn subscribe_to_providers(&self, listener: Listener) -> Subscription {
        self.add_subscriber(listener, false)
    }

    fn add_subscriber(&self, listener: Listener, runs: bool) -> Subscription {
        let mut state = self.inner.lock();
        let id = state.next_id();
        Arc::make_mut(&mut state.listeners).push(Subscriber { id, listener, runs });
        if runs {
            self.inner.run_listeners.fetch_add(1, Ordering::SeqCst);
        }
        Subscription {
            service: Arc::downgrade(&self.inner),
            id,
        }
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
            let waited = match reservation.take_queued() {
                None => None,
                Some(queued) => {
                    let caller = Caller {
                        provider: provider_name,
                        parent: request.parent.id(),
                        depth,
                        label: request.label.as_deref(),
                    };
                    Some(self.wait(queued, &request.cancel, &caller).await?)
                }
            };
            // From the wait to `provider.start` nothing awaits: the wait's
            // last look at the token holds (a withdrawn call starts nothing).
            let (admission, lineage, stop) = reservation.admission(waited, &request.cancel);
            request.lineage = lineage;
            if let Some(stop) = stop {
                request.cancel = stop;
            }
            // Announced only when someone hears run events; otherwise the
            // run carries no observer.
            let announced = self
                .announces_runs()
                .then(|| (request.parent.id().clone(), request.label.clone()));
            let run = provider.start(request).await?;
            let run = match announced {
                Some((parent, label)) => {
                    self.announce(provider_name, parent, depth, label, run, admission.run_id)
                        .0
                }
                None => run,
            };
            Ok(admission.bind(run))
        }
    }

    /// Whether some subscriber hears run events now.
    pub(crate) fn announces_runs(&self) -> bool {
        self.inner.run_listeners.load(Ordering::SeqCst) > 0
    }

    /// Announces a run published outside [`SubagentService::start`] (a
    /// continuable child's activation) exactly as `start` announces its own:
    /// [`SubagentEvent::RunStarted`] now, [`SubagentEvent::RunEnded`] when
    /// its result settles. Returns the run and its announced
    /// [`RunInfo::run_id`], or the run unchanged and `None` when nobody
    /// hears run events. `depth` is the child's (its parent's plus one);
    /// `run_id` is the id its wait in its tree's queue was announced with, if it waited.
    pub(crate) fn announce(
        &self,
        provider_name: &str,
        parent: AgentId,
        depth: u64,
        label: Option<String>,
        run: SubagentRun,
        run_id: Option<u64>,
    ) -> (SubagentRun, Option<u64>) {
        if !self.announces_runs() {
            return (run, None);
        }
        let run_id = run_id.unwrap_or_else(|| self.next_run_id());
        let info = RunInfo {
            run_id,
            provider: provider_name.to_owned(),
            id: run.id().to_owned(),
            parent,
            depth,
            label,
        };
        // Announce first, then move the same info into the settlement
        // observer: no copy. Nobody can poll the result before we return it.
        let started = SubagentEvent::RunStarted(info);
        self.inner.notify(&started);
        let SubagentEvent::RunStarted(end_info) = started else {
            return (run, Some(run_id));
        };
        let observer = Arc::downgrade(&self.inner);
        let run = run.map_result(move |result| async move {
            let outcome = result.await;
            if let Some(inner) = observer.upgrade() {
                let (stop_reason, text) = match &outcome {
                    Ok(result) => (result.stop_reason.clone(), concat_text(&result.output)),
                    Err(_) => (StopReason::Error, String::new()),
                };
                inner.notify(&SubagentEvent::RunEnded(RunEndInfo {
                    run: end_info,
                    stop_reason,
                    last_assistant_message: (!text.is_empty()).then_some(text),
                }));
            }
            outcome
        });
        (run, Some(run_id))
    }
}

impl SubagentService {
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
        if request.max_depth.is_some() {
            child_depth(request.parent.depth(), request.max_depth)?;
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
            inner.notify(&SubagentEvent::ProviderRemoved(std::mem::take(&mut self.name)));
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

/// A subscription to service events. Dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct Subscription {
    service: Weak<Inner>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(inner) = self.service.upgrade() {
            let removed = {
                let mut state = inner.lock();
                let listeners = Arc::make_mut(&mut state.listeners);
                listeners
                    .iter()
                    .position(|subscriber| subscriber.id == self.id)
                    .map(|index| listeners.remove(index))
            };
            if removed.as_ref().is_some_and(|subscriber| subscriber.runs) {
                inner.run_listeners.fetch_sub(1, Ordering::SeqCst);
            }
            drop(removed);
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}
