//! One cell: a thread and a runtime of its own, a fresh provider
//! registered with a fresh service, a deadline on every stage, and a look
//! at what is left once the cell is over. Nothing outlives a cell: its
//! runtime is shut down (every task it still had is dropped) and every
//! process it left is killed, after the leftovers are reported.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_subagent::{ProviderRegistration, SubagentService};
use dsh_subagent_api::{AgentRef, CancellationToken, StartRequest, SubagentError, SubagentRun};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::observed::Observed;
use crate::processes::Processes;
use crate::subject::{Limits, Probe};
use crate::{Finding, Status, Subject, Tier, wording};

/// How long a cell waits for what a release leaves to end by itself
/// (a task collecting a killed process, say) before it reports it.
const LEFTOVER_GRACE: Duration = Duration::from_secs(2);

/// The prompt of every delegation the kit makes (its marker tells a
/// scripted child's answers apart).
pub const PROMPT: &str = "conformance: answer in one short line";

/// How a cell ended.
#[derive(Debug)]
pub(crate) enum Seen {
    /// The requirement did not hold: what was seen.
    Fail(String),
    /// The requirement does not apply: why.
    Skip(String),
}

impl From<String> for Seen {
    fn from(seen: String) -> Self {
        Self::Fail(seen)
    }
}

/// A cell's outcome: passed (with a note on how), or what was seen.
pub(crate) type Checked = Result<Option<String>, Seen>;

/// One requirement and the body that checks it.
pub(crate) struct Cell {
    pub(crate) id: &'static str,
    pub(crate) tier: Tier,
    pub(crate) body: for<'a> fn(&'a Env) -> BoxFuture<'a, Checked>,
}

/// What a cell's body works with.
pub(crate) struct Env {
    pub(crate) service: SubagentService,
    pub(crate) provider: Arc<Observed>,
    pub(crate) probe: Option<Arc<dyn Probe>>,
    pub(crate) parent: AgentRef,
    pub(crate) limits: Limits,
    pub(crate) processes: Processes,
    pub(crate) subject: Remake,
    /// Tasks alive on the cell's runtime once the provider was made.
    tasks: usize,
    _registration: ProviderRegistration,
}

/// What the continuation cell needs to make the provider again.
pub(crate) struct Remake {
    pub(crate) factory: Arc<dyn Fn() -> crate::Instance + Send + Sync>,
    pub(crate) parent: Arc<dyn Fn() -> AgentRef + Send + Sync>,
    pub(crate) store: Option<Arc<dyn Fn() -> Arc<dyn dsh_subagent_api::ChildStore> + Send + Sync>>,
}

impl Env {
    /// Makes the subject's provider and registers it; a panic in the
    /// factory, or a refused registration, is what was seen.
    fn make(subject: &Subject) -> Result<Self, String> {
        let made = AssertUnwindSafe(|| ((subject.factory)(), (subject.parent)()));
        let (instance, parent) =
            std::panic::catch_unwind(made).map_err(|panic| wording::factory_panicked(&panic_text(&*panic)))?;
        let provider = Arc::new(Observed::new(instance.provider));
        let service = SubagentService::new();
        let registration = service
            .register_provider(provider.clone())
            .map_err(|error| wording::not_registered(&error))?;
        Ok(Self {
            service,
            provider,
            probe: instance.probe,
            parent,
            limits: subject.limits,
            processes: Processes::start(),
            tasks: 0,
            subject: Remake {
                factory: subject.factory.clone(),
                parent: subject.parent.clone(),
                store: subject.store.clone(),
            },
            _registration: registration,
        })
    }

    /// The provider's registered name.
    pub(crate) fn name(&self) -> String {
        dsh_subagent_api::SubagentProvider::name(&*self.provider).to_owned()
    }

    /// A request of the kit's prompt for the cell's parent, and its token.
    pub(crate) fn request(&self) -> (StartRequest, CancellationToken) {
        let cancel = CancellationToken::new();
        let mut request = StartRequest::text(PROMPT, self.parent.clone(), cancel.clone());
        request.label = Some("conformance".to_owned());
        (request, cancel)
    }

    /// Starts `request` through the service, within the stage deadline.
    pub(crate) async fn start(&self, request: StartRequest) -> Result<Result<SubagentRun, SubagentError>, String> {
        let name = self.name();
        let started = stage(
            wording::STAGE_START,
            self.limits.stage,
            self.service.start(&name, request),
        )
        .await?;
        if started.is_ok() {
            self.processes.sample();
        }
        Ok(started)
    }

    /// Starts a plain delegation that must publish.
    pub(crate) async fn published(&self) -> Result<(SubagentRun, CancellationToken), String> {
        let (request, cancel) = self.request();
        match self.start(request).await? {
            Ok(run) => Ok((run, cancel)),
            Err(error) => Err(wording::start_refused(&error)),
        }
    }

    /// Releases `run` within the stage deadline; a failed release is what was seen.
    pub(crate) async fn dispose(&self, run: &mut SubagentRun) -> Result<(), String> {
        stage(wording::STAGE_DISPOSE, self.limits.stage, run.dispose())
            .await?
            .map_err(|error| wording::release_failed(&error))
    }

    /// Waits up to `bound` until the runtime runs no more tasks than when
    /// the provider was made; whether it came back.
    pub(crate) async fn tasks_back(&self, bound: Duration) -> bool {
        let since = Instant::now();
        while alive_tasks() > self.tasks {
            if since.elapsed() >= bound {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// The provider's releases so far, when it has a probe.
    pub(crate) fn releases(&self) -> Option<usize> {
        self.probe.as_ref().map(|probe| probe.releases())
    }

    /// What is left once the cell is over: live children by the probe's
    /// count, a release count other than one per published run, tasks
    /// beyond those the cell started with, processes. Waits up to
    /// [`LEFTOVER_GRACE`] for them to end by themselves.
    async fn leftovers(&self, releases: Option<usize>) -> Vec<String> {
        let (alive, tasks) = (alive_tasks, self.tasks);
        let live = || self.probe.as_ref().map_or(0, |probe| probe.live());
        let since = Instant::now();
        while since.elapsed() < LEFTOVER_GRACE
            && (alive() > tasks || live() > 0 || !self.processes.remaining().is_empty())
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut left = Vec::new();
        if let (Some(before), Some(after)) = (releases, self.releases()) {
            let published = self.provider.published();
            if after - before != published {
                left.push(wording::release_count(after - before, published));
            }
        }
        if live() > 0 {
            left.push(wording::probe_live(live()));
        }
        if alive() > tasks {
            left.push(wording::tasks_left(alive() - tasks, LEFTOVER_GRACE));
        }
        for (pid, name) in self.processes.remaining() {
            left.push(wording::process_left(pid, &name, LEFTOVER_GRACE));
        }
        self.processes.kill_remaining();
        left
    }
}

/// Tasks alive on the current runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// Awaits `future` within `deadline`; a panic or a timeout is what was seen.
pub(crate) async fn stage<T>(name: &str, deadline: Duration, future: impl Future<Output = T>) -> Result<T, String> {
    match tokio::time::timeout(deadline, AssertUnwindSafe(future).catch_unwind()).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => Err(wording::stage_panicked(name, &panic_text(&*panic))),
        Err(_) => Err(wording::stage_timed_out(name, deadline)),
    }
}

/// A panic's message.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| wording::PANIC_WITHOUT_MESSAGE.to_owned())
}

/// Runs one cell on a thread and runtime of its own, and reports it.
pub(crate) fn run(subject: &Subject, cell: &Cell) -> Finding {
    let began = Instant::now();
    let title = wording::title(cell.id);
    let (status, detail) = match on_own_thread(subject, cell) {
        Ok(note) => (Status::Pass, note),
        Err(Seen::Fail(seen)) => (Status::Fail, Some(seen)),
        Err(Seen::Skip(why)) => (Status::Skipped, Some(why)),
    };
    let finding = Finding::new(cell.id, cell.tier, status, title).with_elapsed(began.elapsed());
    match detail {
        Some(detail) => finding.with_detail(detail),
        None => finding,
    }
}

/// The bound on a whole cell, past every deadline its body keeps: a cell
/// still running then has a thread blocked by the provider.
fn cell_bound(limits: &Limits) -> Duration {
    limits.stage * 4 + limits.cancel * 2 + LEFTOVER_GRACE * 2 + Duration::from_secs(5)
}

fn on_own_thread(subject: &Subject, cell: &Cell) -> Checked {
    let (tx, rx) = std::sync::mpsc::channel();
    let (body, owned) = (cell.body, subject.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("conformance {}", cell.id))
        .spawn(move || {
            let _ = tx.send(in_runtime(&owned, body));
        });
    let thread = spawned.map_err(|error| Seen::Fail(wording::no_thread(&error)))?;
    let bound = cell_bound(&subject.limits);
    match rx.recv_timeout(bound) {
        Ok(checked) => {
            let _ = thread.join();
            checked
        }
        // A thread the provider blocks cannot be ended: it is left
        // detached, and said so.
        Err(_) => Err(Seen::Fail(wording::thread_blocked(bound))),
    }
}

fn in_runtime(subject: &Subject, body: for<'a> fn(&'a Env) -> BoxFuture<'a, Checked>) -> Checked {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Seen::Fail(wording::no_runtime(&error)))?;
    let checked = std::panic::catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            let mut env = Env::make(subject)?;
            env.tasks = alive_tasks();
            let releases = env.releases();
            let checked = body(&env).await;
            let left = env.leftovers(releases).await;
            drop(env);
            match (checked, left.is_empty()) {
                (Err(Seen::Fail(seen)), false) => Err(Seen::Fail(format!("{seen}; {}", left.join("; ")))),
                (Err(seen), _) => Err(seen),
                (Ok(_), false) => Err(Seen::Fail(left.join("; "))),
                (Ok(note), true) => Ok(note),
            }
        })
    }));
    runtime.shutdown_timeout(Duration::from_millis(100));
    checked.unwrap_or_else(|panic| Err(Seen::Fail(wording::cell_panicked(&panic_text(&*panic)))))
}
