//! Notices for an agent's next model call, from outside the conversation,
//! and the background work an agent may wait for before it ends its turn.

use dsh_tools::{AgentId, BoxFuture};

/// One notice for an agent: its text, and the background task it reports,
/// when it reports one (recorded with the message that delivers it, so that
/// a resumed agent is never told twice).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Notice {
    /// The background task the notice reports, when it reports one.
    pub task_id: Option<String>,
    /// What the agent's model reads.
    pub text: String,
}

impl Notice {
    /// A notice that reports no task.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            task_id: None,
            text: text.into(),
        }
    }

    /// A notice that reports the background task `task_id`.
    pub fn of_task(task_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            task_id: Some(task_id.into()),
            text: text.into(),
        }
    }
}

/// Where an agent's pending notices come from, such as "your background
/// task finished" from a task registry.
///
/// Before each model call of a run, the agent takes its pending notices and
/// appends them to the conversation as one user message (recorded in the
/// transcript like any other, with the tasks it reports). `take` hands each
/// notice over once.
///
/// Any `Fn(&AgentId) -> Vec<String>` is a source of notices that report no
/// task and with no background work to wait for, so a harness wires one
/// without this crate knowing its type:
///
/// ```
/// use std::sync::Arc;
/// use dsh_agent::{Notice, NoticeSource};
/// use dsh_tools::AgentId;
///
/// let source: Arc<dyn NoticeSource> = Arc::new(|agent: &AgentId| vec![format!("hello, {agent}")]);
/// assert_eq!(source.take(&AgentId::from("a")), [Notice::text("hello, a")]);
/// ```
pub trait NoticeSource: Send + Sync + 'static {
    /// Takes the notices pending for `agent`, oldest first.
    fn take(&self, agent: &AgentId) -> Vec<Notice>;

    /// Waits until a notice is pending for `agent` (`true`), or answers
    /// `false` at once when none is and nothing `agent` started in the
    /// background still runs: there is nothing to wait for. An agent whose
    /// runtime waits for its background work
    /// ([`EndOfRun::WaitForBackground`](crate::EndOfRun::WaitForBackground))
    /// calls it when its model answers. The default has no background work.
    fn wait_for_work(&self, agent: &AgentId) -> BoxFuture<'static, bool> {
        let _ = agent;
        Box::pin(async { false })
    }
}

impl<F> NoticeSource for F
where
    F: Fn(&AgentId) -> Vec<String> + Send + Sync + 'static,
{
    fn take(&self, agent: &AgentId) -> Vec<Notice> {
        self(agent).into_iter().map(Notice::text).collect()
    }
}
