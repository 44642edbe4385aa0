//! What is checked: a provider factory, and what the cells need around it.

use std::sync::Arc;
use std::time::Duration;

use dsh_subagent_api::{AgentRef, ChildStore, SubagentProvider};

/// What a provider says of its own children, when its author can count
/// them: the kit then checks "released exactly once" by count, beside
/// what it sees left over (tasks, processes).
pub trait Probe: Send + Sync {
    /// Releases of children so far: a child released twice counts twice.
    fn releases(&self) -> usize;
    /// Children started and not yet released.
    fn live(&self) -> usize;
}

/// One provider made by a [`Subject`]'s factory, with its probe if it has one.
pub struct Instance {
    pub(crate) provider: Arc<dyn SubagentProvider>,
    pub(crate) probe: Option<Arc<dyn Probe>>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("provider", &self.provider.name())
            .field("probe", &self.probe.is_some())
            .finish()
    }
}

impl Instance {
    /// A provider without a probe.
    pub fn new(provider: Arc<dyn SubagentProvider>) -> Self {
        Self { provider, probe: None }
    }

    /// Counts this provider's releases and live children with `probe`.
    #[must_use]
    pub fn probe(mut self, probe: Arc<dyn Probe>) -> Self {
        self.probe = Some(probe);
        self
    }
}

impl<P: SubagentProvider> From<Arc<P>> for Instance {
    fn from(provider: Arc<P>) -> Self {
        Self::new(provider)
    }
}

impl From<Arc<dyn SubagentProvider>> for Instance {
    fn from(provider: Arc<dyn SubagentProvider>) -> Self {
        Self::new(provider)
    }
}

type Factory<T> = Arc<dyn Fn() -> T + Send + Sync>;

/// The deadlines and sizes of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// How long one stage (a start, a result, a release) may take.
    pub(crate) stage: Duration,
    /// How long a run may take to settle `aborted` once cancelled.
    pub(crate) cancel: Duration,
    /// How many starts the concurrency cell makes at once.
    pub(crate) concurrent: usize,
}

/// The default deadline of one stage: 5 s.
pub const STAGE_DEADLINE: Duration = Duration::from_secs(5);

/// The default deadline for a cancelled run to settle: the release grace
/// of the `subagent` tool (5 s), after which a cancelled call is abandoned.
pub const CANCEL_DEADLINE: Duration = dsh_subagent::RELEASE_GRACE;

/// The default number of concurrent starts.
pub const CONCURRENT_STARTS: usize = 100;

/// A provider to check: a factory that makes it afresh for every cell,
/// the parent its children are started for, and, for a continuable
/// provider, the store its children are found in again.
///
/// ```
/// use dsh_subagent_api::Capabilities;
/// use dsh_subagent_conformance::Subject;
/// use dsh_subagent_testing::ScriptedProvider;
///
/// // Claims no capability, so the kit checks that the service refuses each.
/// let make = || ScriptedProvider::builder("scripted").capabilities(Capabilities::NONE).build();
/// let report = Subject::new("scripted", make).check();
/// assert!(report.passed(), "{report}");
/// ```
#[must_use]
#[derive(Clone)]
pub struct Subject {
    pub(crate) name: String,
    pub(crate) factory: Factory<Instance>,
    pub(crate) parent: Factory<AgentRef>,
    pub(crate) store: Option<Factory<Arc<dyn ChildStore>>>,
    pub(crate) limits: Limits,
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject")
            .field("name", &self.name)
            .field("store", &self.store.is_some())
            .field("limits", &self.limits)
            .finish()
    }
}

impl Subject {
    /// A subject named `name` (for the report) whose provider `factory`
    /// makes. The factory is called inside each cell's runtime, once per
    /// cell (twice for the continuation cell); a panic in it is a finding.
    pub fn new<F, I>(name: impl Into<String>, factory: F) -> Self
    where
        F: Fn() -> I + Send + Sync + 'static,
        I: Into<Instance>,
    {
        Self {
            name: name.into(),
            factory: Arc::new(move || factory().into()),
            parent: Arc::new(|| AgentRef::new("conformance-parent")),
            store: None,
            limits: Limits {
                stage: STAGE_DEADLINE,
                cancel: CANCEL_DEADLINE,
                concurrent: CONCURRENT_STARTS,
            },
        }
    }

    /// The parent the children are started for (default: a top-level agent
    /// `conformance-parent` with no handle). An in-process provider that
    /// reaches its parent's runtime gets one here; the same id every call,
    /// since a continued child must find its parent again.
    pub fn parent(mut self, parent: impl Fn() -> AgentRef + Send + Sync + 'static) -> Self {
        self.parent = Arc::new(parent);
        self
    }

    /// The store a continuable provider's children are found in, made
    /// afresh with the provider (it must find what the last one stored).
    pub fn store(mut self, store: impl Fn() -> Arc<dyn ChildStore> + Send + Sync + 'static) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// How long one stage may take before the cell fails (default
    /// [`STAGE_DEADLINE`]).
    pub fn stage_deadline(mut self, deadline: Duration) -> Self {
        self.limits.stage = deadline;
        self
    }

    /// How long a cancelled run may take to settle (default [`CANCEL_DEADLINE`]).
    pub fn cancel_deadline(mut self, deadline: Duration) -> Self {
        self.limits.cancel = deadline;
        self
    }

    /// How many starts the concurrency cell makes at once (default
    /// [`CONCURRENT_STARTS`], at least 2).
    pub fn concurrent_starts(mut self, starts: usize) -> Self {
        self.limits.concurrent = starts.max(2);
        self
    }
}
