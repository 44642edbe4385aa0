//! How `send_message` routes a message: a pure decision over what the
//! children's lock shows of the child (its [`ChildView`]), which the caller
//! executes (see [`SubagentControl::send_message`](super::SubagentControl::send_message)).
//!
//! In order: a live run of the caller's that the service does not own, or
//! not the activation's own, refuses the message (another parent's runs are
//! not in the view); a child known to be another parent's fails a started
//! task, with an unknown id's text; a child with an activation is steered, or refused when its
//! activation cannot take the message now; otherwise, with persistence, a
//! new activation starts. A refusal never falls through to a new
//! activation.

use dsh_subagent_api::{AgentId, Steerer};
use dsh_tasks::TaskStatus;

use super::ControlError;
use super::children::{Activation, ActivationRun, ChildEntry, LiveRun};

/// What the lock shows of a child when a message to it is routed.
pub(super) struct ChildView<'a> {
    /// The child the message names.
    pub(super) child: &'a str,
    /// The agent sending it.
    pub(super) caller: &'a AgentId,
    /// What the service knows of the child, if anything.
    pub(super) entry: Option<&'a ChildEntry>,
    /// The live run with the child's id, if any.
    pub(super) live: Option<LiveRun>,
    /// The status of the activation's task, once the task is registered and
    /// if it is the caller's (`Running` if the registry no longer knows it).
    pub(super) task_status: Option<TaskStatus>,
    /// Whether the service has a durable child store.
    pub(super) persistent: bool,
}

/// Where a message goes.
#[derive(Debug)]
pub(super) enum Decision {
    /// Refused synchronously: nothing is delivered and no task exists.
    Refuse(ControlError),
    /// A task is started that fails with this error (the child is known to
    /// be another parent's).
    Fail(ControlError),
    /// Live delivery into the running activation, whose task is `task_id`.
    Steer {
        /// The running activation's task.
        task_id: String,
        /// The handle that delivers into its turn.
        steerer: Steerer,
    },
    /// A new activation task that resumes the child.
    Activate,
}

/// Routes a message by what the lock shows.
pub(super) fn decide(view: &ChildView<'_>) -> Decision {
    let activation = view.entry.and_then(|entry| entry.activation.as_ref());
    if let Some(conflict) = ownership_conflict(view, activation) {
        return Decision::Refuse(conflict);
    }
    if view
        .entry
        .and_then(|entry| entry.parent.as_ref())
        .is_some_and(|known| known != view.caller)
    {
        return Decision::Fail(ControlError::Foreign {
            child: view.child.to_owned(),
        });
    }
    if let Some(activation) = activation {
        return match live_route(view, activation) {
            Ok((task_id, steerer)) => Decision::Steer { task_id, steerer },
            Err(refusal) => Decision::Refuse(refusal),
        };
    }
    if !view.persistent {
        return Decision::Refuse(ControlError::PersistenceUnavailable);
    }
    Decision::Activate
}

/// Why a message must not be routed at all: a live run with the child's id
/// that the service does not own, or that is not the run of the child's
/// activation.
fn ownership_conflict(view: &ChildView<'_>, activation: Option<&Activation>) -> Option<ControlError> {
    let live = view.live?;
    let child = view.child.to_owned();
    match activation {
        None if !live.owned => Some(ControlError::OwnershipConflict { child }),
        Some(Activation { run_id: Some(ours), .. }) if *ours != live.run_id && !live.owned => {
            Some(ControlError::RegistryMismatch { child })
        }
        // An activation still starting has announced nothing yet; a
        // settled run of our own is on its way out.
        _ => None,
    }
}

/// The running activation's task and live-delivery handle, or why a
/// message cannot join it.
fn live_route(view: &ChildView<'_>, activation: &Activation) -> Result<(String, Steerer), ControlError> {
    let child = view.child;
    let starting = || ControlError::ActivationStarting {
        child: child.to_owned(),
    };
    let Some(task_id) = activation.task_id.as_ref().filter(|_| activation.owner == *view.caller) else {
        return Err(starting());
    };
    let status = view.task_status.unwrap_or(TaskStatus::Running);
    if status != TaskStatus::Running {
        return Err(ControlError::ActivationSettling {
            child: child.to_owned(),
            task_id: task_id.clone(),
            status,
        });
    }
    match &activation.run {
        ActivationRun::Starting => Err(starting()),
        ActivationRun::Unsteerable => Err(ControlError::NoLiveDelivery {
            child: child.to_owned(),
        }),
        ActivationRun::Steerable(steerer) => Ok((task_id.clone(), steerer.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHILD: &str = "child-1";

    fn me() -> AgentId {
        AgentId::new("parent")
    }

    fn steerer() -> Steerer {
        Steerer::new(|_| Ok(()))
    }

    /// A child held by `me()`'s activation with a registered task.
    fn held(run: ActivationRun, run_id: Option<u64>) -> ChildEntry {
        ChildEntry {
            parent: Some(me()),
            activation: Some(Activation {
                serial: 1,
                owner: me(),
                task_id: Some("subagent-1".into()),
                run,
                run_id,
            }),
        }
    }

    /// Decides for `me()` over `entry`, with persistence and no live run.
    fn decide_for(entry: Option<&ChildEntry>, status: Option<TaskStatus>) -> Decision {
        let caller = me();
        decide(&ChildView {
            child: CHILD,
            caller: &caller,
            entry,
            live: None,
            task_status: status,
            persistent: true,
        })
    }

    fn refusal(decision: Decision) -> ControlError {
        match decision {
            Decision::Refuse(error) => error,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_or_settled_child_starts_an_activation() {
        assert!(matches!(decide_for(None, None), Decision::Activate));
        let settled = ChildEntry {
            parent: Some(me()),
            activation: None,
        };
        assert!(matches!(decide_for(Some(&settled), None), Decision::Activate));
    }

    #[test]
    fn without_persistence_nothing_starts() {
        let caller = me();
        let view = ChildView {
            child: CHILD,
            caller: &caller,
            entry: None,
            live: None,
            task_status: None,
            persistent: false,
        };
        assert_eq!(refusal(decide(&view)), ControlError::PersistenceUnavailable);
    }

    #[test]
    fn another_parents_child_fails_a_started_task() {
        let foreign = ChildEntry {
            parent: Some(AgentId::new("someone else")),
            activation: None,
        };
        let Decision::Fail(error) = decide_for(Some(&foreign), None) else {
            panic!("expected a failing task");
        };
        assert_eq!(error, ControlError::Foreign { child: CHILD.into() });
        // Also while the other parent's activation runs: it is never steered.
        let mut running = held(ActivationRun::Steerable(steerer()), None);
        running.parent = Some(AgentId::new("someone else"));
        assert!(matches!(decide_for(Some(&running), None), Decision::Fail(_)));
    }

    #[test]
    fn a_steerable_running_activation_is_steered() {
        let entry = held(ActivationRun::Steerable(steerer()), Some(7));
        let Decision::Steer { task_id, .. } = decide_for(Some(&entry), Some(TaskStatus::Running)) else {
            panic!("expected live delivery");
        };
        assert_eq!(task_id, "subagent-1");
        // A task the registry no longer knows reads as running.
        assert!(matches!(decide_for(Some(&entry), None), Decision::Steer { .. }));
    }

    #[test]
    fn an_activation_that_cannot_take_the_message_refuses_it_without_falling_through() {
        let child = || CHILD.to_owned();
        let entry = held(ActivationRun::Starting, None);
        assert_eq!(
            refusal(decide_for(Some(&entry), Some(TaskStatus::Running))),
            ControlError::ActivationStarting { child: child() }
        );
        let entry = held(ActivationRun::Unsteerable, None);
        assert_eq!(
            refusal(decide_for(Some(&entry), Some(TaskStatus::Running))),
            ControlError::NoLiveDelivery { child: child() }
        );
        let entry = held(ActivationRun::Steerable(steerer()), None);
        assert_eq!(
            refusal(decide_for(Some(&entry), Some(TaskStatus::Killed))),
            ControlError::ActivationSettling {
                child: child(),
                task_id: "subagent-1".into(),
                status: TaskStatus::Killed,
            }
        );
        // Its task not registered yet, or another caller's follow-up looking
        // the child up: starting.
        let mut registering = held(ActivationRun::Steerable(steerer()), None);
        if let Some(activation) = registering.activation.as_mut() {
            activation.task_id = None;
        }
        assert_eq!(
            refusal(decide_for(Some(&registering), Some(TaskStatus::Running))),
            ControlError::ActivationStarting { child: child() }
        );
        let lookup = ChildEntry {
            parent: None,
            activation: Some(Activation {
                serial: 2,
                owner: AgentId::new("someone else"),
                task_id: Some("subagent-2".into()),
                run: ActivationRun::Starting,
                run_id: None,
            }),
        };
        assert_eq!(
            refusal(decide_for(Some(&lookup), Some(TaskStatus::Running))),
            ControlError::ActivationStarting { child: child() }
        );
    }

    #[test]
    fn live_runs_the_service_does_not_own_are_never_adopted() {
        let caller = me();
        let view = |entry, live| ChildView {
            child: CHILD,
            caller: &caller,
            entry,
            live: Some(live),
            task_status: Some(TaskStatus::Running),
            persistent: true,
        };
        let foreign_run = LiveRun {
            run_id: 3,
            owned: false,
        };
        // A one-shot child's run with this id (the caller's: another
        // parent's runs are not in the view), and no activation.
        assert_eq!(
            refusal(decide(&view(None, foreign_run))),
            ControlError::OwnershipConflict { child: CHILD.into() }
        );
        // The activation's run is not the live one.
        let entry = held(ActivationRun::Steerable(steerer()), Some(7));
        assert_eq!(
            refusal(decide(&view(Some(&entry), foreign_run))),
            ControlError::RegistryMismatch { child: CHILD.into() }
        );
        // Our own run, or an activation that has announced nothing yet: routed.
        let ours = LiveRun { run_id: 7, owned: true };
        assert!(matches!(decide(&view(Some(&entry), ours)), Decision::Steer { .. }));
        let starting = held(ActivationRun::Starting, None);
        assert_eq!(
            refusal(decide(&view(Some(&starting), foreign_run))),
            ControlError::ActivationStarting { child: CHILD.into() }
        );
        // A settled run of our own on its way out, with no activation left.
        let settled = ChildEntry {
            parent: Some(me()),
            activation: None,
        };
        let leaving = LiveRun { run_id: 7, owned: true };
        assert!(matches!(decide(&view(Some(&settled), leaving)), Decision::Activate));
    }
}
