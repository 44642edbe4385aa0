//! The subagent sessions a child announces: what is logged of its faults,
//! and how a session it left running reads.

/// How a subagent session still running when its child's run ended reads:
/// its end is not known.
pub(crate) const SUBAGENT_DISCONNECTED: &str = "disconnected";

/// An update for a session the child never announced (or that ended).
pub(crate) fn subagent_unknown_session(session: &str) -> String {
    format!(
        "ACP child sent an update for session {session}, which it never announced as a subagent session (or which ended); ignored (logged once per run)"
    )
}

/// A `subagent_update` on a session that is neither the child's nor one
/// it announced.
pub(crate) fn subagent_unknown_parent(session: &str) -> String {
    format!(
        "ACP child announced a subagent on session {session}, which is neither its own nor one it announced; ignored (logged once per run)"
    )
}

/// A second terminal state for the same run of a subagent session.
pub(crate) fn subagent_second_end(session: &str) -> String {
    format!(
        "ACP child sent a second terminal state for subagent session {session}; the first stands (logged once per run)"
    )
}

/// More subagent sessions than are kept.
pub(crate) fn subagent_flood(limit: usize) -> String {
    format!("ACP child announced more than {limit} subagent sessions; the rest are not kept (logged once per run)")
}
