//! A continuable child outlives its provider: started through one
//! provider, then continued by id through another made afresh (over a
//! fresh service, control service and store) after the first was dropped.

use std::sync::Arc;
use std::time::Duration;

use dsh_subagent::{Route, SubagentControl, SubagentService};
use dsh_subagent_api::{AgentRef, ChildStore, StartRequest, SubagentProvider};
use dsh_tasks::{TaskRegistry, TaskStatus};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::cell::{Checked, Env, PROMPT, Seen, panic_text};
use crate::wording;

/// The follow-up message the continued child gets.
pub const FOLLOW_UP: &str = "conformance: continue in one short line";

/// One process's worth: a provider made by the factory, its service,
/// tasks and control service over a store made afresh.
struct World {
    control: SubagentControl,
    tasks: TaskRegistry,
    parent: AgentRef,
    name: String,
    _service: SubagentService,
    _registration: dsh_subagent::ProviderRegistration,
}

impl World {
    fn open(env: &Env, store: Arc<dyn ChildStore>) -> Result<Self, Seen> {
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ((env.subject.factory)(), (env.subject.parent)())
        }));
        let (instance, parent) = made.map_err(|panic| Seen::Fail(wording::factory_panicked(&panic_text(&*panic))))?;
        let name = instance.provider.name().to_owned();
        let service = SubagentService::new();
        let registration = service
            .register_provider(instance.provider)
            .map_err(|error| Seen::Fail(wording::not_registered(&error)))?;
        let tasks = TaskRegistry::new();
        Ok(Self {
            control: SubagentControl::new(service.clone(), tasks.clone(), store),
            tasks,
            parent,
            name,
            _service: service,
            _registration: registration,
        })
    }

    /// Waits for task `id` to finish, within `bound`; its output, or what was seen.
    async fn finished(&self, id: &str, bound: Duration) -> Result<String, Seen> {
        let snapshot = self
            .tasks
            .wait(id, self.parent.id(), Some(bound))
            .await
            .map_err(|error| Seen::Fail(error.to_string()))?;
        match snapshot.status {
            TaskStatus::Completed => Ok(snapshot
                .output
                .read()
                .await
                .map(|text| text.to_string())
                .unwrap_or_default()),
            TaskStatus::Running => Err(Seen::Fail(wording::task_still_running(id, bound))),
            other => Err(Seen::Fail(wording::task_ended(
                id,
                other.as_str(),
                snapshot.detail.as_deref(),
            ))),
        }
    }
}

/// `continuation.remade`.
pub(crate) fn remade(env: &Env) -> BoxFuture<'_, Checked> {
    async move {
        if env.provider.continuation().is_none() {
            return Err(Seen::Skip(wording::NOT_CONTINUABLE.to_owned()));
        }
        let Some(store) = env.subject.store.clone() else {
            return Err(Seen::Skip(wording::NO_STORE.to_owned()));
        };
        let bound = env.limits.stage;
        let child = {
            let first = World::open(env, store())?;
            let request = StartRequest::text(PROMPT, first.parent.clone(), Default::default());
            let started = first
                .control
                .start_continuable(&first.name, "conformance".to_owned(), request)
                .map_err(|error| Seen::Fail(wording::continuable_refused(&error)))?;
            first.finished(&started.task_id, bound).await?;
            started.child_id
        };
        let second = World::open(env, store())?;
        let delivery = second
            .control
            .send_message(&second.parent, &child, FOLLOW_UP)
            .map_err(|error| Seen::Fail(wording::follow_up_refused(&error)))?;
        if delivery.route != Route::Started {
            return Err(Seen::Fail(wording::FOLLOW_UP_NOT_STARTED.to_owned()));
        }
        let answer = second.finished(&delivery.task_id, bound).await?;
        Ok(Some(wording::continued(&child, &answer)))
    }
    .boxed()
}
