//! Stable error codes.

dsh_tools::error_codes! {
    /// The stable codes of task registry errors: importable, matchable, and what
    /// `code()` returns as text. The text of a code never changes; the table of
    /// every code is in `docs/errors.md`.
    pub enum ErrorCode {
        /// `UNKNOWN_TASK`: no task has the id.
        UnknownTask => "UNKNOWN_TASK",
        /// `FOREIGN_TASK`: the task belongs to another agent (its text is
        /// `UNKNOWN_TASK`'s, so the caller learns nothing of it).
        ForeignTask => "FOREIGN_TASK",
        /// `FORGOTTEN_TASK`: the task finished and is no longer kept.
        ForgottenTask => "FORGOTTEN_TASK",
        /// `INVALID_LABEL`: the task's label is empty.
        InvalidLabel => "INVALID_LABEL",
        /// `TASK_ID_TAKEN`: a task of the owner already has the id given.
        TaskIdTaken => "TASK_ID_TAKEN",
        /// `INVALID_TASK_ID`: the text is not a task id, `<kind>-<n>`.
        InvalidTaskId => "INVALID_TASK_ID",
        /// `OWNER_DISPOSED`: the owning agent was disposed.
        OwnerDisposed => "OWNER_DISPOSED",
    }
}
